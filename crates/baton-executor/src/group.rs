//! The CLI's process group: killed whole (the CLI, its shells, whatever they started) when the
//! run ends, is stopped, or is dropped, so no CLI outlives baton's run.

use baton_sandbox::{Signal, kill_group};

/// Kills the group `pgid` with SIGKILL; false when nothing was left in it.
pub fn kill(pgid: u32) -> bool {
    kill_group(pgid, Signal::Kill)
}

/// Kills its group when dropped (a cancelled run's future, a panic, an early return).
pub struct GroupGuard {
    pgid: u32,
}

impl GroupGuard {
    /// `pgid` is the CLI's pid: it leads a group of its own.
    pub fn new(pgid: u32) -> GroupGuard {
        GroupGuard { pgid }
    }

    pub fn pgid(&self) -> u32 {
        self.pgid
    }

    pub fn kill(&self) -> bool {
        kill(self.pgid)
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill(self.pgid);
    }
}

/// The live (not zombie) processes of group `pgid`, from `/proc` (for checks and tests).
pub fn members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the command's closing parenthesis: state, ppid, pgrp.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let pgrp = fields.nth(1).and_then(|p| p.parse::<u32>().ok());
            state != Some("Z") && pgrp == Some(pgid)
        })
        .collect()
}
