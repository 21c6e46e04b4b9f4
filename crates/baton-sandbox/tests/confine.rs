//! The layers on real child processes. Where this kernel lacks a layer, the test checks that
//! an enforcing spec is refused with SANDBOX_UNAVAILABLE instead.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test
#![cfg(target_os = "linux")]

use baton_sandbox::{
    Capabilities, Confinement, Layer, Limits, NamespaceMode, SandboxError, SandboxSpec, Signal,
    capabilities, kill_group,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Dirs {
    _root: tempfile::TempDir,
    project: PathBuf,
    outside: PathBuf,
    secret: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("project");
    let outside = root.path().join("outside");
    let secret = root.path().join("secret");
    for d in [&project, &outside, &secret] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(secret.join("key"), "s3cret").unwrap();
    std::fs::create_dir(project.join(".git")).unwrap();
    Dirs {
        _root: root,
        project,
        outside,
        secret,
    }
}

fn spec(d: &Dirs) -> SandboxSpec {
    SandboxSpec {
        writable: vec![d.project.clone()],
        read_denied: vec![d.secret.clone()],
        read_only: vec![d.project.join(".git")],
        network: false,
        limits: Limits::default(),
        enforce: true,
        ..SandboxSpec::default()
    }
}

/// Whether the whole sandbox can run here; if not, checks the refusal and returns false.
fn full_sandbox(spec: &SandboxSpec) -> bool {
    let caps = capabilities();
    let complete = caps.landlock_abi.is_some()
        && caps.seccomp
        && caps.namespaces != NamespaceMode::Unavailable;
    if !complete {
        let err = Confinement::prepare(spec, caps).err().expect("refused");
        assert_eq!(err.code(), "SANDBOX_UNAVAILABLE");
        eprintln!("sandbox incomplete here ({caps:?}): checked the refusal only");
    }
    complete
}

fn run_sh(spec: &SandboxSpec, cwd: &Path, script: &str) -> Output {
    let c = Confinement::prepare(spec, capabilities()).unwrap();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(script)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.install(&mut cmd, None);
    cmd.output().unwrap()
}

#[test]
fn writes_only_beneath_the_writable_directory() {
    let d = dirs();
    let s = spec(&d);
    if !full_sandbox(&s) {
        return;
    }
    let out = run_sh(
        &s,
        &d.project,
        &format!(
            "echo in > inside.txt && echo out > {}/x.txt; echo hook > .git/hook; echo $?",
            d.outside.display()
        ),
    );
    assert_eq!(
        std::fs::read_to_string(d.project.join("inside.txt")).unwrap(),
        "in\n"
    );
    assert!(!d.outside.join("x.txt").exists(), "{out:?}");
    assert!(!d.project.join(".git/hook").exists(), "{out:?}");
}

#[test]
fn nothing_outside_changes_not_even_modes() {
    let d = dirs();
    let s = spec(&d);
    if !full_sandbox(&s) {
        return;
    }
    let victim = d.outside.join("victim");
    std::fs::write(&victim, "v").unwrap();
    let mode = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    };
    let before = mode(&victim);
    std::fs::write(d.project.join("tool"), "#!/bin/sh\n").unwrap();
    let out = run_sh(
        &s,
        &d.project,
        &format!(
            "chmod 777 {v}; touch -d 2001-01-01 {v}; chmod u+s tool; cd .git && echo x > from-inside; echo done",
            v = victim.display()
        ),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "done",
        "{out:?}"
    );
    assert_eq!(mode(&victim), before, "{out:?}");
    assert_eq!(
        mode(&d.project.join("tool")) & 0o4000,
        0,
        "no set-user-ID bit"
    );
    assert!(!d.project.join(".git/from-inside").exists(), "{out:?}");
}

