//! Keeping secrets out of error messages. A provider's error may echo the API key (whole, or
//! masked like `sk-abc1****wxyz`) or the `Authorization` header; `LlmError` messages are stored
//! in the run index and the audit log and printed, so every message is scrubbed before it
//! leaves the HTTP client.
//!
//! What becomes `***`: the configured key wherever it appears; any piece of it of 8 characters
//! or more standing as a word (a key cut short by truncation); a masked form of it (a start
//! and/or an end of the key around `*`, `•`, `…` or `..`, showing at least 4 of its
//! characters); the value of any `Authorization:` header; and the token after `Bearer` (unless it
//! is a plain word, as in "invalid bearer token").

use crate::error::LlmError;

const MASK: &str = "***";
/// A piece of the key this long (or the whole key, if shorter) is the key.
const MIN_FRAGMENT: usize = 8;
/// A masked form must show this many characters of the key to be recognised.
const MIN_REVEALED: usize = 4;

/// Scrubs one key (and any bearer token or authorization header) from messages.
#[derive(Clone, Default)]
pub struct Scrubber {
    key: Option<String>,
}

impl Scrubber {
    pub fn new(key: Option<&str>) -> Scrubber {
        Scrubber {
            key: key
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_owned),
        }
    }

    /// The same error with every message scrubbed.
    pub fn error(&self, e: LlmError) -> LlmError {
        match e {
            LlmError::Http { status, message } => LlmError::Http {
                status,
                message: self.text(&message),
            },
            LlmError::RateLimited {
                message,
                retry_after,
            } => LlmError::RateLimited {
                message: self.text(&message),
                retry_after,
            },
            LlmError::Connect(m) => LlmError::Connect(self.text(&m)),
            LlmError::BadResponse(m) => LlmError::BadResponse(self.text(&m)),
            LlmError::StreamInterrupted(m) => LlmError::StreamInterrupted(self.text(&m)),
            LlmError::Config(m) => LlmError::Config(self.text(&m)),
            other => other,
        }
    }

    pub fn text(&self, s: &str) -> String {
        let s = authorization_values(s);
        let s = bearer_tokens(&s);
        match &self.key {
            Some(key) => key_pieces(&s, key),
            None => s,
        }
    }
}

/// `Authorization: <value>` / `"authorization":"<value>"` / `authorization=<value>`.
fn authorization_values(s: &str) -> String {
    const NAME: &str = "authorization";
    // ASCII lowercasing keeps every byte offset, so offsets found in `lower` index `s`.
    let lower = s.to_ascii_lowercase();
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let (mut copied, mut from) = (0, 0);
    while let Some(pos) = lower[from..].find(NAME) {
        let after = from + pos + NAME.len();
        let mut i = after;
        let mut separated = false;
        while i < bytes.len() && matches!(bytes[i], b'"' | b'\'' | b' ' | b'\t' | b':' | b'=') {
            separated |= matches!(bytes[i], b':' | b'=');
            i += 1;
        }
        from = after;
        if !separated {
            continue;
        }
        let end = scan(bytes, i, |b| {
            matches!(b, b'"' | b'\'' | b'\r' | b'\n' | b',' | b';' | b'}' | b'\\')
        });
        if end > i {
            out.push_str(&s[copied..i]);
            out.push_str(MASK);
            copied = end;
            from = end;
        }
    }
    out.push_str(&s[copied..]);
    out
}

/// The token after `Bearer`, unless it is a plain word ("invalid bearer token").
fn bearer_tokens(s: &str) -> String {
    const NAME: &str = "bearer";
    let lower = s.to_ascii_lowercase();
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let (mut copied, mut from) = (0, 0);
    while let Some(pos) = lower[from..].find(NAME) {
        let start = from + pos;
        let after = start + NAME.len();
        from = after;
        if start > 0 && bytes[start - 1].is_ascii_alphanumeric() {
            continue;
        }
        let i = scan(bytes, after, |b| !matches!(b, b' ' | b'\t' | b'='));
        if i == after {
            continue;
        }
        let end = scan(bytes, i, is_separator);
        let token = &s[i..end];
        if token.is_empty() || token.chars().all(|c| c.is_ascii_alphabetic()) {
            continue;
        }
        out.push_str(&s[copied..i]);
        out.push_str(MASK);
        copied = end;
        from = end;
    }
    out.push_str(&s[copied..]);
    out
}

/// The first index at or after `from` whose byte satisfies `stop` (or the end). Stopping only
/// at ASCII bytes keeps the index on a character boundary.
fn scan(bytes: &[u8], from: usize, stop: impl Fn(u8) -> bool) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| stop(b))
        .map_or(bytes.len(), |p| from + p)
}

/// Characters that end a word that may be (a piece of) a key.
fn is_separator(b: u8) -> bool {
    b.is_ascii_whitespace()
        || matches!(
            b,
            b'"' | b'\''
                | b'`'
                | b','
                | b';'
                | b':'
                | b'('
                | b')'
                | b'['
                | b']'
                | b'{'
                | b'}'
                | b'<'
                | b'>'
                | b'='
                | b'&'
                | b'?'
                | b'!'
                | b'\\'
        )
}

