//! OS confinement of child processes: what a command started by baton may touch.
//!
//! This crate holds all of baton's `unsafe` and syscall code, and knows nothing about tools or
//! runs: a caller describes a [`SandboxSpec`] (writable directories, paths nobody may read,
//! paths inside the writable ones that stay read-only, network on or off, resource limits),
//! [`Confinement::prepare`] turns it into the kernel objects it needs, and
//! [`Confinement::install`] makes a `std::process::Command` apply them in the child, between
//! `fork` and `exec`. The layers, each applied only where this kernel has it (see
//! [`capabilities`], shown by `baton doctor`):
//!
//! - **filesystem** (Landlock, best effort by ABI): writes only under the writable
//!   directories, reads everywhere except the denied paths and the raw devices of `/dev`;
//!   with ABI 6 and later, no signals to processes outside the sandbox;
//! - **process** (seccomp): the command stays in its process group (`setsid`/`setpgid` do
//!   nothing), so killing the group at the end kills every descendant; `kill(-1)`, `io_uring`
//!   and the kernel keyring are refused, and so are Unix sockets unless the spec allows them;
//! - **descriptors**: every descriptor above 2 is closed at `exec`, whether or not it had
//!   close-on-exec;
//! - **network**: a new, empty network namespace (loopback only), or where namespaces are
//!   not allowed, seccomp refusing IPv4/IPv6 sockets;
//! - **protected paths**: a private mount namespace in which every mount is read-only except
//!   the writable directories (so not even `chmod` reaches a file outside them), and the
//!   read-only paths inside those are bind mounts remounted read-only;
//! - **limits**: `RLIMIT_NPROC`, `RLIMIT_AS`, `RLIMIT_CPU`, no core dumps; capabilities
//!   dropped and `no_new_privs` set.
//!
//! A layer the spec needs and the kernel lacks makes [`Confinement::prepare`] fail with
//! `SANDBOX_UNAVAILABLE` (unless the spec says not to enforce): a command never runs less
//! confined than asked without the caller knowing.

#[cfg(target_os = "linux")]
mod linux;

use std::path::PathBuf;

#[cfg(target_os = "linux")]
pub use linux::{
    Confinement, Signal, capabilities, close_inherited_fds, dumpable, kill_group, probe,
    protect_process,
};

/// What a child process may do. Paths should be absolute; they are canonicalized.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSpec {
    /// Directories the command may write (and read) beneath.
    pub writable: Vec<PathBuf>,
    /// Paths the command may not read (nor write), wherever they are, except beneath a
    /// writable directory.
    pub read_denied: Vec<PathBuf>,
    /// Paths beneath a denied path that stay readable (a hole in one denied path, never in
    /// two: a denied path beneath an allowed one stays denied).
    pub read_allowed: Vec<PathBuf>,
    /// Existing paths beneath a writable directory that stay read-only (bind mounts).
    pub read_only: Vec<PathBuf>,
    /// Whether the command may use the network.
    pub network: bool,
    /// Whether the command may create Unix sockets. When false and Landlock is older than ABI
    /// 9 (which confines `connect` to named sockets by path), seccomp refuses
    /// `socket(AF_UNIX, …)`; with ABI 9, named sockets outside the writable directories are
    /// refused by Landlock either way.
    pub unix_sockets: bool,
    pub limits: Limits,
    /// When true, a layer this spec needs and the kernel lacks is an error
    /// (`SANDBOX_UNAVAILABLE`); when false, the command runs with the layers that exist.
    pub enforce: bool,
}

/// Resource limits (`setrlimit`), `None` = inherited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_NPROC`: processes of the user. The kernel does not apply it to root.
    pub processes: Option<u64>,
    /// `RLIMIT_AS`: address space of each process, in bytes.
    pub address_space: Option<u64>,
    /// `RLIMIT_CPU`: CPU seconds of each process.
    pub cpu_seconds: Option<u64>,
}

/// How the child enters new namespaces, if it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceMode {
    /// The process may `unshare` directly (root with `CAP_SYS_ADMIN`).
    Direct,
    /// Through a new user namespace (an unprivileged user where the kernel allows it).
    UserNamespace,
    /// Neither works here.
    Unavailable,
}

/// Which confinement layers this kernel and process can apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    pub os: &'static str,
    /// Landlock ABI version, `None` when Landlock is missing or disabled.
    pub landlock_abi: Option<u32>,
    /// seccomp filters can be installed.
    pub seccomp: bool,
    /// New network and mount namespaces.
    pub namespaces: NamespaceMode,
    /// In a new mount namespace, every mount can be made read-only (`mount_setattr`, 5.12+)
    /// with the writable directories bound read-write over it.
    pub readonly_root: bool,
    /// The process runs as root: `RLIMIT_NPROC` is not enforced for its children.
    pub root: bool,
}

impl Capabilities {
    /// Nothing at all (non-Linux systems, and tests of the refusal path).
    pub fn none() -> Capabilities {
        Capabilities {
            os: std::env::consts::OS,
            landlock_abi: None,
            seccomp: false,
            namespaces: NamespaceMode::Unavailable,
            readonly_root: false,
            root: false,
        }
    }

