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
//!   not allowed, seccomp refusing IPv4/IPv6 sockets; or a [`PrivateNetwork`] whose loopback
//!   holds one listener of baton's (the model gateway a coding-agent CLI talks to);
//! - **protected paths**: a private mount namespace in which every mount is read-only except
//!   the writable directories (so not even `chmod` reaches a file outside them), and the
//!   read-only paths inside those are bind mounts remounted read-only;
//! - **limits**: `RLIMIT_NPROC`, `RLIMIT_AS`, `RLIMIT_CPU`, no core dumps; capabilities
//!   dropped and `no_new_privs` set.
//!
//! A layer the spec needs and the kernel lacks makes [`Confinement::prepare`] fail with
//! `SANDBOX_UNAVAILABLE` (unless the spec says not to enforce): a command never runs less
//! confined than asked without the caller knowing.

mod error;
mod layers;
#[cfg(target_os = "linux")]
mod linux;
mod spec;

pub use error::{SandboxError, SpawnFailure};
pub use layers::{Capabilities, Layer, LayerReport, NamespaceMode};
pub use spec::{Limits, NetworkNamespace, SandboxSpec};

#[cfg(target_os = "linux")]
pub use linux::{
    Confinement, PrivateNetwork, Signal, capabilities, close_inherited_fds, dumpable, kill_group,
    probe, protect_process,
};

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

    /// No private network namespace outside Linux (none can be made).
    pub enum PrivateNetwork {}

    impl PrivateNetwork {
        pub fn new() -> Result<PrivateNetwork, SandboxError> {
            Err(SandboxError::Unavailable {
                missing: vec![Layer::Network],
                detail: format!("no network namespaces on {}", std::env::consts::OS),
            })
        }

        pub fn namespace(&self) -> NetworkNamespace {
            match *self {}
        }

        pub fn bind_loopback(&self) -> std::io::Result<std::net::TcpListener> {
            match *self {}
        }
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
    Confinement, PrivateNetwork, Signal, capabilities, close_inherited_fds, dumpable, kill_group,
    probe, protect_process,
};