fn key_pieces(s: &str, key: &str) -> String {
    let s = if key.len() >= MIN_FRAGMENT {
        s.replace(key, MASK)
    } else {
        s.to_string()
    };
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        if is_separator(bytes[i]) {
            i += 1;
            continue;
        }
        let end = scan(bytes, i, is_separator);
        let word = without_full_stop(&s[i..end]);
        if is_key_piece(word, key) {
            out.push_str(&s[copied..i]);
            out.push_str(MASK);
            copied = i + word.len();
        }
        i = end;
    }
    out.push_str(&s[copied..]);
    out
}

/// A word at the end of a sentence keeps its full stop outside (but `..` is a mask).
fn without_full_stop(word: &str) -> &str {
    match word.strip_suffix('.') {
        Some(w) if !w.ends_with('.') => w,
        _ => word,
    }
}

fn is_key_piece(word: &str, key: &str) -> bool {
    if word.is_empty() {
        return false;
    }
    match mask_span(word) {
        Some((first, last)) => {
            let (head, tail) = (&word[..first], &word[last..]);
            head.len() + tail.len() >= MIN_REVEALED.min(key.len())
                && key.starts_with(head)
                && key.ends_with(tail)
        }
        None => word.len() >= MIN_FRAGMENT.min(key.len()) && key.contains(word),
    }
}

/// Where the masking of a word starts (its first mask character) and ends (after its last).
fn mask_span(word: &str) -> Option<(usize, usize)> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let is_mask = |k: usize| {
        let c = chars[k].1;
        matches!(c, '*' | '•' | '…')
            || (c == '.'
                && ((k > 0 && chars[k - 1].1 == '.')
                    || chars.get(k + 1).is_some_and(|n| n.1 == '.')))
    };
    let first = (0..chars.len()).find(|&k| is_mask(k))?;
    let last = (0..chars.len()).rev().find(|&k| is_mask(k))?;
    let (at, c) = chars[last];
    Some((chars[first].0, at + c.len_utf8()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-abc123def456ghi789jkl012mno345wxyz";

    fn scrub(s: &str) -> String {
        Scrubber::new(Some(KEY)).text(s)
    }

    #[test]
    fn the_key_whole_masked_or_cut_short() {
        assert_eq!(
            scrub(&format!("Incorrect API key provided: {KEY}.")),
            "Incorrect API key provided: ***."
        );
        assert_eq!(scrub(&format!("key={KEY}&x=1")), "key=***&x=1");
        assert_eq!(scrub(&format!("prefix{KEY}suffix")), "prefix***suffix");
        // A full stop after a trailing mask of dots merges into it; both go.
        assert_eq!(
            scrub("Incorrect API key provided: sk-abc123.... See docs."),
            "Incorrect API key provided: *** See docs."
        );
        for masked in [
            "sk-abc1****wxyz",
            "sk-abc123…",
            "sk-abc1…wxyz",
            "sk-a*******************************wxyz",
            "****************************wxyz",
            "sk-abc123de…",
        ] {
            assert_eq!(
                scrub(&format!("Incorrect API key provided: {masked}. See docs.")),
                "Incorrect API key provided: ***. See docs.",
                "{masked}"
            );
        }
        // A piece of the key cut by truncation.
        assert_eq!(scrub("invalid key 'def456ghi789'"), "invalid key '***'");
    }

    #[test]
    fn authorization_and_bearer_values() {
        assert_eq!(
            scrub("echo: Authorization: Bearer sk-other-token-1\r\nHost: x"),
            "echo: Authorization: ***\r\nHost: x"
        );
        assert_eq!(
            scrub(r#"{"headers":{"Authorization":"Bearer tok_9f8e7d","accept":"*/*"}}"#),
            r#"{"headers":{"Authorization":"***","accept":"*/*"}}"#
        );
        assert_eq!(
            scrub("sent bearer abc.def-123 twice"),
            "sent bearer *** twice"
        );
        assert_eq!(
            Scrubber::new(None).text("header authorization=xyz; next"),
            "header authorization=***; next"
        );
    }

    #[test]
    fn ordinary_messages_are_untouched() {
        for s in [
            "model 'gpt-4o' does not exist",
            "Invalid bearer token provided",
            "Authorization failed for this project",
            "sk-... is the usual prefix",
            "Rate limit reached for requests. Wait 20s.",
            "ünïcödé … text *** with masks",
            "",
        ] {
            assert_eq!(scrub(s), s);
        }
        // A short key is only ever a whole word.
        let short = Scrubber::new(Some("x"));
        assert_eq!(short.text("max x tokens"), "max *** tokens");
        assert_eq!(short.text("exceeded"), "exceeded");
    }

    #[test]
    fn every_text_variant_is_scrubbed() {
        let s = Scrubber::new(Some(KEY));
        let dirty = format!("bad {KEY}");
        let errors = [
            LlmError::Http {
                status: 401,
                message: dirty.clone(),
            },
            LlmError::RateLimited {
                message: dirty.clone(),
                retry_after: None,
            },
            LlmError::Connect(dirty.clone()),
            LlmError::BadResponse(dirty.clone()),
            LlmError::StreamInterrupted(dirty.clone()),
            LlmError::Config(dirty.clone()),
        ];
        for e in errors {
            let code = e.code();
            let clean = s.error(e);
            assert_eq!(clean.code(), code);
            assert!(!clean.to_string().contains("abc123"), "{clean}");
            assert!(clean.to_string().contains("bad ***"), "{clean}");
        }
    }
}
