//! git's loose objects, hashed and written in this process: a checkpoint's blobs, trees and
//! commit cost no git process (each one costs 3–10 ms to start, more on a loaded machine).
//! Nothing here runs a program, reads a configuration or looks at hooks: the bytes are the
//! files' own (no filter, no end-of-line conversion), as a worker's checkpoints always were
//! (its git had no filter configured).

use flate2::Compression;
use flate2::write::ZlibEncoder;
use sha1::{Digest, Sha1};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// An object's id (SHA-1).
pub(crate) type Oid = [u8; 20];

/// The mode git gives a folder in a tree.
pub(crate) const TREE_MODE: u32 = 0o40000;

pub(crate) fn to_hex(oid: &Oid) -> String {
    crate::git::hex(oid)
}

pub(crate) fn from_hex(text: &str) -> Option<Oid> {
    if text.len() != 40 {
        return None;
    }
    let mut oid = [0u8; 20];
    for (i, byte) in oid.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(oid)
}

fn digest(hasher: Sha1) -> Oid {
    let mut oid = [0u8; 20];
    oid.copy_from_slice(hasher.finalize().as_slice());
    oid
}

/// The id of an object of `kind` holding `body`.
pub(crate) fn hash(kind: &str, body: &[u8]) -> Oid {
    let mut h = Sha1::new();
    h.update(format!("{kind} {}\0", body.len()).as_bytes());
    h.update(body);
    digest(h)
}

/// A repository's object folder.
pub(crate) struct Objects {
    dir: PathBuf,
}

static TEMP: AtomicU64 = AtomicU64::new(0);

impl Objects {
    pub fn new(dir: PathBuf) -> Objects {
        Objects { dir }
    }

    fn path(&self, oid: &Oid) -> PathBuf {
        let hex = to_hex(oid);
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

    /// Writes the object (unless it is there loose already) and returns its id.
    pub fn write(&self, kind: &str, body: &[u8]) -> std::io::Result<Oid> {
        let oid = hash(kind, body);
        let path = self.path(&oid);
        if path.exists() {
            return Ok(oid);
        }
        let temp = self.temp_file()?;
        let mut z = ZlibEncoder::new(temp.1, Compression::fast());
        z.write_all(format!("{kind} {}\0", body.len()).as_bytes())?;
        z.write_all(body)?;
        z.finish()?;
        self.place(&temp.0, &path)?;
        Ok(oid)
    }

    /// Writes the blob of a file of `len` bytes read from `source` (unless it is there loose
    /// already) and returns its id, with the bytes when there are at most `keep_up_to` of
    /// them; a larger file goes in one pass (the hash and the compressed object at once),
    /// never held in memory.
    pub fn write_blob(
        &self,
        mut source: impl Read,
        len: u64,
        keep_up_to: u64,
    ) -> std::io::Result<(Oid, Option<Vec<u8>>)> {
        if len <= keep_up_to {
            // Small: hashed before anything is written, so a file read again unchanged (a
            // racily clean one, every checkpoint) costs a read and a hash, not a new object.
            let mut bytes = Vec::with_capacity(len as usize);
            source.take(len.saturating_add(1)).read_to_end(&mut bytes)?;
            if bytes.len() as u64 != len {
                return Err(std::io::Error::other(
                    "the file changed size while it was read",
                ));
            }
            let oid = self.write("blob", &bytes)?;
            return Ok((oid, Some(bytes)));
        }
        let header = format!("blob {len}\0");
        let mut h = Sha1::new();
        h.update(header.as_bytes());
        let (temp_path, file) = self.temp_file()?;
        let mut z = ZlibEncoder::new(file, Compression::fast());
        z.write_all(header.as_bytes())?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut read = 0u64;
        loop {
            let n = source.read(&mut buf)?;
            if n == 0 {
                break;
            }
            read += n as u64;
            if read > len {
                break;
            }
            h.update(&buf[..n]);
            z.write_all(&buf[..n])?;
        }
        z.finish()?;
        if read != len {
            let _ = std::fs::remove_file(&temp_path);
            return Err(std::io::Error::other(
                "the file changed size while it was read",
            ));
        }
        let oid = digest(h);
        let path = self.path(&oid);
        if path.exists() {
            let _ = std::fs::remove_file(&temp_path);
        } else {
            self.place(&temp_path, &path)?;
        }
        Ok((oid, None))
    }

    fn temp_file(&self) -> std::io::Result<(PathBuf, std::fs::File)> {
        std::fs::create_dir_all(&self.dir)?;
        let n = TEMP.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir
            .join(format!("tmp_obj_baton_{}_{n}", std::process::id()));
        let file = std::fs::File::create(&path)?;
        Ok((path, file))
    }

    /// Moves a written object to its place, read-only as git keeps them. Not synced: the
    /// mirror is a cache; what must survive is on the remote and in the database.
    fn place(&self, temp: &Path, path: &Path) -> std::io::Result<()> {
        std::fs::set_permissions(temp, std::fs::Permissions::from_mode(0o444))?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(temp, path)
    }
}

/// A tree's body from its entries (name, mode, id), in any order: git sorts a folder's
/// name as if it ended with `/`.
pub(crate) fn tree_body(entries: &mut [(&str, u32, Oid)]) -> Vec<u8> {
    entries.sort_by_key(|a| sort_key(a.0, a.1));
    let mut body = Vec::new();
    for (name, mode, oid) in entries.iter() {
        body.extend_from_slice(format!("{mode:o} {name}\0").as_bytes());
        body.extend_from_slice(oid);
    }
    body
}

fn sort_key(name: &str, mode: u32) -> Vec<u8> {
    let mut key = name.as_bytes().to_vec();
    if mode == TREE_MODE {
        key.push(b'/');
    }
    key
}

/// A commit's body: one parent, the worker's identity, `seconds` since the epoch (UTC).
pub(crate) fn commit_body(tree: &Oid, parent: &Oid, seconds: u64, message: &str) -> Vec<u8> {
    let who = format!("baton worker <worker@baton.invalid> {seconds} +0000");
    format!(
        "tree {}\nparent {}\nauthor {who}\ncommitter {who}\n\n{}\n",
        to_hex(tree),
        to_hex(parent),
        message.trim_end()
    )
    .into_bytes()
}
