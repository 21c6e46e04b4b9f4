//! The server's secret: made from the operating system's random source, compared in constant
//! time, never printed by `Debug`.

use std::fmt::Write as _;

/// A secret of 256 bits from the operating system's random source, as 64 hex digits.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// A fresh token; fails only when the OS has no random source to give.
    pub fn generate() -> Result<Token, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        let mut text = String::with_capacity(64);
        for b in bytes {
            // Writing to a String cannot fail.
            let _ = write!(text, "{b:02x}");
        }
        Ok(Token(text))
    }

    /// A known token, for tests that need to build a URL before the server starts.
    pub fn from_text(text: &str) -> Token {
        Token(text.to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares in time independent of where the first difference is.
    pub fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), candidate.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

impl std::fmt::Debug for Token {
    // Never in a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_has_256_bits_of_hex_and_two_differ() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_eq!(a.as_str().len(), 64);
        assert!(a.as_str().chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.as_str(), b.as_str());
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(""));
        assert_eq!(format!("{a:?}"), "Token(..)");
    }
}
