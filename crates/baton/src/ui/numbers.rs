//! Numbers as people read them.

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `, 2,100 written to cache` when a provider wrote prompt tokens to its cache (Anthropic's
/// caching is paid for when written); nothing otherwise, so usage without writes reads as
/// before.
pub fn cache_writes(tokens: u64) -> String {
    if tokens == 0 {
        String::new()
    } else {
        format!(", {} written to cache", thousands(tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_writes_are_said_only_when_there_are_some() {
        assert_eq!(cache_writes(0), "");
        assert_eq!(cache_writes(2_100), ", 2,100 written to cache");
    }
}