    /// The layers, in the order `baton doctor` shows them.
    pub fn layers(&self) -> Vec<LayerReport> {
        let ns = self.namespaces != NamespaceMode::Unavailable;
        let ns_how = match self.namespaces {
            NamespaceMode::Direct => "namespaces (direct)",
            NamespaceMode::UserNamespace => "namespaces (through a user namespace)",
            NamespaceMode::Unavailable => "namespaces unavailable",
        };
        vec![
            LayerReport {
                layer: Layer::Filesystem,
                available: self.landlock_abi.is_some(),
                how: match self.landlock_abi {
                    Some(abi) if abi >= 9 => {
                        format!("Landlock ABI {abi} (named Unix sockets confined by path)")
                    }
                    Some(abi) => format!("Landlock ABI {abi}"),
                    None => "Landlock missing or disabled".into(),
                },
            },
            LayerReport {
                layer: Layer::Signals,
                available: self.landlock_abi.is_some_and(|a| a >= 6),
                how: "Landlock signal and abstract-socket scoping (ABI 6+)".into(),
            },
            LayerReport {
                layer: Layer::Process,
                available: self.seccomp,
                how: if !self.seccomp {
                    "seccomp unavailable".into()
                } else if self.landlock_abi.is_some_and(|a| a >= 9) {
                    "seccomp filter (process group kept)".into()
                } else {
                    "seccomp filter (process group kept; Unix sockets refused unless allowed)"
                        .into()
                },
            },
            LayerReport {
                layer: Layer::Network,
                available: ns || self.seccomp,
                how: if ns {
                    format!("new network namespace, {ns_how}")
                } else if self.seccomp {
                    "seccomp refuses IPv4/IPv6 sockets".into()
                } else {
                    "no way to cut the network".into()
                },
            },
            LayerReport {
                layer: Layer::ProtectedPaths,
                available: ns,
                how: if self.readonly_root {
                    format!(
                        "every mount read-only but the writable directories, protected paths bound read-only, {ns_how}"
                    )
                } else {
                    format!("protected paths bound read-only, {ns_how}")
                },
            },
            LayerReport {
                layer: Layer::Limits,
                available: cfg!(unix),
                how: if self.root {
                    "rlimits (RLIMIT_NPROC is not enforced for root; the process-group kill bounds a fork bomb), descriptors above 2 closed at exec".into()
                } else {
                    "rlimits, descriptors above 2 closed at exec".into()
                },
            },
        ]
    }
}

/// One confinement layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    Filesystem,
    Signals,
    Process,
    Network,
    ProtectedPaths,
    Limits,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Filesystem => "filesystem",
            Layer::Signals => "signals",
            Layer::Process => "process",
            Layer::Network => "network",
            Layer::ProtectedPaths => "protected-paths",
            Layer::Limits => "limits",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerReport {
    pub layer: Layer,
    pub available: bool,
    pub how: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A layer the spec needs is missing on this system.
    #[error("the sandbox cannot be applied here: {} missing ({detail})", missing.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(", "))]
    Unavailable { missing: Vec<Layer>, detail: String },
    /// Preparing the confinement failed (a ruleset or a path could not be set up).
    #[error("the sandbox could not be prepared: {0}")]
    Setup(String),
}

impl SandboxError {
    pub fn code(&self) -> &'static str {
        match self {
            SandboxError::Unavailable { .. } => "SANDBOX_UNAVAILABLE",
            SandboxError::Setup(_) => "SANDBOX_SETUP_FAILED",
        }
    }

    pub fn hint(&self) -> &'static str {
        match self {
            SandboxError::Unavailable { .. } => {
                "run `baton doctor` to see the layers this kernel enforces; set [tools.terminal] require_sandbox = false in baton.toml to run with the layers that exist"
            }
            SandboxError::Setup(_) => "run `baton doctor`; check that the project directory exists",
        }
    }
}

/// Where a spawn failed: in the sandbox setup between fork and exec, or at exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnFailure {
    /// A confinement step failed in the child; the command did not run.
    Setup { step: &'static str, errno: i32 },
    /// `exec` itself failed (not found, not executable…).
    Exec(std::io::ErrorKind),
}

#[cfg(not(target_os = "linux"))]
mod other {
    use super::*;
    use std::os::fd::OwnedFd;
    use std::process::Command;

    /// No confinement layer outside Linux.
    pub fn capabilities() -> &'static Capabilities {
        static NONE: std::sync::OnceLock<Capabilities> = std::sync::OnceLock::new();
        NONE.get_or_init(Capabilities::none)
    }

    pub fn probe() -> Capabilities {
        Capabilities::none()
    }

    pub struct Confinement(());

    impl Confinement {
        pub fn prepare(
            spec: &SandboxSpec,
            _caps: &Capabilities,
        ) -> Result<Confinement, SandboxError> {
            if spec.enforce {
                return Err(SandboxError::Unavailable {
                    missing: vec![Layer::Filesystem, Layer::Process, Layer::Network],
                    detail: format!("no sandbox on {}", std::env::consts::OS),
                });
            }
            Ok(Confinement(()))
        }

        pub fn applied(&self) -> &[(Layer, String)] {
            &[]
        }

        pub fn install(self, cmd: &mut Command, _cwd: Option<OwnedFd>) {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }

        pub fn spawn_failure(e: &std::io::Error) -> SpawnFailure {
            SpawnFailure::Exec(e.kind())
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Signal {
        Term,
        Kill,
        Probe,
    }

    /// Nothing to mark outside Linux (the child keeps what it inherits).
    pub fn close_inherited_fds(_cmd: &mut Command) {}

    pub fn protect_process() -> bool {
        false
    }

    pub fn dumpable() -> Option<bool> {
        None
    }

    /// Signals every process of group `pgid` (ids 0 and 1 refused), as on Linux.
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
}
#[cfg(not(target_os = "linux"))]
pub use other::{
    Confinement, Signal, capabilities, close_inherited_fds, dumpable, kill_group, probe,
    protect_process,
};
