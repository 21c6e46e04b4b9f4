//! What the child does between `fork` and `exec`. Everything here is a raw system call on
//! data built before the fork: after `fork` in a threaded process, allocating or taking a
//! lock could deadlock, so nothing here does.

use super::seccomp;
use libc::{c_int, c_ulong, sock_filter};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Marks a setup failure in the raw OS error the parent receives (`io::Error` from `spawn`).
const MARK: i32 = 0x4261_0000;

/// The steps, in order; their index is reported on failure.
pub const STEPS: [&str; 15] = [
    "process group",
    "resource limits",
    "working directory",
    "namespaces",
    "user namespace maps",
    "private mounts",
    "read-only root",
    "writable bind mounts",
    "read-only bind mounts",
    "loopback",
    "capabilities",
    "no_new_privs",
    "Landlock",
    "seccomp",
    "descriptors",
];

const STEP_PGROUP: i32 = 0;
const STEP_RLIMIT: i32 = 1;
const STEP_CWD: i32 = 2;
const STEP_UNSHARE: i32 = 3;
const STEP_MAPS: i32 = 4;
const STEP_PRIVATE: i32 = 5;
const STEP_RO_ROOT: i32 = 6;
const STEP_RW_BIND: i32 = 7;
const STEP_RO_BIND: i32 = 8;
const STEP_CAPS: i32 = 10;
const STEP_NNP: i32 = 11;
const STEP_LANDLOCK: i32 = 12;
const STEP_SECCOMP: i32 = 13;
const STEP_FDS: i32 = 14;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;

pub struct Bind {
    pub path: CString,
    /// Flags the original mount has and a remount must keep (nosuid, nodev…).
    pub keep_flags: c_ulong,
}

/// Maps of a new user namespace: the same ids inside as outside.
pub struct UserMaps {
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
}

#[derive(Default)]
pub struct ChildSetup {
    pub rlimits: Vec<(c_int, u64)>,
    pub unshare: c_int,
    /// A network namespace to enter (`setns`) instead of creating one.
    pub join_net: Option<std::os::fd::RawFd>,
    pub user_maps: Option<UserMaps>,
    pub private_mounts: bool,
    /// Every mount read-only (`mount_setattr`, recursive), then `rw_binds` bound read-write.
    pub readonly_root: bool,
    pub rw_binds: Vec<Bind>,
    /// The folders between a writable root and a read-only path, bound onto themselves
    /// read-write before the read-only binds: a mount point cannot be renamed or removed
    /// (EBUSY), so `mv .workflow elsewhere` cannot carry a read-only `.workflow/.maestro`
    /// away and let a new one be made in its place.
    pub pins: Vec<Bind>,
    pub binds: Vec<Bind>,
    pub loopback_up: bool,
    pub cwd: Option<OwnedFd>,
    /// The working directory's path, entered again once the writable binds are in place.
    pub cwd_path: Option<CString>,
    pub drop_caps: bool,
    pub last_cap: c_int,
    pub ruleset: Option<OwnedFd>,
    pub seccomp: Option<Vec<sock_filter>>,
}

fn fail(step: i32) -> io::Error {
    let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    io::Error::from_raw_os_error(MARK | (step << 8) | (errno & 0xff))
}

