//! What a caller asks of the sandbox: the paths, network and limits of one command.

use std::path::PathBuf;

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
    /// A network namespace the command joins instead of a new empty one (see
    /// `PrivateNetwork`): its loopback holds the only address the command can reach (baton's
    /// model gateway for a coding-agent CLI). Only with `network: false`.
    pub join_network: Option<NetworkNamespace>,
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

/// An open network namespace (its descriptor keeps it alive while anyone holds it).
#[derive(Debug, Clone)]
pub struct NetworkNamespace(pub std::sync::Arc<std::os::fd::OwnedFd>);

impl PartialEq for NetworkNamespace {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for NetworkNamespace {}