#[test]
fn denied_paths_are_unreadable() {
    let d = dirs();
    let s = spec(&d);
    if !full_sandbox(&s) {
        return;
    }
    let out = run_sh(&s, &d.project, &format!("cat {}/key", d.secret.display()));
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("s3cret"));
    // Reads elsewhere still work.
    let out = run_sh(&s, &d.project, "cat /etc/hostname >/dev/null && echo ok");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok", "{out:?}");
}

#[test]
fn the_process_group_holds_every_descendant() {
    let d = dirs();
    let s = spec(&d);
    if !full_sandbox(&s) {
        return;
    }
    let c = Confinement::prepare(&s, capabilities()).unwrap();
    let mut cmd = Command::new("/bin/sh");
    // setsid would move the sleeper out of the group; here it stays.
    cmd.arg("-c")
        .arg("setsid sleep 30 >/dev/null 2>&1 & echo $!")
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    c.install(&mut cmd, None);
    let child = cmd.spawn().unwrap();
    let pgid = child.id();
    let out = child.wait_with_output().unwrap();
    let sleeper: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(
        kill_group(pgid, Signal::Probe),
        "the sleeper is still in the group"
    );
    assert!(kill_group(pgid, Signal::Kill));
    let started = Instant::now();
    while Path::new(&format!("/proc/{sleeper}")).exists()
        && std::fs::read_to_string(format!("/proc/{sleeper}/stat"))
            .is_ok_and(|s| !s.contains(") Z "))
    {
        assert!(
            // Generous for a loaded machine, well under the sleeper's own 30 s.
            started.elapsed() < Duration::from_secs(15),
            "sleeper survived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn kill_group_refuses_special_ids() {
    assert!(!kill_group(0, Signal::Probe));
    assert!(!kill_group(1, Signal::Probe));
}

#[test]
fn missing_layers_are_refused_or_reported() {
    let d = dirs();
    let mut s = spec(&d);
    let none = Capabilities::none();
    match Confinement::prepare(&s, &none) {
        Err(SandboxError::Unavailable { missing, .. }) => {
            assert!(missing.contains(&Layer::Filesystem));
            assert!(missing.contains(&Layer::Network));
            assert!(missing.contains(&Layer::ProtectedPaths));
        }
        other => panic!("expected SANDBOX_UNAVAILABLE, got {:?}", other.err()),
    }
    s.enforce = false;
    let c = Confinement::prepare(&s, &none).unwrap();
    assert!(!c.applied().iter().any(|(l, _)| *l == Layer::Filesystem));
}

#[test]
fn probe_reports_every_layer() {
    let caps = capabilities();
    eprintln!("{caps:?}");
    let layers = caps.layers();
    assert_eq!(layers.len(), 6);
    for l in &layers {
        eprintln!("{:>16} {} {}", l.layer.as_str(), l.available, l.how);
    }
}

#[test]
fn a_denied_path_created_later_stays_unreadable() {
    let d = dirs();
    let home = d.outside.join("home");
    std::fs::create_dir(&home).unwrap();
    let mut s = spec(&d);
    s.read_denied.push(home.join(".aws"));
    if !full_sandbox(&s) {
        return;
    }
    // The ruleset is built while ~/.aws does not exist; the key appears afterwards.
    let c = Confinement::prepare(&s, capabilities()).unwrap();
    std::fs::create_dir(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/credentials"), "AKIALATER").unwrap();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(format!("cat {}/.aws/credentials", home.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.install(&mut cmd, None);
    let out = cmd.output().unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("AKIALATER"),
        "{out:?}"
    );
}

/// A descriptor opened for writing outside the project, inherited without close-on-exec (as
/// from baton's own parent): not open in the command.
#[test]
fn an_inherited_descriptor_does_not_reach_the_command() {
    use std::os::unix::ffi::OsStrExt;
    let d = dirs();
    let s = spec(&d);
    if !full_sandbox(&s) {
        return;
    }
    let target = d.outside.join("through-fd");
    let c_path = std::ffi::CString::new(target.as_os_str().as_bytes()).unwrap();
    // SAFETY: plain system calls; the descriptors are closed below. A high number, so no
    // other test's descriptor is disturbed; no O_CLOEXEC, on purpose.
    let fd = unsafe {
        let raw = libc::open(c_path.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o600);
        assert!(raw >= 0);
        let high = libc::fcntl(raw, libc::F_DUPFD, 700);
        libc::close(raw);
        assert!(high >= 700);
        high
    };
    let out = run_sh(&s, &d.project, &format!("echo leaked >&{fd}; echo rc=$?"));
    // Unconfined children (MCP servers) get the same treatment.
    let mut plain = Command::new("/bin/sh");
    plain
        .arg("-c")
        .arg(format!("echo leaked-plain >&{fd}; echo rc=$?"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    baton_sandbox::close_inherited_fds(&mut plain);
    let plain_out = plain.output().unwrap();
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "",
        "{out:?} {plain_out:?}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("rc=0"),
        "{out:?}"
    );
    assert!(
        !String::from_utf8_lossy(&plain_out.stdout).contains("rc=0"),
        "{plain_out:?}"
    );
}

/// `$HOME` denied as a whole, a toolchain folder in it allowed, a secret in that folder still
/// denied.
#[test]
fn a_denied_home_keeps_only_its_allowed_folders_readable() {
    let d = dirs();
    let home = d.outside.join("home");
    for dir in [".cargo/bin", ".config/openai", ".ssh"] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    std::fs::write(home.join(".bashrc"), "export OPENAI_API_KEY=sk-bashrc\n").unwrap();
    std::fs::write(home.join(".config/openai/key"), "sk-config").unwrap();
    std::fs::write(home.join(".cargo/bin/tool"), "toolchain").unwrap();
    std::fs::write(home.join(".cargo/credentials.toml"), "token-cargo").unwrap();
    let mut s = spec(&d);
    s.read_denied.push(home.clone());
    s.read_denied.push(home.join(".cargo/credentials.toml"));
    s.read_denied.push(home.join(".ssh"));
    s.read_allowed = vec![home.join(".cargo"), home.join(".ssh")];
    if !full_sandbox(&s) {
        return;
    }
    let h = home.display();
    let out = run_sh(
        &s,
        &d.project,
        &format!(
            "cat {h}/.bashrc; cat {h}/.config/openai/key; cat {h}/.cargo/credentials.toml; ls {h}; ls {h}/.ssh; cat {h}/.cargo/bin/tool"
        ),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("toolchain"), "{out:?}");
    for secret in ["sk-bashrc", "sk-config", "token-cargo", ".bashrc"] {
        assert!(!stdout.contains(secret), "{secret}: {out:?}");
    }
}

/// Run as `connect` helper by the Unix socket test (inside the sandbox); a no-op otherwise.
#[test]
fn helper_unix_connect() {
    let Some(path) = std::env::var_os("BATON_TEST_CONNECT") else {
        return;
    };
    match std::os::unix::net::UnixStream::connect(&path) {
        Ok(_) => println!("CONNECT-RESULT=connected"),
        Err(e) => println!("CONNECT-RESULT=refused {e}"),
    }
}

fn connect_from_sandbox(spec: &SandboxSpec, cwd: &Path, socket: &Path) -> String {
    let c = Confinement::prepare(spec, capabilities()).unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "helper_unix_connect",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("BATON_TEST_CONNECT", socket)
    .current_dir(cwd)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c.install(&mut cmd, None);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    stdout
        .lines()
        .find_map(|l| l.split_once("CONNECT-RESULT="))
        .map(|(_, r)| r.to_string())
        .unwrap_or_else(|| format!("no result: {out:?}"))
}

/// A named socket listening outside the project (an agent's, a daemon's) cannot be reached;
/// the policy switch allows Unix sockets again (before Landlock ABI 9, which confines them by
/// path, that includes this one).
#[test]
fn a_unix_socket_outside_the_project_cannot_be_connected_to() {
    let d = dirs();
    let mut s = spec(&d);
    if !full_sandbox(&s) {
        return;
    }
    let socket = d.outside.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let result = connect_from_sandbox(&s, &d.project, &socket);
    assert!(result.starts_with("refused"), "{result}");
    // The test's own connection still works: the socket was there to be reached.
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok());
    s.unix_sockets = true;
    let result = connect_from_sandbox(&s, &d.project, &socket);
    if capabilities().landlock_abi.is_some_and(|a| a >= 9) {
        assert!(result.starts_with("refused"), "Landlock ABI 9: {result}");
    } else {
        assert_eq!(result, "connected");
    }
    drop(listener);
}

/// Non-dumpable once protected (the API key is in the process), and a confined child still
/// starts (through a user namespace too, whose maps need a dumpable child).
#[test]
fn protect_process_makes_baton_non_dumpable() {
    let before = baton_sandbox::probe();
    assert!(baton_sandbox::protect_process());
    assert_eq!(baton_sandbox::dumpable(), Some(false));
    // An unprivileged user enters namespaces through a user namespace, whose maps the child
    // writes in its own /proc: that must still work from a non-dumpable parent.
    assert_eq!(baton_sandbox::probe(), before);
    let d = dirs();
    let s = spec(&d);
    if !full_sandbox(&s) {
        return;
    }
    let out = run_sh(&s, &d.project, "echo started");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "started",
        "{out:?}"
    );
}

/// A command that joins a run's private network reaches the one listener baton bound on that
/// namespace's loopback, and nothing on the host's loopback (where every other local server,
/// and the way out, are).
#[test]
fn a_private_network_reaches_only_its_own_listener() {
    let d = dirs();
    let private = match baton_sandbox::PrivateNetwork::new() {
        Ok(p) => p,
        Err(e) => {
            assert_ne!(capabilities().namespaces, NamespaceMode::Direct, "{e}");
            eprintln!("no private network here ({e}): skipped");
            return;
        }
    };
    let inside = private.bind_loopback().unwrap();
    let inside_port = inside.local_addr().unwrap().port();
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host.local_addr().unwrap().port();
    host.set_nonblocking(true).unwrap();
    let s = SandboxSpec {
        join_network: Some(private.namespace()),
        ..spec(&d)
    };
    if !full_sandbox(&s) {
        return;
    }
    let c = Confinement::prepare(&s, capabilities()).unwrap();
    assert!(
        c.applied()
            .iter()
            .any(|(l, how)| *l == Layer::Network && how == "private-namespace")
    );
    let out = run_sh(
        &s,
        &d.project,
        &format!(
            "bash -c 'echo hello >/dev/tcp/127.0.0.1/{inside_port}' && echo reached; \
             bash -c 'echo x >/dev/tcp/127.0.0.1/{host_port}' 2>/dev/null && echo host-reached; \
             bash -c 'echo x >/dev/tcp/1.1.1.1/80' 2>/dev/null && echo out-reached; echo end"
        ),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The child has exited: what it sent waits in the accepted connection's buffer.
    inside.set_nonblocking(true).unwrap();
    let (mut conn, _) = inside.accept().expect("the child connected");
    conn.set_nonblocking(false).unwrap();
    let mut got = String::new();
    std::io::Read::read_to_string(&mut conn, &mut got).unwrap();
    assert_eq!(got, "hello\n", "{out:?}");
    assert!(stdout.contains("reached\n"), "{out:?}");
    assert!(!stdout.contains("host-reached"), "{out:?}");
    assert!(!stdout.contains("out-reached"), "{out:?}");
    assert!(
        host.accept().is_err(),
        "nothing connected to the host's listener"
    );
    // The process's own connections stay in the host's namespace.
    assert!(std::net::TcpStream::connect(("127.0.0.1", host_port)).is_ok());
}
