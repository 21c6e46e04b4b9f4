//! Packing a package directory into a `.bmad` zip, with `integrity.sha256` stamped in.

use crate::digest::{self, MANIFEST_PATH};
use crate::files::PackageFiles;
use serde_json::Value;
use std::io::{Cursor, Write};

#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("bmad.json is missing or is not a JSON object")]
    ManifestNotObject,
    #[error("cannot write the archive: {0}")]
    Zip(#[from] zip::result::ZipError),
    #[error("cannot write the archive: {0}")]
    Io(#[from] std::io::Error),
}

/// The archive bytes and the digest stamped into its manifest.
#[derive(Debug, Clone)]
pub struct Packed {
    pub bytes: Vec<u8>,
    pub sha256: String,
    pub files: usize,
}

/// Builds a reproducible zip: entries sorted, fixed timestamps, deflate; `bmad.json` gets
/// `integrity.sha256` set to the content digest (which does not depend on that field).
pub fn pack(files: &PackageFiles) -> Result<Packed, PackError> {
    let sha256 = digest::content_digest(files);
    let manifest = files
        .get(MANIFEST_PATH)
        .ok_or(PackError::ManifestNotObject)?;
    let manifest = manifest.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(manifest);
    let mut value: Value =
        serde_json::from_slice(manifest).map_err(|_| PackError::ManifestNotObject)?;
    let object = value.as_object_mut().ok_or(PackError::ManifestNotObject)?;
    object.insert("integrity".into(), serde_json::json!({ "sha256": sha256 }));
    let mut stamped = serde_json::to_vec_pretty(&value).map_err(std::io::Error::from)?;
    stamped.push(b'\n');

    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for (path, bytes) in files.iter() {
        writer.start_file(path, options)?;
        if path == MANIFEST_PATH {
            writer.write_all(&stamped)?;
        } else {
            writer.write_all(bytes)?;
        }
    }
    let bytes = writer.finish()?.into_inner();
    Ok(Packed {
        bytes,
        sha256,
        files: files.len(),
    })
}
