mod child;
mod fs_rules;
mod seccomp;

use crate::error::{SandboxError, SpawnFailure};
use crate::layers::{Capabilities, Layer, NamespaceMode};
use crate::spec::SandboxSpec;
use child::{Bind, ChildSetup, UserMaps};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

/// What this system can apply, probed once per process.
pub fn capabilities() -> &'static Capabilities {
    static CAPS: OnceLock<Capabilities> = OnceLock::new();
    CAPS.get_or_init(probe)
}

/// Probes every layer now: each is tried for real in a throwaway child process.
pub fn probe() -> Capabilities {
    // SAFETY: a query with a null attribute, size 0 and the VERSION flag reads nothing.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    let seccomp = seccomp::SUPPORTED
        && in_child(&ChildSetup {
            seccomp: Some(seccomp::program(true, true)),
            ..ChildSetup::default()
        });
    let probe_dir = probe_dir();
    let basic = |mode| in_child(&namespace_setup(mode, true, &[], &probe_dir, false));
    let namespaces = if basic(NamespaceMode::Direct) {
        NamespaceMode::Direct
    } else if basic(NamespaceMode::UserNamespace) {
        NamespaceMode::UserNamespace
    } else {
        NamespaceMode::Unavailable
    };
    let readonly_root = namespaces != NamespaceMode::Unavailable
        && in_child(&namespace_setup(namespaces, false, &probe_dir, &[], true));
    Capabilities {
        os: "linux",
        landlock_abi: u32::try_from(abi).ok().filter(|a| *a > 0),
        seccomp,
        namespaces,
        readonly_root,
        // SAFETY: geteuid cannot fail.
        root: unsafe { libc::geteuid() } == 0,
    }
}

/// A directory to try bind mounts on (inside the probe's own mount namespace).
fn probe_dir() -> Vec<PathBuf> {
    std::env::temp_dir()
        .canonicalize()
        .into_iter()
        .collect::<Vec<_>>()
}

/// Runs `setup` in a forked child that exits right after; true when every step worked.
fn in_child(setup: &ChildSetup) -> bool {
    // SAFETY: the child only runs `apply` (system calls on pre-built data) and `_exit`.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return false;
        }
        if pid == 0 {
            let code = if setup.apply().is_ok() { 0 } else { 1 };
            libc::_exit(code);
        }
        let mut status = 0;
        loop {
            let r = libc::waitpid(pid, &mut status, 0);
            if r == pid {
                break;
            }
            if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return false;
            }
        }
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }
}

/// Namespace part of a setup: a new network namespace (when `net`), a private mount
/// namespace with `ro` bound read-only and, with `readonly_root`, every other mount read-only
/// but `rw`; through a user namespace if `mode` says so.
fn namespace_setup(
    mode: NamespaceMode,
    net: bool,
    rw: &[PathBuf],
    ro: &[PathBuf],
    readonly_root: bool,
) -> ChildSetup {
    let pins = pins(rw, ro);
    let mut setup = ChildSetup::default();
    let mounts = readonly_root || !ro.is_empty();
    if mode == NamespaceMode::Unavailable || (!net && !mounts) {
        return setup;
    }
    if net {
        setup.unshare |= libc::CLONE_NEWNET;
        setup.loopback_up = true;
    }
    if mounts {
        setup.unshare |= libc::CLONE_NEWNS;
        setup.private_mounts = true;
        setup.binds = ro.iter().filter_map(|p| bind(p)).collect();
        setup.pins = pins.iter().filter_map(|p| bind(p)).collect();
    }
    if readonly_root {
        setup.readonly_root = true;
        setup.rw_binds = rw.iter().filter_map(|p| bind(p)).collect();
    }
    if mode == NamespaceMode::UserNamespace {
        setup.unshare |= libc::CLONE_NEWUSER;
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        setup.user_maps = Some(UserMaps {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        });
    }
    setup
}

/// The folders strictly between a writable root and each read-only path (`.workflow` for
/// `.workflow/.maestro`), outermost first, each once: bound onto themselves they cannot be
/// renamed or removed, so a read-only path stays where it is.
fn pins(rw: &[PathBuf], ro: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in ro {
        let Some(root) = rw
            .iter()
            .filter(|w| p.starts_with(w))
            .max_by_key(|w| w.as_os_str().len())
        else {
            continue;
        };
        let mut between: Vec<PathBuf> = p
            .ancestors()
            .skip(1)
            .take_while(|a| a.starts_with(root) && *a != root.as_path())
            .map(Path::to_path_buf)
            .collect();
        between.reverse();
        for a in between {
            if !out.contains(&a) && a.is_dir() {
                out.push(a);
            }
        }
    }
    out.sort_by_key(|p| p.components().count());
    out
}

