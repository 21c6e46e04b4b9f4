//! The Landlock ruleset: write beneath the writable directories, read everywhere else except
//! the denied paths and the raw devices.
//!
//! Landlock only grants, so "everything except D" is built by walking from `/` towards each
//! denied path: a directory that holds no denied path is granted as a whole; one that does
//! (an "ancestor") gets no rule of its own and its entries are visited one by one. Paths
//! beneath a denied one that stay readable (the toolchains in a denied `$HOME`) are granted
//! the same way, so a denied path beneath them stays denied. Symbolic
//! links are never granted: an access through a link is checked against where it leads, so
//! `/bin -> usr/bin` works through `/usr`, and a link into a denied directory leads nowhere.
//! Of `/dev`, only the harmless character devices are granted: a disk device would read the
//! store past every path rule.

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A ruleset is reused for this long: walking `/` and the denied paths' parents costs more
/// than the rest of a spawn. Staleness only hides new top-level entries (nothing is granted
/// that was not listed), never exposes a denied path.
const CACHE_FOR: Duration = Duration::from_secs(10);

/// The newest ABI this code knows; older kernels get the subset they have (best effort).
const LATEST: ABI = ABI::V9;

/// Devices a command may read (and those in `DEV_WRITE`, write).
const DEV_READ: [&str; 5] = ["null", "zero", "full", "random", "urandom"];
const DEV_WRITE: [&str; 2] = ["null", "full"];

#[derive(Clone, PartialEq, Eq)]
pub struct FsRules {
    pub writable: Vec<PathBuf>,
    pub denied: Vec<PathBuf>,
    /// Readable although beneath a denied path.
    pub allowed: Vec<PathBuf>,
}

static CACHE: Mutex<Option<(FsRules, Instant, OwnedFd)>> = Mutex::new(None);

/// The ruleset for `rules`, from the cache when it is fresh; `Ok(None)` when Landlock is not
/// available.
pub fn build(rules: &FsRules) -> Result<Option<OwnedFd>, String> {
    if let Ok(cache) = CACHE.lock()
        && let Some((key, at, fd)) = cache.as_ref()
        && key == rules
        && at.elapsed() < CACHE_FOR
        && let Ok(copy) = fd.try_clone()
    {
        return Ok(Some(copy));
    }
    let built = build_now(rules)?;
    if let (Some(fd), Ok(mut cache)) = (&built, CACHE.lock())
        && let Ok(copy) = fd.try_clone()
    {
        *cache = Some((rules.clone(), Instant::now(), copy));
    }
    Ok(built)
}

fn build_now(rules: &FsRules) -> Result<Option<OwnedFd>, String> {
    let read = AccessFs::from_read(LATEST);
    let all = AccessFs::from_all(LATEST);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .and_then(|r| r.scope(Scope::from_all(LATEST)))
        .and_then(|r| r.create())
        .map_err(|e| format!("Landlock ruleset: {e}"))?;
    let mut grants: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
    for w in &rules.writable {
        grants.push((w.clone(), all));
    }
    read_everywhere_except(Path::new("/"), &rules.denied, read, &mut grants);
    for path in &rules.allowed {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        // A hole in exactly one denied path, never the denied path itself: an allowed path
        // inside a second denied one (`.ssh` inside a denied `$HOME`) stays denied.
        let within: Vec<&PathBuf> = rules
            .denied
            .iter()
            .filter(|d| path.starts_with(d))
            .collect();
        if meta.file_type().is_symlink() || within.len() != 1 || within.contains(&path) {
            continue;
        }
        if meta.is_dir() && rules.denied.iter().any(|d| d.starts_with(path)) {
            read_everywhere_except(path, &rules.denied, read, &mut grants);
        } else {
            grants.push((path.clone(), read));
        }
    }
    for (path, access) in grants {
        let Ok(fd) = PathFd::new(&path) else {
            // Gone since it was listed: nothing to grant.
            continue;
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(LATEST)
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("Landlock rule: {e}"))?;
    }
    Ok(ruleset.into())
}

fn read_everywhere_except(
    dir: &Path,
    denied: &[PathBuf],
    read: BitFlags<AccessFs>,
    grants: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() || denied.iter().any(|d| d == &path) {
            continue;
        }
        if path == Path::new("/dev") {
            devices(read, grants);
        } else if denied.iter().any(|d| d.starts_with(&path)) {
            read_everywhere_except(&path, denied, read, grants);
        } else {
            grants.push((path, read));
        }
    }
}

fn devices(read: BitFlags<AccessFs>, grants: &mut Vec<(PathBuf, BitFlags<AccessFs>)>) {
    for name in DEV_READ {
        let mut access = read | AccessFs::IoctlDev;
        if DEV_WRITE.contains(&name) {
            // `> /dev/null` opens with O_TRUNC.
            access |= AccessFs::WriteFile | AccessFs::Truncate;
        }
        grants.push((Path::new("/dev").join(name), access));
    }
}
