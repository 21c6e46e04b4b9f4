//! The seccomp filter, written as a few classic BPF instructions (no library needed for so
//! little, and nothing to allocate in the child: the program is built before `fork`).
//!
//! Rules, checked after the architecture (a foreign ABI, such as x32 on x86_64, is refused):
//! - `setsid` and `setpgid` succeed without doing anything: the command and everything it
//!   starts stay in the process group that is killed at the end;
//! - `kill(-1, …)` is refused: as root it would signal every process of the machine;
//! - `io_uring_*` is refused (it can open sockets without `socket(2)`), as is the kernel
//!   keyring (`keyctl`, `add_key`, `request_key`);
//! - `chmod` with the set-user-ID or set-group-ID bit is refused: run as root, a command could
//!   otherwise leave a set-user-ID root program behind for anyone;
//! - when the network must be cut without a namespace, `socket(AF_INET|AF_INET6, …)`;
//! - unless the policy allows them, `socket(AF_UNIX, …)`: a filter cannot see the path a
//!   `connect` names, and before Landlock ABI 9 nothing else keeps a command from the named
//!   sockets outside the project (a desktop session's, an agent's, a container daemon's).
//!   `socketpair` stays allowed: its sockets have no name.

use libc::{sock_filter, sock_fprog};

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

/// Offsets in `struct seccomp_data`: `nr`, `arch`, then `args[6]` (u64 each); the low 32 bits
/// of an argument come first on the little-endian targets supported here.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARG0_LOW: u32 = 16;
const ARG_SIZE: u32 = 8;
/// `fchmodat2` has the same number on every architecture (the generic table).
const SYS_FCHMODAT2: libc::c_long = 452;
const SET_ID_BITS: u32 = 0o6000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Whether this architecture has a filter here.
pub const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn errno(e: i32) -> u32 {
    RET_ERRNO | (e as u32 & 0xffff)
}

/// The filter program. `deny_inet` refuses IPv4 and IPv6 sockets, `deny_unix` Unix sockets.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn program(deny_inet: bool, deny_unix: bool) -> Vec<sock_filter> {
    let mut p = vec![
        stmt(LD_W_ABS, OFF_ARCH),
        jump(JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(RET_K, RET_KILL_PROCESS),
        stmt(LD_W_ABS, OFF_NR),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        // x32 system calls carry this bit; they would bypass every rule below.
        p.push(jump(JGE_K, 0x4000_0000, 0, 1));
        p.push(stmt(RET_K, errno(libc::ENOSYS)));
    }
    let simple: &[(libc::c_long, u32)] = &[
        (libc::SYS_setsid, errno(0)),
        (libc::SYS_setpgid, errno(0)),
        (libc::SYS_io_uring_setup, errno(libc::ENOSYS)),
        (libc::SYS_io_uring_enter, errno(libc::ENOSYS)),
        (libc::SYS_io_uring_register, errno(libc::ENOSYS)),
        (libc::SYS_keyctl, errno(libc::ENOSYS)),
        (libc::SYS_add_key, errno(libc::ENOSYS)),
        (libc::SYS_request_key, errno(libc::ENOSYS)),
    ];
    for &(nr, ret) in simple {
        p.push(jump(JEQ_K, nr as u32, 0, 1));
        p.push(stmt(RET_K, ret));
    }
    // kill(-1, sig): the accumulator holds nr when the jump skips the body.
    p.push(jump(JEQ_K, libc::SYS_kill as u32, 0, 4));
    p.push(stmt(LD_W_ABS, OFF_ARG0_LOW));
    p.push(jump(JEQ_K, u32::MAX, 0, 1));
    p.push(stmt(RET_K, errno(libc::EPERM)));
    p.push(stmt(RET_K, RET_ALLOW));
    // chmod family: the mode argument must not carry set-id bits.
    #[cfg(target_arch = "x86_64")]
    let chmods: &[(libc::c_long, u32)] = &[
        (libc::SYS_chmod, 1),
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
    ];
    #[cfg(target_arch = "aarch64")]
    let chmods: &[(libc::c_long, u32)] = &[
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
    ];
    for &(nr, arg) in chmods {
        p.push(jump(JEQ_K, nr as u32, 0, 4));
        p.push(stmt(LD_W_ABS, OFF_ARG0_LOW + arg * ARG_SIZE));
        p.push(jump(JSET_K, SET_ID_BITS, 0, 1));
        p.push(stmt(RET_K, errno(libc::EPERM)));
        p.push(stmt(RET_K, RET_ALLOW));
    }
    let mut families: Vec<u32> = Vec::new();
    if deny_inet {
        families.extend([libc::AF_INET as u32, libc::AF_INET6 as u32]);
    }
    if deny_unix {
        families.push(libc::AF_UNIX as u32);
    }
    if !families.is_empty() {
        // socket(family, …): each refused family jumps to the EACCES return at the end.
        let n = families.len() as u8;
        p.push(jump(JEQ_K, libc::SYS_socket as u32, 0, n + 3));
        p.push(stmt(LD_W_ABS, OFF_ARG0_LOW));
        for (i, family) in families.iter().enumerate() {
            p.push(jump(JEQ_K, *family, n - i as u8, 0));
        }
        p.push(stmt(RET_K, RET_ALLOW));
        p.push(stmt(RET_K, errno(libc::EACCES)));
    }
    p.push(stmt(RET_K, RET_ALLOW));
    p
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn program(_deny_inet: bool, _deny_unix: bool) -> Vec<sock_filter> {
    Vec::new()
}

/// Installs `program` on the calling thread. Needs `no_new_privs` (or `CAP_SYS_ADMIN`).
///
/// # Safety
/// Async-signal-safe (one `prctl`); meant for the child between `fork` and `exec`. `program`
/// must be a valid filter from [`program`].
pub unsafe fn install(program: &[sock_filter]) -> i32 {
    let prog = sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut sock_filter,
    };
    // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies it.
    unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &prog as *const sock_fprog as libc::c_ulong,
            0,
            0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every jump lands inside the program, and the program ends with a return.
    #[test]
    fn jumps_stay_inside() {
        for (inet, unix) in [(false, false), (true, false), (false, true), (true, true)] {
            let p = program(inet, unix);
            if p.is_empty() {
                continue;
            }
            for (i, ins) in p.iter().enumerate() {
                if ins.code == JEQ_K || ins.code == JGE_K || ins.code == JSET_K {
                    assert!(
                        i + 1 + (ins.jt as usize) < p.len(),
                        "jt at {i} ({inet}, {unix})"
                    );
                    assert!(
                        i + 1 + (ins.jf as usize) < p.len(),
                        "jf at {i} ({inet}, {unix})"
                    );
                }
            }
            assert_eq!(p.last().map(|i| i.code), Some(RET_K));
            assert!(p.len() < 4096);
        }
    }
}
