//! Reading a package's files into memory, from a directory or a `.bmad` zip, safely.
//!
//! Packages are small (kilobytes), so the whole package is read once and every later check works
//! on the in-memory map: no second read can see a different file, and a zip never has to be
//! extracted to disk to be validated.

use crate::diagnostic::{Code, Diagnostic, Diagnostics};
use crate::paths;
use crate::zip_names;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Size limits applied while reading a package. Declared zip sizes are not trusted: the limits
/// are enforced on the bytes actually produced.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_files: usize,
    pub max_file_bytes: u64,
    pub max_total_bytes: u64,
    /// Largest accepted compressed size of a `.bmad` file.
    pub max_archive_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_files: 10_000,
            max_file_bytes: 16 * 1024 * 1024,
            max_total_bytes: 64 * 1024 * 1024,
            max_archive_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Where the files came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Directory(PathBuf),
    Zip(PathBuf),
}

/// The files of a package keyed by normalized package-relative path.
#[derive(Debug, Clone)]
pub struct PackageFiles {
    origin: Origin,
    files: BTreeMap<String, Vec<u8>>,
}

impl PackageFiles {
    pub fn from_map(origin: Origin, files: BTreeMap<String, Vec<u8>>) -> Self {
        PackageFiles { origin, files }
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }

    pub fn contains(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    /// True when some file lives under `dir/`.
    pub fn has_dir(&self, dir: &str) -> bool {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        self.files
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn total_bytes(&self) -> u64 {
        self.files.values().map(|v| v.len() as u64).sum()
    }

    /// Replaces a file's bytes (used by `pack` to stamp the integrity digest).
    pub fn insert(&mut self, path: String, bytes: Vec<u8>) {
        self.files.insert(path, bytes);
    }
}

/// Reads a package from `path` (a directory, or a `.bmad`/zip file). Problems with individual
/// entries are reported and the entry skipped; problems that make the package unreadable return
/// `None`.
pub fn read_package(path: &Path, limits: &Limits, diags: &mut Diagnostics) -> Option<PackageFiles> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            diags.push(
                Diagnostic::error(
                    Code::PackageNotFound,
                    format!("no package at {}", path.display()),
                )
                .hint("pass a package directory (with bmad.json) or a .bmad file"),
            );
            return None;
        }
        Err(e) => {
            diags.push(read_failed(path, &e));
            return None;
        }
    };
    if meta.is_dir() {
        read_dir_package(path, limits, diags)
    } else {
        read_zip_package(path, limits, diags)
    }
}

fn read_failed(path: &Path, e: &io::Error) -> Diagnostic {
    Diagnostic::error(
        Code::PackageReadFailed,
        format!("cannot read {}: {e}", path.display()),
    )
}

/// Skipped when reading a directory: version-control and editor litter, never package content.
fn is_ignored_name(name: &str) -> bool {
    name.starts_with('.') || name == "Thumbs.db" || name == "__MACOSX"
}

fn too_large(what: String) -> Diagnostic {
    Diagnostic::error(Code::PackageTooLarge, what)
        .hint("packages hold workflow text; keep large data out of the package")
}

