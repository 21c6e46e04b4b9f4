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
pub const STEPS: [&str; 12] = [
    "process group",
    "resource limits",
    "namespaces",
    "user namespace maps",
    "private mounts",
    "read-only bind mounts",
    "loopback",
    "working directory",
    "capabilities",
    "no_new_privs",
    "Landlock",
    "seccomp",
];

const STEP_PGROUP: i32 = 0;
const STEP_RLIMIT: i32 = 1;
const STEP_UNSHARE: i32 = 2;
const STEP_MAPS: i32 = 3;
const STEP_PRIVATE: i32 = 4;
const STEP_BIND: i32 = 5;
const STEP_CWD: i32 = 7;
const STEP_CAPS: i32 = 8;
const STEP_NNP: i32 = 9;
const STEP_LANDLOCK: i32 = 10;
const STEP_SECCOMP: i32 = 11;

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
    pub user_maps: Option<UserMaps>,
    pub private_mounts: bool,
    pub binds: Vec<Bind>,
    pub loopback_up: bool,
    pub cwd: Option<OwnedFd>,
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
            for &(resource, value) in &self.rlimits {
                let limit = libc::rlimit {
                    rlim_cur: value as libc::rlim_t,
                    rlim_max: value as libc::rlim_t,
                };
                if libc::setrlimit(resource as _, &limit) != 0 {
                    return Err(fail(STEP_RLIMIT));
                }
            }
            if self.unshare != 0 && libc::unshare(self.unshare) != 0 {
                return Err(fail(STEP_UNSHARE));
            }
            if let Some(maps) = &self.user_maps {
                // `setgroups` must be denied before an unprivileged process writes gid_map.
                if !write_file(c"/proc/self/setgroups", b"deny")
                    || !write_file(c"/proc/self/uid_map", &maps.uid_map)
                    || !write_file(c"/proc/self/gid_map", &maps.gid_map)
                {
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
            for bind in &self.binds {
                let p = bind.path.as_ptr();
                if libc::mount(p, p, std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0
                    || libc::mount(
                        std::ptr::null(),
                        p,
                        std::ptr::null(),
                        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | bind.keep_flags,
                        std::ptr::null(),
                    ) != 0
                {
                    return Err(fail(STEP_BIND));
                }
            }
            if self.loopback_up {
                // Best effort: without it local servers of a test suite cannot listen, but
                // nothing leaks.
                loopback_up();
            }
            if let Some(cwd) = &self.cwd
                && libc::fchdir(cwd.as_raw_fd()) != 0
            {
                return Err(fail(STEP_CWD));
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
unsafe fn loopback_up() {
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
