-- Content-addressed blobs (SqliteBlobStore), in the same file as the rows that reference them,
-- so they share one write-ahead log: a blob batch written before a step is durable no later
-- than that step's commit.
CREATE TABLE blobs (
    hash  TEXT PRIMARY KEY NOT NULL CHECK (length(hash) = 64),
    bytes BLOB NOT NULL
) WITHOUT ROWID;
