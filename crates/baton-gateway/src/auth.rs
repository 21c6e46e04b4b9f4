//! The per-run token: made fresh for each run, presented by the CLI as its API key.

use hyper::HeaderMap;

/// A fresh per-run token (256 random bits, hex), shaped like an API key so a CLI that checks
/// the key's look accepts it.
pub fn new_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("baton-run-{hex}"))
}

/// Whether `headers` present `token` as `x-api-key` or `Authorization: Bearer`.
pub fn presents(headers: &HeaderMap, token: &str) -> bool {
    let key = headers.get("x-api-key").map(|v| v.as_bytes());
    let bearer = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(|v| v.trim().as_bytes());
    [key, bearer]
        .into_iter()
        .flatten()
        .any(|given| same(given, token.as_bytes()))
}

/// Compares in time independent of where the bytes first differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_token_is_accepted_as_either_header_and_nothing_else_is() {
        let t = new_token().unwrap();
        assert!(t.len() > 64);
        assert_ne!(t, new_token().unwrap());
        assert!(presents(&headers(&[("x-api-key", &t)]), &t));
        assert!(presents(
            &headers(&[("authorization", &format!("Bearer {t}"))]),
            &t
        ));
        assert!(!presents(&headers(&[]), &t));
        assert!(!presents(&headers(&[("x-api-key", "baton-run-0")]), &t));
        assert!(!presents(&headers(&[("authorization", &t)]), &t));
        assert!(!presents(&headers(&[("x-api-key", &t[..t.len() - 1])]), &t));
    }
}
