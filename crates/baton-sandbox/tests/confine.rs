//! The layers on real child processes. Where this kernel lacks a layer, the test checks that
//! an enforcing spec is refused with SANDBOX_UNAVAILABLE instead.

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
            started.elapsed() < Duration::from_secs(5),
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
