//! git's index file read in this process, once per unit: the entries of the commit a unit's
//! worktree was checked out at, with the file times and sizes git saw, so the first checkpoint
//! hashes only the files that changed since. Versions 2 to 4; a split or sparse index, or one
//! with conflicts, is not read (the caller asks git for the commit's entries instead).

use crate::objects::Oid;
use std::os::unix::fs::MetadataExt;

/// What identifies a file's content without reading it (git's "stat data", 32-bit as the
/// index keeps it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    mtime: (u32, u32),
    ctime: (u32, u32),
    ino: u32,
    size: u32,
    mode: u32,
}

impl Stat {
    pub fn of(meta: &std::fs::Metadata) -> Stat {
        Stat {
            mtime: (meta.mtime() as u32, meta.mtime_nsec() as u32),
            ctime: (meta.ctime() as u32, meta.ctime_nsec() as u32),
            ino: meta.ino() as u32,
            size: meta.size() as u32,
            mode: meta.mode(),
        }
    }

    /// Stat data no file has (an entry whose file must be read).
    pub fn unknown() -> Stat {
        Stat {
            mtime: (0, 0),
            ctime: (0, 0),
            ino: 0,
            size: u32::MAX,
            mode: 0,
        }
    }

    /// The modification time, in nanoseconds (32-bit seconds).
    pub fn mtime_ns(&self) -> u64 {
        u64::from(self.mtime.0) * 1_000_000_000 + u64::from(self.mtime.1)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct IndexEntry {
    pub path: String,
    pub mode: u32,
    pub oid: Oid,
    /// Without the mode's permission bits (git keeps 0644 or 0755 there, not the file's).
    pub stat: Stat,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }
    /// git's offset varint (index version 4).
    fn varint(&mut self) -> Option<usize> {
        let mut c = *self.take(1)?.first()?;
        let mut value = usize::from(c & 127);
        while c & 128 != 0 {
            c = *self.take(1)?.first()?;
            value = value.checked_add(1)?.checked_shl(7)? + usize::from(c & 127);
        }
        Some(value)
    }
    fn until_nul(&mut self) -> Option<&[u8]> {
        let rest = self.bytes.get(self.at..)?;
        let end = rest.iter().position(|b| *b == 0)?;
        self.at += end + 1;
        Some(&rest[..end])
    }
}

/// The entries of an index file's bytes, or `None` when it is of a kind not read here.
pub(crate) fn parse(bytes: &[u8]) -> Option<Vec<IndexEntry>> {
    let mut r = Reader { bytes, at: 0 };
    if r.take(4)? != b"DIRC" {
        return None;
    }
    let version = r.u32()?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = r.u32()? as usize;
    let mut entries = Vec::with_capacity(count.min(1 << 20));
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = r.at;
        let ctime = (r.u32()?, r.u32()?);
        let mtime = (r.u32()?, r.u32()?);
        let _dev = r.u32()?;
        let ino = r.u32()?;
        let mode = r.u32()?;
        let _uid = r.u32()?;
        let _gid = r.u32()?;
        let size = r.u32()?;
        let mut oid = [0u8; 20];
        oid.copy_from_slice(r.take(20)?);
        let flags = r.u16()?;
        // A conflict, or (extended flags) an entry skipped by a sparse checkout or only
        // intended to be added: the index is not the commit's.
        if flags & 0x3000 != 0 || flags & 0x4000 != 0 {
            return None;
        }
        let path = if version == 4 {
            let strip = r.varint()?;
            let keep = previous.len().checked_sub(strip)?;
            let mut path = previous[..keep].to_vec();
            path.extend_from_slice(r.until_nul()?);
            path
        } else {
            let path = r.until_nul()?.to_vec();
            // Padded with NULs to a multiple of 8 bytes (the one read included).
            let len = r.at - start;
            let padded = len.div_ceil(8) * 8;
            r.take(padded - len)?;
            path
        };
        // A sparse index's folder entry.
        if mode == crate::objects::TREE_MODE {
            return None;
        }
        entries.push(IndexEntry {
            path: String::from_utf8(path.clone()).ok()?,
            mode,
            oid,
            stat: Stat {
                mtime,
                ctime,
                ino,
                size,
                mode: 0,
            },
        });
        previous = path;
    }
    // Extensions: a split index keeps entries elsewhere, a sparse one folds folders.
    while bytes.len().saturating_sub(r.at) > 20 {
        let signature = r.take(4)?;
        if signature == b"link" || signature == b"sdir" {
            return None;
        }
        let size = r.u32()? as usize;
        r.take(size)?;
    }
    Some(entries)
}

/// Whether a file's stat data is what the index recorded (the permission bits aside).
pub(crate) fn same_file(recorded: &Stat, now: &Stat) -> bool {
    Stat { mode: 0, ..*now } == *recorded
}
