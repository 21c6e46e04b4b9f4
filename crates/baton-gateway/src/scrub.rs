//! Keeps the operator's key out of what the CLI receives: an upstream (or a proxy before it)
//! that echoes the request's headers in an error would hand the key to the CLI, and so to the
//! model. The answer passes unchanged unless it holds the key, even split across chunks.

use crate::record::REDACTED;
use bytes::Bytes;

#[derive(Debug)]
pub struct Scrub {
    secret: Vec<u8>,
    /// The end of the previous chunk, held back because it could be the key's beginning.
    pending: Vec<u8>,
}

impl Scrub {
    pub fn new(secret: &str) -> Scrub {
        Scrub {
            secret: secret.as_bytes().to_vec(),
            pending: Vec::new(),
        }
    }

    /// The part of the answer that can be passed on after `chunk`.
    pub fn push(&mut self, chunk: Bytes) -> Bytes {
        if self.secret.is_empty() {
            return chunk;
        }
        if self.pending.is_empty() && !contains(&chunk, &self.secret) {
            let keep = self.held_back(&chunk);
            if keep == 0 {
                // The usual case: the chunk goes on as it came, uncopied.
                return chunk;
            }
            self.pending = chunk[chunk.len() - keep..].to_vec();
            return chunk.slice(..chunk.len() - keep);
        }
        let mut all = std::mem::take(&mut self.pending);
        all.extend_from_slice(&chunk);
        let all = replace(&all, &self.secret);
        let keep = self.held_back(&all);
        self.pending = all[all.len() - keep..].to_vec();
        Bytes::from(all[..all.len() - keep].to_vec())
    }

    /// What was held back, at the answer's end.
    pub fn finish(self) -> Bytes {
        Bytes::from(self.pending)
    }

    /// The length of the longest end of `bytes` that begins the secret (but is not all of it).
    fn held_back(&self, bytes: &[u8]) -> usize {
        let longest = (self.secret.len() - 1).min(bytes.len());
        (1..=longest)
            .rev()
            .find(|k| bytes[bytes.len() - k..] == self.secret[..*k])
            .unwrap_or(0)
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn replace(bytes: &[u8], secret: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(secret) {
            out.extend_from_slice(REDACTED.as_bytes());
            i += secret.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(secret: &str, chunks: &[&str]) -> String {
        let mut s = Scrub::new(secret);
        let mut out = Vec::new();
        for c in chunks {
            out.extend_from_slice(&s.push(Bytes::from(c.to_string())));
        }
        out.extend_from_slice(&s.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_key_is_replaced_even_split_and_everything_else_passes() {
        assert_eq!(
            through("sk-abc", &["data: x\n\n", "data: y\n\n"]),
            "data: x\n\ndata: y\n\n"
        );
        assert_eq!(through("sk-abc", &["key sk-", "abc!"]), "key <redacted>!");
        assert_eq!(
            through("sk-abc", &["s", "k", "-ab", "c sk-abc"]),
            "<redacted> <redacted>"
        );
        assert_eq!(through("sk-abc", &["ends sk-ab"]), "ends sk-ab");
        assert_eq!(through("sk-abc", &["sk-sk-abc"]), "sk-<redacted>");
    }
}