/// The step and errno of a failed setup, from the error `spawn` returned.
pub fn decode(e: &io::Error) -> Option<(&'static str, i32)> {
    let raw = e.raw_os_error()?;
    if raw & !0xffff != MARK {
        return None;
    }
    let step = ((raw >> 8) & 0xff) as usize;
    Some((STEPS.get(step).copied().unwrap_or("setup"), raw & 0xff))
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;

impl ChildSetup {
    /// Applies every step.
    ///
    /// # Safety
    /// Call only in a forked child before `exec` (or in a throwaway probe child): it changes
    /// the whole process irreversibly.
    pub unsafe fn apply(&self) -> io::Result<()> {
        // SAFETY (whole body): plain system calls on pointers to data owned by `self` or the
        // stack, all valid for the duration of each call.
        unsafe {
            if libc::setpgid(0, 0) != 0 {
                return Err(fail(STEP_PGROUP));
            }
            if !cloexec_inherited() {
                return Err(fail(STEP_FDS));
            }
            for &(resource, value) in &self.rlimits {
                let limit = libc::rlimit {
                    rlim_cur: value as libc::rlim_t,
                    rlim_max: value as libc::rlim_t,
                };
                if libc::setrlimit(resource as _, &limit) != 0 {
                    return Err(fail(STEP_RLIMIT));
                }
            }
            // Before `unshare`: a new mount namespace moves the working directory onto its
            // own copy of the mounts, while a directory descriptor would stay on the old ones
            // (outside the read-only binds below).
            if let Some(cwd) = &self.cwd
                && libc::fchdir(cwd.as_raw_fd()) != 0
            {
                return Err(fail(STEP_CWD));
            }
            // Without a path from the caller, remember where the process stands (a stack
            // buffer: nothing is allocated here).
            let mut here = [0 as libc::c_char; 4096];
            let here_known =
                self.cwd_path.is_none() && !libc::getcwd(here.as_mut_ptr(), here.len()).is_null();
            if let Some(net) = self.join_net
                && libc::setns(net, libc::CLONE_NEWNET) != 0
            {
                return Err(fail(STEP_UNSHARE));
            }
            if self.unshare != 0 && libc::unshare(self.unshare) != 0 {
                return Err(fail(STEP_UNSHARE));
            }
            if let Some(maps) = &self.user_maps {
                // A non-dumpable process (baton, once its key is loaded) has its /proc files
                // owned by the initial namespace's root: this child could not write its own
                // maps. It becomes dumpable for the writes; exec resets the flag anyway.
                let dumpable = libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0);
                if dumpable == 0 {
                    libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
                }
                // `setgroups` must be denied before an unprivileged process writes gid_map.
                let written = write_file(c"/proc/self/setgroups", b"deny")
                    && write_file(c"/proc/self/uid_map", &maps.uid_map)
                    && write_file(c"/proc/self/gid_map", &maps.gid_map);
                if dumpable == 0 {
                    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
                }
                if !written {
                    return Err(fail(STEP_MAPS));
                }
            }
            if self.private_mounts
                && libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
            {
                return Err(fail(STEP_PRIVATE));
            }
            if self.readonly_root {
                let attr = MountAttr {
                    attr_set: MOUNT_ATTR_RDONLY,
                    attr_clr: 0,
                    propagation: 0,
                    userns_fd: 0,
                };
                if libc::syscall(
                    libc::SYS_mount_setattr,
                    libc::AT_FDCWD,
                    c"/".as_ptr(),
                    libc::AT_RECURSIVE as libc::c_uint,
                    &attr,
                    std::mem::size_of::<MountAttr>(),
                ) != 0
                {
                    return Err(fail(STEP_RO_ROOT));
                }
                for bind in &self.rw_binds {
                    if !bind_mount(bind, false) {
                        return Err(fail(STEP_RW_BIND));
                    }
                }
            }
            for bind in &self.pins {
                if !bind_mount(bind, false) {
                    return Err(fail(STEP_RO_BIND));
                }
            }
            for bind in &self.binds {
                if !bind_mount(bind, true) {
                    return Err(fail(STEP_RO_BIND));
                }
            }
            // The working directory still points at the mount below the new binds: enter it
            // again by path, so it is seen through them (read-only where they say so).
            if self.readonly_root || !self.binds.is_empty() {
                let path = match &self.cwd_path {
                    Some(p) => p.as_ptr(),
                    None if here_known => here.as_ptr(),
                    None => std::ptr::null(),
                };
                if !path.is_null() && libc::chdir(path) != 0 {
                    return Err(fail(STEP_CWD));
                }
            }
            if self.loopback_up {
                // Best effort: without it local servers of a test suite cannot listen, but
                // nothing leaks.
                loopback_up();
            }
            if self.drop_caps {
                for cap in 0..=self.last_cap {
                    if libc::prctl(libc::PR_CAPBSET_DROP, cap as c_ulong, 0, 0, 0) != 0
                        && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
                    {
                        return Err(fail(STEP_CAPS));
                    }
                }
                // Fails with EINVAL on kernels without ambient capabilities: nothing to clear.
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_CLEAR_ALL as c_ulong,
                    0,
                    0,
                    0,
                );
                let header = CapHeader {
                    version: CAP_VERSION_3,
                    pid: 0,
                };
                let data = [CapData {
                    effective: 0,
                    permitted: 0,
                    inheritable: 0,
                }; 2];
                if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) != 0 {
                    return Err(fail(STEP_CAPS));
                }
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(fail(STEP_NNP));
            }
            if let Some(ruleset) = &self.ruleset
                && libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0) != 0
            {
                return Err(fail(STEP_LANDLOCK));
            }
            if let Some(program) = &self.seccomp
                && seccomp::install(program) != 0
            {
                return Err(fail(STEP_SECCOMP));
            }
        }
        Ok(())
    }
}

