//! Who holds a step: `pid@host` of the process that called `next` (its parent, the agent's
//! shell or harness: the `baton` process itself exits as soon as the claim is written), and
//! whether that process still lives.

use std::path::Path;

pub fn hostname() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    read("/proc/sys/kernel/hostname")
        .or_else(|| read("/etc/hostname"))
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".into())
}

fn caller_pid() -> u32 {
    #[cfg(unix)]
    {
        std::os::unix::process::parent_id()
    }
    #[cfg(not(unix))]
    {
        std::process::id()
    }
}

/// `<caller pid>@<host>`
pub fn default_owner() -> String {
    format!("{}@{}", caller_pid(), hostname())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    Dead,
    /// Another host, or an owner that is not `pid@host`: nobody can tell from here.
    Unknown,
}

impl Liveness {
    pub fn describe(self) -> &'static str {
        match self {
            Liveness::Alive => "still running",
            Liveness::Dead => "gone",
            Liveness::Unknown => "not known to be gone (another host, or not a pid@host owner)",
        }
    }
}

/// Whether the owner of a claim still runs. Only `pid@<this host>` owners can be judged, and
/// only where `/proc` exists; a reused pid reads as alive, the safe direction.
pub fn liveness(owner: &str) -> Liveness {
    let Some((pid, host)) = owner.split_once('@') else {
        return Liveness::Unknown;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return Liveness::Unknown;
    };
    if host != hostname() || !Path::new("/proc/self").exists() {
        return Liveness::Unknown;
    }
    if Path::new("/proc").join(pid.to_string()).exists() {
        Liveness::Alive
    } else {
        Liveness::Dead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_foreign_owners_are_unknown() {
        if !Path::new("/proc/self").exists() {
            return;
        }
        let me = format!("{}@{}", std::process::id(), hostname());
        assert_eq!(liveness(&me), Liveness::Alive);
        assert_eq!(liveness("1@some-other-host.invalid"), Liveness::Unknown);
        assert_eq!(liveness("agent-7"), Liveness::Unknown);
    }

    #[test]
    fn a_finished_process_is_dead() {
        if !Path::new("/proc/self").exists() {
            return;
        }
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(liveness(&format!("{pid}@{}", hostname())), Liveness::Dead);
    }
}
