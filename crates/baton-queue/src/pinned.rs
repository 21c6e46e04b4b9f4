//! What units pin by content: packages and recorded model traces, each stored once.
//!
//! A package is named by its **content digest** — the one baton shows for a package
//! everywhere (`baton package list`, `runs show`, the `integrity.sha256` of a packed `.bmad`) —
//! so a unit, its run and the submission all show the same digest. A trace is named by the
//! sha256 of its bytes. Both are checked against their name when read back.

use crate::error::QueueError;
use crate::queue::Queue;
use baton_package::{Diagnostics, Limits, Origin, PackageFiles, digest, files::read_zip_bytes};
use sha2::{Digest, Sha256};

/// A stored package.
#[derive(Debug, Clone)]
pub struct Package {
    /// Its content digest (an older baton stored the sha256 of the archive's bytes instead).
    pub sha256: String,
    pub name: String,
    pub version: String,
    pub bytes: Vec<u8>,
}

/// A stored trace.
#[derive(Debug, Clone)]
pub struct StoredTrace {
    pub sha256: String,
    /// The file name it was submitted under.
    pub name: String,
    pub bytes: Vec<u8>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The content digest of a packed package (`None`: not a package archive).
pub fn package_digest(bytes: &[u8]) -> Option<String> {
    let mut diags = Diagnostics::default();
    let files = read_zip_bytes(bytes, &Limits::default(), &mut diags)?;
    let files = PackageFiles::from_map(Origin::Zip("package.bmad".into()), files);
    Some(digest::content_digest(&files))
}

fn mismatch(what: &str, sha256: &str) -> QueueError {
    QueueError::Db {
        message: format!("{what} {sha256} does not match its digest"),
        sqlstate: None,
    }
}

impl Queue {
    /// Stores a packed package (a `.bmad` archive) by its content digest and returns the
    /// digest; storing the same package again is a no-op. Bytes that are not a package
    /// archive are refused.
    pub async fn put_package(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<String, QueueError> {
        let sha256 = package_digest(bytes).ok_or_else(|| {
            QueueError::InvalidInput(format!(
                "package {name} {version}: the bytes are not a packed package (.bmad)"
            ))
        })?;
        self.client()
            .execute(
                "INSERT INTO baton.packages (sha256, name, version, bytes) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (sha256) DO NOTHING",
                &[&sha256, &name, &version, &bytes],
            )
            .await
            .map_err(self.err())?;
        Ok(sha256)
    }

    /// A stored package, checked against its digest.
    pub async fn package(&self, sha256: &str) -> Result<Option<Package>, QueueError> {
        let row = self
            .client()
            .query_opt(
                "SELECT name, version, bytes FROM baton.packages WHERE sha256 = $1",
                &[&sha256],
            )
            .await
            .map_err(self.err())?;
        let Some(row) = row else { return Ok(None) };
        let bytes: Vec<u8> = row.get(2);
        // Stored by this baton (content digest) or by an older one (the archive's sha256).
        if package_digest(&bytes).as_deref() != Some(sha256)
            && hex(&Sha256::digest(&bytes)) != sha256
        {
            return Err(mismatch("package", sha256));
        }
        Ok(Some(Package {
            sha256: sha256.to_string(),
            name: row.get(0),
            version: row.get(1),
            bytes,
        }))
    }

    /// Stores a recorded trace by the sha256 of its bytes and returns it (a no-op when stored
    /// already).
    pub async fn put_trace(&self, name: &str, bytes: &[u8]) -> Result<String, QueueError> {
        let sha256 = hex(&Sha256::digest(bytes));
        self.client()
            .execute(
                "INSERT INTO baton.traces (sha256, name, bytes) VALUES ($1, $2, $3) \
                 ON CONFLICT (sha256) DO NOTHING",
                &[&sha256, &name, &bytes],
            )
            .await
            .map_err(self.err())?;
        Ok(sha256)
    }

    /// A stored trace, checked against its sha256.
    pub async fn trace(&self, sha256: &str) -> Result<Option<StoredTrace>, QueueError> {
        let row = self
            .client()
            .query_opt(
                "SELECT name, bytes FROM baton.traces WHERE sha256 = $1",
                &[&sha256],
            )
            .await
            .map_err(self.err())?;
        let Some(row) = row else { return Ok(None) };
        let bytes: Vec<u8> = row.get(1);
        if hex(&Sha256::digest(&bytes)) != sha256 {
            return Err(mismatch("trace", sha256));
        }
        Ok(Some(StoredTrace {
            sha256: sha256.to_string(),
            name: row.get(0),
            bytes,
        }))
    }
}
