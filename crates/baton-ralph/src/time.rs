//! Timestamps as maestro writes them (`Date.toISOString()`: UTC with milliseconds) and the
//! compact stamp of session ids.

use std::time::{SystemTime, UNIX_EPOCH};

fn now_parts() -> (u64, u32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_millis())
}

/// `2026-05-24T10:15:00.123Z`
pub fn now_iso() -> String {
    let (secs, millis) = now_parts();
    iso(secs, millis)
}

pub fn iso(secs: u64, millis: u32) -> String {
    let base = baton_store::time::rfc3339(secs);
    format!("{}.{millis:03}Z", base.trim_end_matches('Z'))
}

/// Milliseconds since the epoch, for decision ids (`DEC-<ms>-<revision>`).
pub fn now_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// `20260524-101500` (UTC), the stamp of `ralph-YYYYMMDD-HHmmss`.
pub fn session_stamp() -> String {
    let (secs, _) = now_parts();
    stamp(secs)
}

pub fn stamp(secs: u64) -> String {
    let t = baton_store::time::rfc3339(secs);
    let digits: String = t.chars().filter(char::is_ascii_digit).collect();
    format!(
        "{}-{}",
        &digits[..8.min(digits.len())],
        &digits[8.min(digits.len())..]
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats() {
        assert_eq!(super::iso(0, 7), "1970-01-01T00:00:00.007Z");
        assert_eq!(super::stamp(951_782_400 + 3_661), "20000229-010101");
    }
}
