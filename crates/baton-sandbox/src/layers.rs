//! The confinement layers and which of them this kernel offers (what `baton doctor` shows).

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