fn bind(path: &Path) -> Option<Bind> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `st` is written by statvfs; `c` is NUL-terminated.
    let flags = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        st.f_flag
    };
    // A remount inside a user namespace must keep the flags the original mount was locked
    // with; keeping them is harmless elsewhere.
    let pairs = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    let keep_flags = pairs
        .iter()
        .filter(|(st, _)| flags & *st != 0)
        .fold(0, |acc, (_, ms)| acc | ms);
    Some(Bind {
        path: c,
        keep_flags,
    })
}

/// One empty network namespace (loopback up) that every command of this process enters with
/// `setns`: creating a namespace per command costs about a millisecond. An open descriptor
/// keeps it alive; no process lives in it between commands (each command's process group is
/// killed at its end). Only where the process may enter it directly (root).
fn shared_netns() -> Option<&'static OwnedFd> {
    static NETNS: OnceLock<Option<OwnedFd>> = OnceLock::new();
    NETNS.get_or_init(make_netns).as_ref()
}

/// A network namespace of its own (loopback up, nothing else) for one run: baton binds a
/// listener on its loopback ([`PrivateNetwork::bind_loopback`]) and the run's commands join it
/// (`SandboxSpec::join_network`), so that listener is the only address they can reach. It lives
/// while the value or a spec holding its namespace does. Only where the process may enter
/// namespaces directly (root).
pub struct PrivateNetwork {
    fd: Arc<OwnedFd>,
}

impl PrivateNetwork {
    pub fn new() -> Result<PrivateNetwork, SandboxError> {
        if capabilities().namespaces != NamespaceMode::Direct {
            return Err(SandboxError::Unavailable {
                missing: vec![Layer::Network],
                detail: "a private network namespace needs a process that may enter namespaces directly (root)".into(),
            });
        }
        make_netns()
            .map(|fd| PrivateNetwork { fd: Arc::new(fd) })
            .ok_or_else(|| SandboxError::Setup("no network namespace could be made".into()))
    }

    pub fn namespace(&self) -> crate::NetworkNamespace {
        crate::NetworkNamespace(self.fd.clone())
    }

    /// A TCP listener on `127.0.0.1` of this namespace, at a port the kernel picks. A socket
    /// belongs to the namespace of the thread that made it, so a short-lived thread enters the
    /// namespace (`setns` changes only the calling thread) and makes it; the process's other
    /// threads, and every connection it makes, stay in the host's namespace.
    pub fn bind_loopback(&self) -> std::io::Result<std::net::TcpListener> {
        let fd = self.fd.clone();
        std::thread::scope(|s| {
            s.spawn(move || {
                // SAFETY: setns on a descriptor we own, for this thread only.
                if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                std::net::TcpListener::bind(("127.0.0.1", 0))
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the namespace thread panicked")))
        })
    }
}

fn make_netns() -> Option<OwnedFd> {
    // SAFETY: the child only makes system calls (unshare, the loopback ioctls, write, pause)
    // until it is killed; the parent closes what it opened and reaps the child.
    unsafe {
        let mut fds = [0; 2];
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return None;
        }
        let (r, w) = (fds[0], fds[1]);
        let parent = libc::getpid();
        let pid = libc::fork();
        if pid < 0 {
            libc::close(r);
            libc::close(w);
            return None;
        }
        if pid == 0 {
            // This child pauses until the parent kills it. If the parent dies first (a SIGKILL
            // of baton right after the fork), it must not outlive it: it dies with the parent,
            // and it keeps none of the parent's descriptors, so a lock the parent held (the
            // epic's project lock) is released with the parent, not held by an orphan forever.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            if libc::getppid() != parent {
                libc::_exit(0);
            }
            libc::close(r);
            close_all_but(w);
            let ok = libc::unshare(libc::CLONE_NEWNET) == 0;
            if ok {
                child::loopback_up();
            }
            let byte = u8::from(ok);
            libc::write(w, (&byte as *const u8).cast(), 1);
            loop {
                libc::pause();
            }
        }
        libc::close(w);
        let mut byte = 0u8;
        let n = libc::read(r, (&mut byte as *mut u8).cast(), 1);
        libc::close(r);
        let path = CString::new(format!("/proc/{pid}/ns/net")).unwrap_or_default();
        let fd = if n == 1 && byte == 1 && !path.as_bytes().is_empty() {
            libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC)
        } else {
            -1
        };
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
    }
}

/// Closes every descriptor above 2 but `keep` (async-signal-safe: `close_range`, Linux 5.11;
/// on older kernels they stay open and the parent-death signal alone ends the holder).
///
/// # Safety
/// Only system calls; meant for a forked child.
unsafe fn close_all_but(keep: libc::c_int) {
    let keep = keep as libc::c_uint;
    // SAFETY: system calls on integers.
    unsafe {
        if keep > 3 {
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                keep - 1,
                0 as libc::c_uint,
            );
        }
        libc::syscall(
            libc::SYS_close_range,
            keep.saturating_add(1).max(3),
            libc::c_uint::MAX,
            0 as libc::c_uint,
        );
    }
}