fn read_dir_package(root: &Path, limits: &Limits, diags: &mut Diagnostics) -> Option<PackageFiles> {
    let canonical_root = match fs::canonicalize(root) {
        Ok(p) => p,
        Err(e) => {
            diags.push(read_failed(root, &e));
            return None;
        }
    };
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    // Explicit stack instead of recursion: depth is bounded by the file limit, not the call stack.
    let mut pending: Vec<(PathBuf, String)> = vec![(canonical_root.clone(), String::new())];
    while let Some((dir, rel_dir)) = pending.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                diags.push(read_failed(&dir, &e));
                return None;
            }
        };
        let mut names: Vec<_> = entries.filter_map(Result::ok).collect();
        names.sort_by_key(|e| e.file_name());
        for entry in names {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                diags.push(
                    Diagnostic::error(Code::PackagePathUnsafe, "a file name is not valid UTF-8")
                        .file(rel_dir.clone())
                        .hint("rename the file using UTF-8 characters"),
                );
                continue;
            };
            if is_ignored_name(&name) {
                continue;
            }
            let rel = paths::join(&rel_dir, &name);
            let path = entry.path();
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let mut target = path.clone();
            if file_type.is_symlink() {
                match fs::canonicalize(&path) {
                    Ok(resolved) if resolved.starts_with(&canonical_root) => target = resolved,
                    _ => {
                        diags.push(
                            Diagnostic::error(
                                Code::PackageUnsafeSymlink,
                                format!("symlink {rel} points outside the package"),
                            )
                            .file(rel)
                            .hint("replace the link with a copy of the file"),
                        );
                        continue;
                    }
                }
            }
            let meta = match fs::metadata(&target) {
                Ok(m) => m,
                Err(e) => {
                    diags.push(read_failed(&target, &e));
                    continue;
                }
            };
            if meta.is_dir() {
                if file_type.is_symlink() {
                    // A link to a directory inside the package could form a loop; the real
                    // directory is read anyway, so the link adds nothing.
                    continue;
                }
                pending.push((path, rel));
                continue;
            }
            if !meta.is_file() {
                diags.push(
                    Diagnostic::error(
                        Code::PackagePathUnsafe,
                        format!("{rel} is not a regular file"),
                    )
                    .file(rel)
                    .hint("packages may only hold regular files"),
                );
                continue;
            }
            if files.len() >= limits.max_files {
                diags.push(too_large(format!(
                    "the package has more than {} files",
                    limits.max_files
                )));
                return None;
            }
            let bytes = match read_capped(fs::File::open(&target), limits.max_file_bytes) {
                Ok(Some(b)) => b,
                Ok(None) => {
                    diags.push(
                        too_large(format!(
                            "{rel} is larger than {} bytes",
                            limits.max_file_bytes
                        ))
                        .file(rel),
                    );
                    continue;
                }
                Err(e) => {
                    diags.push(read_failed(&target, &e));
                    continue;
                }
            };
            total += bytes.len() as u64;
            if total > limits.max_total_bytes {
                diags.push(too_large(format!(
                    "the package is larger than {} bytes",
                    limits.max_total_bytes
                )));
                return None;
            }
            files.insert(rel, bytes);
        }
    }
    Some(PackageFiles::from_map(
        Origin::Directory(root.to_path_buf()),
        files,
    ))
}

/// Reads at most `cap` bytes; `Ok(None)` when the source holds more.
fn read_capped(source: io::Result<impl Read>, cap: u64) -> io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    source?.take(cap + 1).read_to_end(&mut out)?;
    Ok((out.len() as u64 <= cap).then_some(out))
}

fn read_zip_package(path: &Path, limits: &Limits, diags: &mut Diagnostics) -> Option<PackageFiles> {
    let bytes = match read_capped(fs::File::open(path), limits.max_archive_bytes) {
        Ok(Some(b)) => b,
        Ok(None) => {
            diags.push(too_large(format!(
                "{} is larger than {} bytes",
                path.display(),
                limits.max_archive_bytes
            )));
            return None;
        }
        Err(e) => {
            diags.push(read_failed(path, &e));
            return None;
        }
    };
    let files = read_zip_bytes(&bytes, limits, diags)?;
    Some(PackageFiles::from_map(
        Origin::Zip(path.to_path_buf()),
        files,
    ))
}

