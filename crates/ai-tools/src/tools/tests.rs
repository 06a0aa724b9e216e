//! Unit checks of the core tools' private helpers.

use super::time::iso8601;

#[test]
fn iso8601_formats_utc() {
    let cases = [
        (0, "1970-01-01T00:00:00.000Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (1_795_360_872_123, "2026-11-22T15:21:12.123Z"),
        (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
    ];
    for (ms, expected) in cases {
        assert_eq!(iso8601(ms), expected, "{ms}");
    }
}