/// `path` with its longest existing prefix canonicalized: a denied path that does not exist
/// yet still makes its parents "ancestors", so it stays unreadable if it appears later.
fn resolve(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return Some(out);
        }
        rest.push(existing.file_name()?);
        existing = existing.parent()?;
    }
}

fn last_cap() -> libc::c_int {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// A prepared confinement for one child process.
pub struct Confinement {
    setup: ChildSetup,
    applied: Vec<(Layer, String)>,
}

impl Confinement {
    /// Checks `spec` against `caps` and builds what the child will apply.
    pub fn prepare(spec: &SandboxSpec, caps: &Capabilities) -> Result<Confinement, SandboxError> {
        let ns_ok = caps.namespaces != NamespaceMode::Unavailable;
        let mut missing = Vec::new();
        let mut applied = Vec::new();
        if caps.landlock_abi.is_none() {
            missing.push(Layer::Filesystem);
        }
        if !caps.seccomp {
            missing.push(Layer::Process);
        }
        let net_namespace = !spec.network && ns_ok;
        // Landlock ABI 9 refuses `connect` to a named socket outside the writable directories.
        let deny_unix = !spec.unix_sockets && caps.landlock_abi.is_none_or(|a| a < 9);
        let deny_inet = !spec.network && !ns_ok && caps.seccomp;
        if !spec.network && !net_namespace && !deny_inet {
            missing.push(Layer::Network);
        }
        let writable: Vec<PathBuf> = spec
            .writable
            .iter()
            .map(|w| {
                w.canonicalize().map_err(|e| {
                    SandboxError::Setup(format!("a writable directory is missing ({})", e.kind()))
                })
            })
            .collect::<Result<_, _>>()?;
        let read_only: Vec<PathBuf> = spec
            .read_only
            .iter()
            .filter(|p| {
                p.symlink_metadata()
                    .is_ok_and(|m| !m.file_type().is_symlink())
            })
            .filter_map(|p| p.canonicalize().ok())
            .filter(|p| writable.iter().any(|w| p.starts_with(w) && p != w))
            .collect();
        if !read_only.is_empty() && !ns_ok {
            missing.push(Layer::ProtectedPaths);
        }
        if spec.enforce && !missing.is_empty() {
            return Err(SandboxError::Unavailable {
                missing,
                detail: format!(
                    "Landlock {}, seccomp {}, namespaces {:?}",
                    caps.landlock_abi
                        .map_or("missing".to_string(), |a| format!("ABI {a}")),
                    if caps.seccomp { "yes" } else { "no" },
                    caps.namespaces
                ),
            });
        }
        let mode = if ns_ok {
            caps.namespaces
        } else {
            NamespaceMode::Unavailable
        };
        let binds = if ns_ok { read_only.clone() } else { Vec::new() };
        let readonly_root = ns_ok && caps.readonly_root;
        let mut setup = namespace_setup(mode, net_namespace, &writable, &binds, readonly_root);
        if let Some(private) = &spec.join_network {
            // The run's own namespace: entered directly, or not at all (a command that cannot
            // join it would either reach nothing or everything).
            if spec.network || mode != NamespaceMode::Direct {
                return Err(SandboxError::Unavailable {
                    missing: vec![Layer::Network],
                    detail: "a private network namespace is joined only by a process that may enter namespaces directly, with the network otherwise off".into(),
                });
            }
            setup.unshare &= !libc::CLONE_NEWNET;
            setup.loopback_up = false;
            setup.join_net = Some(private.0.as_raw_fd());
        } else if net_namespace
            && mode == NamespaceMode::Direct
            && let Some(net) = shared_netns()
        {
            setup.unshare &= !libc::CLONE_NEWNET;
            setup.loopback_up = false;
            setup.join_net = Some(net.as_raw_fd());
        }
        if setup.binds.len() != binds.len()
            || (readonly_root && setup.rw_binds.len() != writable.len())
        {
            return Err(SandboxError::Setup(
                "a writable or read-only path cannot be inspected".into(),
            ));
        }
        if let Some(abi) = caps.landlock_abi {
            let denied: Vec<PathBuf> = spec.read_denied.iter().filter_map(|d| resolve(d)).collect();
            let allowed: Vec<PathBuf> = spec
                .read_allowed
                .iter()
                .filter_map(|a| a.canonicalize().ok())
                .collect();
            setup.ruleset = fs_rules::build(&fs_rules::FsRules {
                writable: writable.clone(),
                denied,
                allowed,
            })
            .map_err(SandboxError::Setup)?;
            applied.push((Layer::Filesystem, format!("landlock-abi-{abi}")));
            if abi >= 6 {
                applied.push((Layer::Signals, "landlock-scope".into()));
            }
        }
        if caps.seccomp {
            setup.seccomp = Some(seccomp::program(deny_inet, deny_unix));
            applied.push((
                Layer::Process,
                if deny_unix {
                    "seccomp-no-unix-sockets".into()
                } else {
                    "seccomp".into()
                },
            ));
        }
        if spec.network {
            applied.push((Layer::Network, "allowed".into()));
        } else if spec.join_network.is_some() {
            applied.push((Layer::Network, "private-namespace".into()));
        } else if net_namespace {
            applied.push((Layer::Network, "namespace".into()));
        } else if deny_inet {
            applied.push((Layer::Network, "seccomp".into()));
        }
        match (readonly_root, setup.binds.is_empty()) {
            (true, _) => applied.push((Layer::ProtectedPaths, "read-only-root".into())),
            (false, false) => applied.push((Layer::ProtectedPaths, "read-only-binds".into())),
            (false, true) => {}
        }
        let limits = &spec.limits;
        setup.rlimits.push((libc::RLIMIT_CORE as libc::c_int, 0));
        for (resource, value) in [
            (libc::RLIMIT_NPROC, limits.processes),
            (libc::RLIMIT_AS, limits.address_space),
            (libc::RLIMIT_CPU, limits.cpu_seconds),
        ] {
            if let Some(v) = value {
                setup.rlimits.push((resource as libc::c_int, v));
            }
        }
        applied.push((Layer::Limits, "rlimits".into()));
        setup.drop_caps = caps.root || mode == NamespaceMode::UserNamespace;
        setup.last_cap = last_cap();
        Ok(Confinement { setup, applied })
    }

    /// The layers this confinement applies, with how.
    pub fn applied(&self) -> &[(Layer, String)] {
        &self.applied
    }

    /// Makes `cmd` apply the confinement in its child, and start in `cwd` (opened by the
    /// caller, so no path is resolved twice). The child is the leader of a new process group
    /// whose id is its pid: pass that to [`kill_group`].
    pub fn install(mut self, cmd: &mut Command, cwd: Option<OwnedFd>) {
        use std::os::fd::AsRawFd;
        self.setup.cwd_path = cwd.as_ref().and_then(|fd| {
            let path = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
            CString::new(path.as_os_str().as_bytes()).ok()
        });
        self.setup.cwd = cwd;
        let setup = Arc::new(self.setup);
        // SAFETY: the closure only calls `ChildSetup::apply`, which makes system calls on data
        // built before the fork and allocates nothing.
        unsafe {
            cmd.pre_exec(move || setup.apply());
        }
    }

    /// What went wrong when `spawn` failed.
    pub fn spawn_failure(e: &std::io::Error) -> SpawnFailure {
        match child::decode(e) {
            Some((step, errno)) => SpawnFailure::Setup { step, errno },
            None => SpawnFailure::Exec(e.kind()),
        }
    }
}

/// Makes a `Command` that is not confined (an MCP server) close every descriptor above 2 at
/// `exec`, as a confined one does: nothing baton inherited without close-on-exec reaches it.
pub fn close_inherited_fds(cmd: &mut Command) {
    // SAFETY: the closure makes system calls only (see `cloexec_inherited`).
    unsafe {
        cmd.pre_exec(|| {
            if child::cloexec_inherited() {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE 0`): another process of the same user
/// (an MCP server, which runs outside the sandbox) can no longer read its memory or
/// `/proc/<pid>/environ`, where the API key is. Without `CAP_SYS_PTRACE`, that is. Children
/// are dumpable again after their `exec`. True when the flag is set.
pub fn protect_process() -> bool {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 }
}

/// Whether this process is dumpable (`PR_GET_DUMPABLE`), `None` when it cannot be read.
pub fn dumpable() -> Option<bool> {
    // SAFETY: prctl with integer arguments.
    let v = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
    (v >= 0).then_some(v != 0)
}

/// A signal for [`kill_group`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
    /// Sends nothing; tells whether the group still has a process.
    Probe,
}

/// Signals every process of group `pgid`; false when none was found. Ids 0 and 1 are refused
/// (they would mean the caller's own group, or every process).
pub fn kill_group(pgid: u32, signal: Signal) -> bool {
    let Ok(pgid) = i32::try_from(pgid) else {
        return false;
    };
    if pgid <= 1 {
        return false;
    }
    let sig = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
        Signal::Probe => 0,
    };
    // SAFETY: kill has no memory arguments.
    unsafe { libc::kill(-pgid, sig) == 0 }
}
