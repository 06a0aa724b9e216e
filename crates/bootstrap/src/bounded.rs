//! Reading an input whole, but never more of it than it can legitimately hold: a path that names
//! a device or a huge file by mistake (`/dev/zero`, a log), or a pipe that never ends, is refused
//! once it passes its bound, not read until memory runs out.

use std::io::Read;

/// `reader` to its end, or `Ok(None)` once it has given more than `limit` bytes (it reads at
/// most `limit + 1`).
pub(crate) fn read_at_most(reader: impl Read, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// `bytes` as a person reads a bound: `64 MiB`, `4 KiB`, else `1000 bytes`.
pub(crate) fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An input that never ends is cut one byte past the bound; one at the bound is read whole.
    #[test]
    fn reads_up_to_the_limit_and_refuses_past_it() {
        assert_eq!(read_at_most(std::io::repeat(0), 16).unwrap(), None);
        assert_eq!(read_at_most(&[7u8; 16][..], 16).unwrap(), Some(vec![7; 16]));
        assert_eq!(read_at_most(&[][..], 0).unwrap(), Some(vec![]));
    }

    #[test]
    fn sizes_read_as_a_person_writes_them() {
        assert_eq!(size(64 << 20), "64 MiB");
        assert_eq!(size(4 << 10), "4 KiB");
        assert_eq!(size(1000), "1000 bytes");
        assert_eq!(size((1 << 20) + 1), "1048577 bytes");
    }
}
