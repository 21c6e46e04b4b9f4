//! `X-Baton-Signature: sha256=<hex>`: HMAC-SHA256 of the exact body bytes with the webhook's
//! secret, as GitHub signs its webhooks.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

pub const HEADER: &str = "X-Baton-Signature";

/// `sha256=<hex>` of `body` under `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length: this cannot fail.
    let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_4231_test_case_2() {
        // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn another_body_or_secret_signs_otherwise() {
        let s = signature(b"k", b"{}");
        assert_ne!(s, signature(b"k", b"{ }"));
        assert_ne!(s, signature(b"K", b"{}"));
    }
}
