//! The package content digest: the value of `bmad.json` `integrity.sha256` and the hash part of
//! an installed package id.
//!
//! A hash of the zip bytes cannot be stored inside the zip it hashes, and it would change with
//! compression settings and timestamps. baton therefore hashes the *content*: for every file,
//! sorted by path, the line `"<sha256 of the file>  <path>\n"` (the `sha256sum` format), and
//! takes the sha256 of those lines. `bmad.json` is hashed in canonical form (keys sorted, no
//! whitespace) without its `integrity` member, so stamping the digest does not change it and a
//! directory and its packed `.bmad` have the same digest.

use crate::files::PackageFiles;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

pub const MANIFEST_PATH: &str = "bmad.json";

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Computes the content digest of a package.
pub fn content_digest(files: &PackageFiles) -> String {
    let mut lines = Sha256::new();
    for (path, bytes) in files.iter() {
        let file_hash = if path == MANIFEST_PATH {
            sha256_hex(&manifest_without_integrity(bytes))
        } else {
            sha256_hex(bytes)
        };
        lines.update(file_hash.as_bytes());
        lines.update(b"  ");
        lines.update(path.as_bytes());
        lines.update(b"\n");
    }
    hex(&lines.finalize())
}

/// Canonical bytes of the manifest without `integrity`; the raw bytes if it is not JSON.
fn manifest_without_integrity(bytes: &[u8]) -> Vec<u8> {
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match serde_json::from_slice::<Value>(text) {
        Ok(Value::Object(mut map)) => {
            map.shift_remove("integrity");
            let mut out = Vec::with_capacity(bytes.len());
            write_canonical(&Value::Object(map), &mut out);
            out
        }
        _ => bytes.to_vec(),
    }
}

/// JSON with object keys sorted and no insignificant whitespace.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(Value::String((*key).clone()).to_string().as_bytes());
                out.push(b':');
                write_canonical(&map[*key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend_from_slice(scalar.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::Origin;
    use std::collections::BTreeMap;

    fn files(manifest: &str) -> PackageFiles {
        let mut map = BTreeMap::new();
        map.insert("bmad.json".to_string(), manifest.as_bytes().to_vec());
        map.insert("a.md".to_string(), b"hello".to_vec());
        PackageFiles::from_map(Origin::Directory("x".into()), map)
    }

    #[test]
    fn digest_ignores_integrity_and_formatting_of_the_manifest() {
        let a = content_digest(&files(r#"{"name":"x","version":"1.0.0"}"#));
        let b = content_digest(&files(
            "{\n  \"version\": \"1.0.0\",\n  \"name\": \"x\",\n  \"integrity\": {\"sha256\": \"00\"}\n}",
        ));
        assert_eq!(a, b);
        let c = content_digest(&files(r#"{"name":"y","version":"1.0.0"}"#));
        assert_ne!(a, c);
    }

    #[test]
    fn digest_depends_on_every_file() {
        let mut f = files("{}");
        let before = content_digest(&f);
        f.insert("a.md".into(), b"hellO".to_vec());
        assert_ne!(before, content_digest(&f));
    }
}
