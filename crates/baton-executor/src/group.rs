//! The CLI's process group: killed whole (the CLI, its shells, whatever they started) when the
//! run ends, is stopped, or is dropped, so no CLI outlives baton's run.

use baton_sandbox::{Signal, kill_group};
use std::path::Path;

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

    /// Kills the group and waits until none of it runs any more (SIGKILL is delivered
    /// asynchronously), at most `timeout` per round; true when it is gone.
    pub fn kill_and_wait(&self, timeout: std::time::Duration) -> bool {
        // A process forked while the group was being killed is caught by the next round.
        for _ in 0..8 {
            kill(self.pgid);
            let left = members(self.pgid);
            if left.is_empty() {
                return true;
            }
            for pid in left {
                wait_end(pid, timeout);
            }
        }
        members(self.pgid).is_empty()
    }
}

/// Waits (on a pidfd, no polling) until `pid` has ended or `timeout` passed.
fn wait_end(pid: u32, timeout: std::time::Duration) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: pidfd_open has no memory arguments; a descriptor it returns is owned here.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    let Ok(fd) = i32::try_from(fd) else {
        return;
    };
    if fd < 0 {
        return; // already gone (or pidfds unsupported: the next round sees)
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one pollfd, alive for the call.
    unsafe {
        libc::poll(&mut poll, 1, millis);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill(self.pgid);
    }
}

/// The live (not zombie) processes of group `pgid`, from `/proc` (for checks and tests).
pub fn members(pgid: u32) -> Vec<u32> {
    live_pids()
        .filter(|&pid| stat(pid).is_some_and(|(state, pgrp)| state != "Z" && pgrp == pgid))
        .collect()
}

/// Kills what a previous launch for `home` left running (baton was killed before its guard
/// could act): every live process whose `HOME` is `home` (only a CLI of this run's folder,
/// and what it started, have it), with its group. Returns how many were found.
pub fn kill_leftovers(home: &Path) -> usize {
    let mut wanted = b"HOME=".to_vec();
    wanted.extend_from_slice(home.as_os_str().as_encoded_bytes());
    let found: Vec<(u32, u32)> = live_pids()
        .filter(|&pid| pid != std::process::id())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == wanted.as_slice()))
        })
        .filter_map(|pid| {
            stat(pid)
                .filter(|(state, _)| state != "Z")
                .map(|(_, g)| (pid, g))
        })
        .collect();
    for &(pid, pgrp) in &found {
        kill(pgrp);
        // SAFETY: kill has no memory arguments.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    }
    found.len()
}

fn live_pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
}

/// A process's state and process group.
fn stat(pid: u32) -> Option<(String, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state, ppid, pgrp.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.to_string();
    let pgrp = fields.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}

/// Makes the CLI get SIGKILL when baton dies (even by SIGKILL, when no guard can run): the
/// kernel's parent-death signal, set between fork and exec. It fires when the thread that
/// spawned the CLI ends; a tokio worker lives as long as its runtime, whose end drops the run
/// (and its guard) anyway.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure makes two system calls and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // baton died between the fork and the prctl: nobody would kill this child.
            if libc::getppid() != parent {
                libc::_exit(137);
            }
            Ok(())
        });
    }
}
