//! Entry names straight from a zip's central directory.
//!
//! The `zip` crate indexes entries by name, so of two entries with the same name it silently
//! keeps one: the archive must be read again, record by record, to say which name repeats.

/// Signature of a central directory file header.
const CENTRAL_HEADER: [u8; 4] = [0x50, 0x4b, 0x01, 0x02];
/// Fixed part of a central directory file header, before the name.
const FIXED_LEN: usize = 46;

/// The names that occur more than once among the central directory records starting at
/// `start`, in the order they first repeat. Reads at most `max_records` records and stops at
/// the first byte that is not a record, so a damaged directory yields what could be read.
pub fn duplicate_names(bytes: &[u8], start: u64, max_records: usize) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut repeated: Vec<&[u8]> = Vec::new();
    let mut pos = usize::try_from(start).unwrap_or(usize::MAX);
    for _ in 0..max_records {
        let Some(header) = pos
            .checked_add(FIXED_LEN)
            .and_then(|end| bytes.get(pos..end))
        else {
            break;
        };
        if header[..4] != CENTRAL_HEADER {
            break;
        }
        let field = |at: usize| usize::from(u16::from_le_bytes([header[at], header[at + 1]]));
        let (name_len, extra_len, comment_len) = (field(28), field(30), field(32));
        let name_start = pos + FIXED_LEN;
        let Some(name) = bytes.get(name_start..name_start + name_len) else {
            break;
        };
        if !seen.insert(name) && !repeated.contains(&name) {
            repeated.push(name);
        }
        pos = name_start + name_len + extra_len + comment_len;
    }
    repeated
        .into_iter()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> Vec<u8> {
        let mut r = CENTRAL_HEADER.to_vec();
        r.resize(FIXED_LEN, 0);
        r[28..30].copy_from_slice(&(name.len() as u16).to_le_bytes());
        r[30..32].copy_from_slice(&2u16.to_le_bytes());
        r.extend_from_slice(name.as_bytes());
        r.extend_from_slice(b"xx");
        r
    }

    #[test]
    fn finds_repeated_names_once_each() {
        let mut bytes = b"junk".to_vec();
        for name in ["a.md", "b.md", "a.md", "c.md", "a.md", "b.md"] {
            bytes.extend(record(name));
        }
        assert_eq!(duplicate_names(&bytes, 4, 100), vec!["a.md", "b.md"]);
        assert_eq!(duplicate_names(&bytes, 4, 2), Vec::<String>::new());
    }

    #[test]
    fn damaged_directories_do_not_panic() {
        let mut bytes = record("a.md");
        bytes.extend(record("a.md"));
        for cut in 0..bytes.len() {
            let _ = duplicate_names(&bytes[..cut], 0, 10);
        }
        assert!(duplicate_names(&bytes, u64::MAX, 10).is_empty());
        assert_eq!(duplicate_names(&bytes, 0, 10), vec!["a.md"]);
    }
}
