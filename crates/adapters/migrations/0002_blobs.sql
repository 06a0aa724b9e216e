-- Content-addressed blobs (SqliteBlobStore), in the same file as the rows that reference them,
-- so they share one write-ahead log: a blob batch written before a step is durable no later
-- than that step's commit.
--
-- Rows are appended in rowid order, so a batch of small blobs fills pages one after the other
-- (a table keyed by the hash would put each blob on a random page); the hash has its own index.
CREATE TABLE blobs (
    id    INTEGER PRIMARY KEY,
    hash  TEXT NOT NULL UNIQUE CHECK (length(hash) = 64),
    bytes BLOB NOT NULL
);