/// Marks every descriptor above 2 close-on-exec: one baton inherited without the flag (from
/// its own parent, or a library that forgot it) must not reach the command. Marked rather than
/// closed, so the pipe on which `std` reports a failed `exec` keeps working until the `exec`.
/// Async-signal-safe: `close_range` (Linux 5.11), else `/proc/self/fd` read with `getdents64`
/// into a stack buffer.
///
/// # Safety
/// Only system calls; meant for a forked child before `exec`.
pub unsafe fn cloexec_inherited() -> bool {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: system calls on integers and on a stack buffer of the given length.
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return true;
        }
        cloexec_listed()
    }
}

/// The fallback of [`cloexec_inherited`] for kernels before 5.11.
///
/// # Safety
/// As [`cloexec_inherited`].
unsafe fn cloexec_listed() -> bool {
    // SAFETY: system calls on integers and on a stack buffer of the given length.
    unsafe {
        let dir = libc::open(
            c"/proc/self/fd".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return false;
        }
        let mut buf = [0u8; 4096];
        let ok;
        loop {
            let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                ok = n == 0;
                break;
            }
            let n = n as usize;
            let mut at = 0;
            // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
            while at + 19 < n {
                let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                if reclen == 0 {
                    break;
                }
                let mut fd: i32 = 0;
                let mut digits = 0;
                let mut i = at + 19;
                while i < at + reclen && i < n && buf[i] != 0 {
                    let c = buf[i];
                    if !c.is_ascii_digit() || fd > i32::MAX / 10 - 10 {
                        digits = 0;
                        break;
                    }
                    fd = fd * 10 + i32::from(c - b'0');
                    digits += 1;
                    i += 1;
                }
                if digits > 0 && fd > 2 && fd != dir {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags >= 0 {
                        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                    }
                }
                at += reclen;
            }
        }
        libc::close(dir);
        ok
    }
}

/// Binds `bind.path` onto itself and remounts it read-only or read-write, keeping the flags a
/// user namespace may not drop.
unsafe fn bind_mount(bind: &Bind, read_only: bool) -> bool {
    let p = bind.path.as_ptr();
    let mut flags = libc::MS_BIND | libc::MS_REMOUNT | bind.keep_flags;
    if read_only {
        flags |= libc::MS_RDONLY;
    }
    // SAFETY: `p` is NUL-terminated and outlives both calls.
    unsafe {
        libc::mount(p, p, std::ptr::null(), libc::MS_BIND, std::ptr::null()) == 0
            && libc::mount(
                std::ptr::null(),
                p,
                std::ptr::null(),
                flags,
                std::ptr::null(),
            ) == 0
    }
}

/// Writes `data` to a `/proc` file in one `write`.
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> bool {
    // SAFETY: `path` is NUL-terminated, `data` valid for its length; the fd is closed here.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        n == data.len() as isize
    }
}

/// Sets `lo` up in the new network namespace, so 127.0.0.1 works inside it.
pub(super) unsafe fn loopback_up() {
    // SAFETY: a zeroed `ifreq` is a valid value; the ioctls read and write only it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return;
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(fd, libc::SIOCSIFFLAGS, &req);
        }
        libc::close(fd);
    }
}

#[cfg(test)]
mod tests {
    /// The `/proc/self/fd` fallback marks an inherited descriptor close-on-exec (checked in a
    /// forked child, so the test process keeps its descriptors as they are).
    #[test]
    fn the_listing_fallback_marks_every_descriptor() {
        // SAFETY: the child makes system calls only and leaves with `_exit`.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                let high = libc::fcntl(fd, libc::F_DUPFD, 900);
                let before = libc::fcntl(high, libc::F_GETFD) & libc::FD_CLOEXEC;
                let ok = super::cloexec_listed();
                let after = libc::fcntl(high, libc::F_GETFD) & libc::FD_CLOEXEC;
                let err = libc::fcntl(2, libc::F_GETFD) & libc::FD_CLOEXEC;
                libc::_exit(if ok && before == 0 && after != 0 && err == 0 {
                    0
                } else {
                    1
                });
            }
            let mut status = 0;
            assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        }
    }
}