/// Decodes a zip archive held in memory. Public so fuzz and property tests can feed it bytes.
pub fn read_zip_bytes(
    bytes: &[u8],
    limits: &Limits,
    diags: &mut Diagnostics,
) -> Option<BTreeMap<String, Vec<u8>>> {
    let mut archive = match zip::ZipArchive::new(io::Cursor::new(bytes)) {
        Ok(a) => a,
        Err(e) => {
            diags.push(
                Diagnostic::error(Code::ZipInvalid, format!("not a readable zip archive: {e}"))
                    .hint("a .bmad file is a zip; create it with `baton package pack <DIR> -o X.bmad`"),
            );
            return None;
        }
    };
    if archive.len() > limits.max_files {
        diags.push(too_large(format!(
            "the archive has {} entries, more than {}",
            archive.len(),
            limits.max_files
        )));
        return None;
    }
    if archive.has_duplicate_names() {
        report_duplicate_names(bytes, archive.central_directory_start(), limits, diags);
    }
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    for index in 0..archive.len() {
        let mut entry = match archive.by_index(index) {
            Ok(e) => e,
            Err(e) => {
                diags.push(Diagnostic::error(
                    Code::ZipInvalid,
                    format!("zip entry #{index} cannot be read: {e}"),
                ));
                continue;
            }
        };
        let raw_name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        let name = match paths::normalize(&raw_name) {
            Ok(n) => n,
            Err(problem) => {
                diags.push(
                    Diagnostic::error(
                        Code::ZipUnsafePath,
                        format!("zip entry {raw_name:?} is unsafe: {}", problem.describe()),
                    )
                    .file(raw_name.replace('\0', "\\0"))
                    .hint("entries must be relative paths inside the package; rebuild the archive with `baton package pack`"),
                );
                continue;
            }
        };
        if entry.is_dir() {
            continue;
        }
        if entry.is_symlink()
            || entry
                .unix_mode()
                .is_some_and(|m| m & 0o170000 != 0o100000 && m & 0o170000 != 0)
        {
            diags.push(
                Diagnostic::error(
                    Code::ZipUnsafePath,
                    format!("zip entry {name} is a link or special file"),
                )
                .file(name)
                .hint("archives may only hold regular files"),
            );
            continue;
        }
        if name.split('/').any(is_ignored_name) {
            continue;
        }
        let budget = limits.max_file_bytes.min(limits.max_total_bytes - total);
        let mut data = Vec::new();
        if let Err(e) = (&mut entry).take(budget + 1).read_to_end(&mut data) {
            diags.push(
                Diagnostic::error(
                    Code::ZipInvalid,
                    format!("zip entry {name} is corrupt: {e}"),
                )
                .file(name),
            );
            continue;
        }
        if data.len() as u64 > budget {
            diags.push(
                Diagnostic::error(
                    Code::ZipTooLarge,
                    format!(
                        "zip entry {name} expands past the limit ({} bytes per file, {} in all); refusing a possible zip bomb",
                        limits.max_file_bytes, limits.max_total_bytes
                    ),
                )
                .file(name)
                .hint("packages hold workflow text; keep large data out of the package"),
            );
            return None;
        }
        total += data.len() as u64;
        if files.insert(name.clone(), data).is_some() {
            diags.push(duplicate_entry(&name));
        }
    }
    Some(files)
}

fn duplicate_entry(name: &str) -> Diagnostic {
    Diagnostic::error(
        Code::ZipDuplicateEntry,
        format!("zip holds {name} more than once; refusing to guess which copy is meant"),
    )
    .file(name.replace('\0', "\\0"))
    .hint("rebuild the archive with `baton package pack`")
}

/// Entries with the very same name: the zip reader keeps only one of them, so they are found
/// in the central directory itself.
fn report_duplicate_names(bytes: &[u8], start: u64, limits: &Limits, diags: &mut Diagnostics) {
    let names = zip_names::duplicate_names(bytes, start, limits.max_files.saturating_add(1));
    if names.is_empty() {
        // The reader saw a repeat the scan could not name (a directory past the file limit).
        diags.push(
            Diagnostic::error(
                Code::ZipDuplicateEntry,
                "the zip's central directory lists an entry more than once",
            )
            .hint("rebuild the archive with `baton package pack`"),
        );
        return;
    }
    for name in names {
        diags.push(duplicate_entry(&name));
    }
}
