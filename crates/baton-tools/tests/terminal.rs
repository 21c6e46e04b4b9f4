//! Hostile `terminal.run` calls: writes outside the project (absolute, `..`, a symlink, /tmp,
//! the store, the user's home, `.git`, baton.toml, modes), reads of the store, of secrets and
//! of raw devices, network egress to listeners the test runs outside the sandbox, fork bombs,
//! runaway output, processes that outlive their parent or escape their group, signals to the
//! outside, environment leaks, working-directory escapes and shell metacharacters passed as
//! arguments. Each case must be refused or contained, leave one audit line, and name no host
//! path. Where this kernel lacks a sandbox layer, every case that would start a program must
//! be refused with SANDBOX_UNAVAILABLE instead.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod common;

use baton_sandbox::{Capabilities, NamespaceMode, capabilities};
use baton_tools::{TerminalRuntime, TerminalSettings, ToolRuntime};
use common::Env;
use serde_json::{Value, json};
use std::fs;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const FAKE_KEY: &str = "sk-hostile-test-key-0000";

struct Ctx {
    project: PathBuf,
    outside: PathBuf,
    store: PathBuf,
    user_home: PathBuf,
    temp_root: PathBuf,
    nonce: String,
    tcp: TcpListener,
    udp: UdpSocket,
    canary: Child,
}

fn sandbox_complete(caps: &Capabilities) -> bool {
    caps.landlock_abi.is_some() && caps.seccomp && caps.namespaces != NamespaceMode::Unavailable
}

fn terminal_policy() -> TerminalSettings {
    TerminalSettings {
        enabled: true,
        timeout_ms: 20_000,
        kill_grace_ms: 300,
        max_output_bytes: 1024 * 1024,
        max_stdout_bytes: 4096,
        max_stderr_bytes: 4096,
        max_processes: Some(64),
        ..TerminalSettings::default()
    }
}

fn setup() -> (Env, Ctx) {
    let mut env = Env::new();
    env.policy.terminal = terminal_policy();
    let root = env.tmp.path().to_path_buf();
    let user_home = root.join("userhome");
    fs::create_dir_all(user_home.join(".ssh")).unwrap();
    fs::create_dir_all(user_home.join(".aws")).unwrap();
    fs::write(
        user_home.join(".ssh/id_rsa"),
        "-----BEGIN PRIVATE KEY-----\n",
    )
    .unwrap();
    fs::write(
        user_home.join(".aws/credentials"),
        "aws_secret_access_key=AKIASECRET\n",
    )
    .unwrap();
    let temp_root = root.join("tmproot");
    fs::create_dir_all(&temp_root).unwrap();
    let project = env.project_root.clone();
    symlink(&env.outside, project.join("link_out")).unwrap();
    fs::create_dir_all(project.join(".git/hooks")).unwrap();
    fs::write(project.join(".git/config"), "[core]\n").unwrap();
    fs::write(project.join("baton.toml"), "# the user's settings\n").unwrap();
    fs::create_dir_all(project.join(".workflow/.maestro/ralph-1")).unwrap();
    fs::write(
        project.join(".workflow/.maestro/ralph-1/status.json"),
        "{\"status\": \"running\"}\n",
    )
    .unwrap();
    fs::create_dir_all(project.join("_bmad/bmm")).unwrap();
    fs::write(
        project.join("_bmad/bmm/config.yaml"),
        "implementation_artifacts: impl\n",
    )
    .unwrap();
    fs::write(project.join("tool.sh"), "#!/bin/sh\necho tool\n").unwrap();
    fs::set_permissions(project.join("tool.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    env.host.set_runtime(ToolRuntime {
        terminal: TerminalRuntime {
            user_home: Some(user_home.clone()),
            parent_env: Some(vec![
                ("PATH".into(), PATH.into()),
                ("LANG".into(), "C.UTF-8".into()),
                ("OPENAI_API_KEY".into(), FAKE_KEY.into()),
                ("CI".into(), "true".into()),
            ]),
            temp_root: Some(temp_root.clone()),
            ..TerminalRuntime::default()
        },
        ..ToolRuntime::default()
    });
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let canary = Command::new("sleep").arg("60").spawn().unwrap();
    let nonce = format!("{}{}", std::process::id(), env.run_id.len());
    let ctx = Ctx {
        project,
        outside: env.outside.clone(),
        store: root.join("home"),
        user_home,
        temp_root,
        nonce,
        tcp,
        udp,
        canary,
    };
    (env, ctx)
}

impl Drop for Ctx {
    fn drop(&mut self) {
        let _ = self.canary.kill();
        let _ = self.canary.wait();
    }
}

/// What a case must end with.
enum Expect {
    /// Refused before anything starts, with this code.
    Refused(&'static str),
    /// It may run (any exit code, or one of these errors); `check` proves containment.
    Contained(&'static [&'static str]),
}

type Check = Box<dyn Fn(&Ctx, &Value)>;

struct Case {
    name: &'static str,
    args: Value,
    expect: Expect,
    check: Check,
}

fn case(
    name: &'static str,
    args: Value,
    expect: Expect,
    check: impl Fn(&Ctx, &Value) + 'static,
) -> Case {
    Case {
        name,
        args,
        expect,
        check: Box::new(check),
    }
}

fn sh(script: String) -> Value {
    json!({"command": "sh", "args": ["-c", script]})
}

fn stdout(r: &Value) -> String {
    r.get("stdout")
        .or_else(|| r.pointer("/error/details/stdout"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn absent(p: PathBuf) -> impl Fn(&Ctx, &Value) {
    move |_, r| assert!(!p.exists(), "{} was created: {r:#}", p.display())
}

fn not_in_stdout(secret: &'static str) -> impl Fn(&Ctx, &Value) {
    move |_, r| assert!(!r.to_string().contains(secret), "{secret} leaked: {r:#}")
}

/// No process of the test's bombs and sleepers is left (they carry the marker variable).
fn no_marked_process(ctx: &Ctx) {
    let marker = format!("BATON_HOSTILE={}", ctx.nonce);
    let started = Instant::now();
    loop {
        let alive: Vec<String> = fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .chars()
                    .all(|c| c.is_ascii_digit())
            })
            .filter(|e| {
                let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                let zombie = stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z'));
                !zombie
                    && fs::read(e.path().join("environ"))
                        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if alive.is_empty() {
            return;
        }
        // Generous for a loaded 2-core machine, still well under the `sleep 30` the
        // processes would otherwise outlive it with.
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "processes survived the call: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn marked(mut args: Value, ctx_nonce: &str) -> Value {
    args["env"] = json!({"BATON_HOSTILE": ctx_nonce});
    args
}

fn cases(ctx: &Ctx) -> Vec<Case> {
    let o = ctx.outside.display().to_string();
    let store = ctx.store.display().to_string();
    let home = ctx.user_home.display().to_string();
    let nonce = ctx.nonce.clone();
    let tmp_file = PathBuf::from(format!("/tmp/baton-hostile-{nonce}"));
    let project_json = fs::read_dir(ctx.store.join("projects"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path()
        .join("project.json");
    let state_file = fs::read_dir(project_json.parent().unwrap().join("runs"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path()
        .join("state/workflow.md");
    let tcp_port = ctx.tcp.local_addr().unwrap().port();
    let udp_port = ctx.udp.local_addr().unwrap().port();
    let me = std::process::id();
    let ran = Expect::Contained(&[]);
    let mut all = vec![
        // Writes outside the project.
        case(
            "absolute write",
            sh(format!("echo x > {o}/w1")),
            Expect::Contained(&[]),
            absent(ctx.outside.join("w1")),
        ),
        case(
            "dotdot write",
            sh("echo x > ../outside/w2".into()),
            Expect::Contained(&[]),
            absent(ctx.outside.join("w2")),
        ),
        case(
            "write through a symlink",
            sh("echo x > link_out/w3".into()),
            Expect::Contained(&[]),
            absent(ctx.outside.join("w3")),
        ),
        case(
            "write to /tmp",
            sh(format!("echo x > {}", tmp_file.display())),
            Expect::Contained(&[]),
            absent(tmp_file.clone()),
        ),
        case(
            "write beside the run's temp dir",
            sh("echo x > \"$TMPDIR/../w5\"".into()),
            Expect::Contained(&[]),
            absent(ctx.temp_root.join("w5")),
        ),
        case(
            "write into the store",
            sh(format!("echo x > {store}/w6")),
            Expect::Contained(&[]),
            absent(ctx.store.join("w6")),
        ),
        case(
            "delete the store",
            json!({"command": "rm", "args": ["-rf", format!("{store}/projects")]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert!(
                    c.store.join("projects").is_dir(),
                    "the store was deleted: {r:#}"
                )
            },
        ),
        case(
            "cp out (no shell)",
            json!({"command": "cp", "args": ["README.md", format!("{o}/w8")]}),
            Expect::Contained(&[]),
            absent(ctx.outside.join("w8")),
        ),
        case(
            "mv out",
            json!({"command": "mv", "args": ["README.md", format!("{o}/w9")]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert!(
                    c.project.join("README.md").exists() && !c.outside.join("w9").exists(),
                    "{r:#}"
                )
            },
        ),
        case(
            "hard link out",
            json!({"command": "ln", "args": ["README.md", format!("{o}/w10")]}),
            Expect::Contained(&[]),
            absent(ctx.outside.join("w10")),
        ),
        case(
            "symlink planted outside",
            json!({"command": "ln", "args": ["-s", "/etc/passwd", format!("{o}/w11")]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert!(c.outside.join("w11").symlink_metadata().is_err(), "{r:#}")
            },
        ),
        case(
            "write into the user's home",
            json!({"command": "touch", "args": [format!("{home}/w12")]}),
            Expect::Contained(&[]),
            absent(ctx.user_home.join("w12")),
        ),
        case(
            "plant a git hook",
            sh("echo evil > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit".into()),
            Expect::Contained(&[]),
            absent(ctx.project.join(".git/hooks/pre-commit")),
        ),
        case(
            "plant a git hook from inside .git",
            json!({"command": "sh", "args": ["-c", "echo evil > hooks/post-checkout"], "cwd": "@project/.git"}),
            Expect::Contained(&[]),
            absent(ctx.project.join(".git/hooks/post-checkout")),
        ),
        case(
            "move .git away",
            json!({"command": "mv", "args": [".git", "git-moved"]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert!(
                    c.project.join(".git/config").exists() && !c.project.join("git-moved").exists(),
                    "{r:#}"
                )
            },
        ),
        case(
            "rewrite baton.toml",
            sh("echo '[tools.terminal]' >> baton.toml; rm -f baton.toml".into()),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert_eq!(
                    fs::read_to_string(c.project.join("baton.toml")).unwrap(),
                    "# the user's settings\n",
                    "{r:#}"
                )
            },
        ),
        case(
            "forge a lifecycle session's status.json",
            sh(
                "echo '{\"status\": \"completed\"}' > .workflow/.maestro/ralph-1/status.json"
                    .into(),
            ),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert_eq!(
                    fs::read_to_string(c.project.join(".workflow/.maestro/ralph-1/status.json"))
                        .unwrap(),
                    "{\"status\": \"running\"}\n",
                    "{r:#}"
                )
            },
        ),
        case(
            "move the sessions' parent away and write a session anew",
            sh(
                "mv .workflow .workflow-moved; mkdir -p .workflow/.maestro/ralph-1; \
                 echo '{\"status\": \"completed\"}' > .workflow/.maestro/ralph-1/status.json"
                    .into(),
            ),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert_eq!(
                    fs::read_to_string(c.project.join(".workflow/.maestro/ralph-1/status.json"))
                        .unwrap(),
                    "{\"status\": \"running\"}\n",
                    "{r:#}"
                );
                assert!(!c.project.join(".workflow-moved").exists(), "{r:#}");
            },
        ),
        case(
            "move BMAD's folders away and write a configuration anew",
            sh(
                "mv _bmad/bmm _bmad/bmm-moved; mv _bmad _bmad-moved; mkdir -p _bmad/bmm; \
                 echo 'implementation_artifacts: forged' > _bmad/bmm/config.yaml"
                    .into(),
            ),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert_eq!(
                    fs::read_to_string(c.project.join("_bmad/bmm/config.yaml")).unwrap(),
                    "implementation_artifacts: impl\n",
                    "{r:#}"
                );
                assert!(!c.project.join("_bmad-moved").exists(), "{r:#}");
                assert!(!c.project.join("_bmad/bmm-moved").exists(), "{r:#}");
            },
        ),
        case(
            "redirect the epic through BMAD's configuration",
            sh(
                "echo 'implementation_artifacts: forged' > _bmad/bmm/config.yaml; \
                 mkdir -p _bmad/core && echo 'x: 1' > _bmad/core/config.yaml"
                    .into(),
            ),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert_eq!(
                    fs::read_to_string(c.project.join("_bmad/bmm/config.yaml")).unwrap(),
                    "implementation_artifacts: impl\n",
                    "{r:#}"
                );
                assert!(
                    !c.project.join("_bmad/core/config.yaml").exists(),
                    "a new BMAD config is removed: {r:#}"
                );
            },
        ),
        case(
            "chmod a file outside",
            json!({"command": "chmod", "args": ["777", format!("{o}/secret.txt")]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                let mode = fs::metadata(c.outside.join("secret.txt"))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_ne!(mode & 0o777, 0o777, "{r:#}")
            },
        ),
        case(
            "set-user-ID bit",
            json!({"command": "chmod", "args": ["u+s", "tool.sh"]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                let mode = fs::metadata(c.project.join("tool.sh"))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o4000, 0, "{r:#}")
            },
        ),
        // Reads of the store, secrets and devices.
        case(
            "read the store",
            json!({"command": "cat", "args": [project_json.display().to_string()]}),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| assert!(!stdout(r).contains("projectId"), "{r:#}"),
        ),
        case(
            "read the run state",
            json!({"command": "cat", "args": [state_file.display().to_string()]}),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| assert!(!stdout(r).contains("currentNodeId"), "{r:#}"),
        ),
        case(
            "list the store",
            json!({"command": "ls", "args": ["-R", store.clone()]}),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| assert!(!stdout(r).contains("runs"), "{r:#}"),
        ),
        case(
            "read an ssh key",
            json!({"command": "cat", "args": [format!("{home}/.ssh/id_rsa")]}),
            Expect::Contained(&[]),
            not_in_stdout("PRIVATE KEY"),
        ),
        case(
            "read cloud credentials",
            json!({"command": "cat", "args": [format!("{home}/.aws/credentials")]}),
            Expect::Contained(&[]),
            not_in_stdout("AKIASECRET"),
        ),
        case(
            "read /etc/shadow",
            json!({"command": "cat", "args": ["/etc/shadow"]}),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| assert!(!stdout(r).contains("root:"), "{r:#}"),
        ),
        case(
            "read the driver's environment",
            json!({"command": "cat", "args": [format!("/proc/{me}/environ")]}),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| assert!(!stdout(r).contains("PATH="), "{r:#}"),
        ),
        case(
            "read a raw disk",
            json!({"command": "head", "args": ["-c", "512", "/dev/vda"]}),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| assert!(stdout(r).is_empty(), "{r:#}"),
        ),
        // Network with the network off: listeners outside the sandbox must see nothing.
        case(
            "tcp connect (bash)",
            json!({"command": "bash", "args": ["-c", format!("exec 3<>/dev/tcp/127.0.0.1/{tcp_port} && echo connected")]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert!(
                    c.tcp.accept().is_err(),
                    "a connection reached the listener: {r:#}"
                );
                assert!(!stdout(r).contains("connected"), "{r:#}")
            },
        ),
        case(
            "tcp connect (python)",
            json!({"command": "python3", "args": ["-c", format!("import socket; socket.create_connection(('127.0.0.1', {tcp_port}), 2); print('connected')")]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert!(
                    c.tcp.accept().is_err(),
                    "a connection reached the listener: {r:#}"
                );
                assert!(!stdout(r).contains("connected"), "{r:#}")
            },
        ),
        case(
            "udp datagram",
            json!({"command": "bash", "args": ["-c", format!("echo leak > /dev/udp/127.0.0.1/{udp_port}")]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                let mut buf = [0u8; 64];
                assert!(
                    c.udp.recv_from(&mut buf).is_err(),
                    "a datagram got out: {r:#}"
                )
            },
        ),
        // Processes: bombs, runaway output, survivors, signals.
        case(
            "fork bomb (bounded)",
            marked(
                sh(
                    "b() { if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; sleep 30; }; b 5"
                        .into(),
                ),
                &nonce,
            )
            .tap_timeout(600),
            Expect::Contained(&["EXEC_TIMEOUT"]),
            |c: &Ctx, r: &Value| {
                assert_eq!(
                    r.pointer("/error/code").and_then(Value::as_str),
                    Some("EXEC_TIMEOUT"),
                    "{r:#}"
                );
                no_marked_process(c)
            },
        ),
        case(
            "a grandchild outlives its parent",
            marked(sh("sleep 60 >/dev/null 2>&1 & echo started".into()), &nonce),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert_eq!(r["exitCode"], 0, "{r:#}");
                no_marked_process(c)
            },
        ),
        case(
            "setsid escape",
            marked(
                sh("setsid sleep 60 >/dev/null 2>&1 & echo started".into()),
                &nonce,
            ),
            Expect::Contained(&[]),
            |c: &Ctx, _: &Value| no_marked_process(c),
        ),
        case(
            "double-fork daemon",
            marked(
                sh("( sleep 60 >/dev/null 2>&1 & ) ; echo forked".into()),
                &nonce,
            ),
            Expect::Contained(&[]),
            |c: &Ctx, _: &Value| no_marked_process(c),
        ),
        case(
            "timeout",
            marked(
                json!({"command": "sleep", "args": ["30"], "timeoutMs": 300}),
                &nonce,
            ),
            Expect::Contained(&["EXEC_TIMEOUT"]),
            |c: &Ctx, r: &Value| {
                assert_eq!(
                    r.pointer("/error/code").and_then(Value::as_str),
                    Some("EXEC_TIMEOUT"),
                    "{r:#}"
                );
                no_marked_process(c)
            },
        ),
        case(
            "ignores SIGTERM",
            marked(sh("trap '' TERM; sleep 30 & wait; sleep 30".into()), &nonce).tap_timeout(300),
            Expect::Contained(&["EXEC_TIMEOUT"]),
            |c: &Ctx, r: &Value| {
                assert_eq!(
                    r.pointer("/error/code").and_then(Value::as_str),
                    Some("EXEC_TIMEOUT"),
                    "{r:#}"
                );
                no_marked_process(c)
            },
        ),
        case(
            "runaway stdout",
            json!({"command": "yes"}),
            Expect::Contained(&["OUTPUT_LIMIT_EXCEEDED"]),
            |_: &Ctx, r: &Value| {
                assert_eq!(
                    r.pointer("/error/code").and_then(Value::as_str),
                    Some("OUTPUT_LIMIT_EXCEEDED"),
                    "{r:#}"
                );
                assert!(stdout(r).len() <= 4096, "the cap holds")
            },
        ),
        case(
            "runaway stderr",
            sh("yes 1>&2".into()),
            Expect::Contained(&["OUTPUT_LIMIT_EXCEEDED"]),
            |_: &Ctx, r: &Value| {
                assert_eq!(
                    r.pointer("/error/code").and_then(Value::as_str),
                    Some("OUTPUT_LIMIT_EXCEEDED"),
                    "{r:#}"
                )
            },
        ),
        case(
            "output over the cap",
            sh("head -c 200000 /dev/zero | tr '\\000' a".into()),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| {
                assert_eq!(r["stdoutTruncated"], true, "{r:#}");
                assert_eq!(stdout(r).len(), 4096);
                assert_eq!(r["stdoutBytes"], 200000)
            },
        ),
        case(
            "kill every process",
            sh("kill -9 -1; echo alive".into()),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                assert!(stdout(r).contains("alive"), "{r:#}");
                assert!(
                    Path::new(&format!("/proc/{}", c.canary.id())).exists(),
                    "the canary was killed"
                )
            },
        ),
        // The environment.
        case(
            "environment leak",
            json!({"command": "env"}),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| {
                let out = stdout(r);
                let mut names: Vec<&str> =
                    out.lines().filter_map(|l| l.split('=').next()).collect();
                names.sort();
                assert_eq!(names, vec!["HOME", "LANG", "PATH", "TMPDIR"], "{r:#}");
                assert!(!out.contains(FAKE_KEY));
                assert!(
                    out.contains("HOME=$HOME"),
                    "the temp home is not shown as a host path: {out}"
                )
            },
        ),
        // Working-directory escapes: refused before anything starts.
        case(
            "cwd ..",
            json!({"command": "pwd", "cwd": "@project/../outside"}),
            Expect::Refused("CWD_NOT_ALLOWED"),
            |_: &Ctx, _: &Value| {},
        ),
        case(
            "cwd absolute",
            json!({"command": "pwd", "cwd": "/tmp"}),
            Expect::Refused("CWD_NOT_ALLOWED"),
            |_: &Ctx, _: &Value| {},
        ),
        case(
            "cwd @pkg",
            json!({"command": "pwd", "cwd": "@pkg"}),
            Expect::Refused("CWD_NOT_ALLOWED"),
            |_: &Ctx, _: &Value| {},
        ),
        case(
            "cwd @state",
            json!({"command": "pwd", "cwd": "@state"}),
            Expect::Refused("CWD_NOT_ALLOWED"),
            |_: &Ctx, _: &Value| {},
        ),
        case(
            "cwd through a symlink",
            json!({"command": "pwd", "cwd": "@project/link_out"}),
            Expect::Refused("CWD_NOT_ALLOWED"),
            |_: &Ctx, _: &Value| {},
        ),
        case(
            "cwd missing",
            json!({"command": "pwd", "cwd": "@project/nope"}),
            Expect::Refused("CWD_NOT_ALLOWED"),
            |_: &Ctx, _: &Value| {},
        ),
        case(
            "cwd a file",
            json!({"command": "pwd", "cwd": "@project/README.md"}),
            Expect::Refused("CWD_NOT_ALLOWED"),
            |_: &Ctx, _: &Value| {},
        ),
        // No shell: metacharacters are plain text.
        case(
            "metacharacters as args",
            json!({"command": "echo", "args": ["$(touch pwned1)", "; touch pwned2", "| touch pwned3", "`touch pwned4`", "&& touch pwned5", "*", "$HOME"]}),
            Expect::Contained(&[]),
            |c: &Ctx, r: &Value| {
                for i in 1..=5 {
                    assert!(!c.project.join(format!("pwned{i}")).exists(), "{r:#}");
                }
                assert_eq!(
                    stdout(r),
                    "$(touch pwned1) ; touch pwned2 | touch pwned3 `touch pwned4` && touch pwned5 * $HOME\n"
                )
            },
        ),
        case(
            "a command line as the command",
            json!({"command": "touch pwned6"}),
            Expect::Refused("COMMAND_NOT_FOUND"),
            |c: &Ctx, _: &Value| assert!(!c.project.join("pwned6").exists()),
        ),
        case(
            "shell.exec without the policy",
            json!({"script": "touch pwned7"}),
            Expect::Refused("TOOL_NOT_AVAILABLE"),
            |c: &Ctx, _: &Value| assert!(!c.project.join("pwned7").exists()),
        ),
        case(
            "missing program",
            json!({"command": "/nonexistent/bin/x"}),
            Expect::Refused("COMMAND_NOT_FOUND"),
            |_: &Ctx, _: &Value| {},
        ),
        case(
            "program in @pkg",
            json!({"command": "@pkg/bmad.json"}),
            Expect::Refused("COMMAND_NOT_FOUND"),
            |_: &Ctx, _: &Value| {},
        ),
        case(
            "invalid env name",
            json!({"command": "env", "env": {"A=B": "x"}}),
            Expect::Refused("E_INVALID_ARGS"),
            |_: &Ctx, _: &Value| {},
        ),
        // Plain behaviour the model relies on.
        case(
            "stdin is closed",
            json!({"command": "cat"}),
            ran,
            |_: &Ctx, r: &Value| {
                assert_eq!(r["exitCode"], 0, "{r:#}");
                assert_eq!(stdout(r), "")
            },
        ),
        case(
            "no host path in output",
            json!({"command": "pwd"}),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| assert_eq!(stdout(r), "@project\n", "{r:#}"),
        ),
    ];
    // Signals to processes outside the sandbox are scoped from Landlock ABI 6; on an older
    // kernel this case would kill the test itself.
    if capabilities().landlock_abi.is_some_and(|a| a >= 6) {
        all.push(case(
            "kill the driver",
            sh(format!("kill -9 {me}; echo alive")),
            Expect::Contained(&[]),
            |_: &Ctx, r: &Value| assert!(stdout(r).contains("alive"), "{r:#}"),
        ));
    }
    all
}

trait TapTimeout {
    fn tap_timeout(self, ms: u64) -> Value;
}

impl TapTimeout for Value {
    fn tap_timeout(mut self, ms: u64) -> Value {
        self["timeoutMs"] = json!(ms);
        self
    }
}

#[test]
fn hostile_commands_are_refused_or_contained_and_audited() {
    let (mut env, ctx) = setup();
    let caps = capabilities().clone();
    let complete = sandbox_complete(&caps);
    if !complete {
        eprintln!(
            "this kernel lacks a sandbox layer ({caps:?}): cases that start a program must be refused with SANDBOX_UNAVAILABLE"
        );
    }
    let cases = cases(&ctx);
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let project_real = ctx.project.canonicalize().unwrap().display().to_string();
    let temp_root = ctx.temp_root.display().to_string();
    let started = Instant::now();
    for (i, c) in cases.iter().enumerate() {
        let tool = if c.args.get("script").is_some() {
            "shell.exec"
        } else {
            "terminal.run"
        };
        let before = env.audit().len();
        let out = env.call(tool, c.args.clone());
        let r = &out.result;
        if std::env::var_os("BATON_TEST_VERBOSE").is_some() {
            eprintln!("--- {}: {}", c.name, r);
        }
        let code = r.pointer("/error/code").and_then(Value::as_str);
        match (&c.expect, complete) {
            (Expect::Refused(want), _) => {
                assert_eq!(code, Some(*want), "case {i} {}: {r:#}", c.name)
            }
            (Expect::Contained(_), false) => {
                assert_eq!(
                    code,
                    Some("SANDBOX_UNAVAILABLE"),
                    "case {i} {}: {r:#}",
                    c.name
                )
            }
            (Expect::Contained(allowed), true) => {
                if let Some(code) = code {
                    assert!(allowed.contains(&code), "case {i} {}: {r:#}", c.name);
                } else {
                    assert_eq!(r["ok"], true, "case {i} {}: {r:#}", c.name);
                }
                (c.check)(&ctx, r);
            }
        }
        if matches!(c.expect, Expect::Refused(_)) {
            (c.check)(&ctx, r);
        }
        let text = r.to_string();
        assert!(
            !text.contains(&project_real),
            "case {i} {}: the project's host path leaked: {text}",
            c.name
        );
        assert!(
            !text.contains(&temp_root),
            "case {i} {}: the temp home's host path leaked: {text}",
            c.name
        );
        let audit = env.audit();
        assert_eq!(
            audit.len(),
            before + 1,
            "case {i} {}: one audit line",
            c.name
        );
        let line = &audit[before];
        assert_eq!(line["toolName"], tool);
        assert_eq!(line["output"]["ok"], r["ok"]);
        if let Some(s) = r.get("stdout").and_then(Value::as_str)
            && !s.is_empty()
        {
            assert!(
                line["output"]["stdout"]["sha256"].is_string(),
                "stdout is redacted in the audit line"
            );
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the suite took {:?}",
        started.elapsed()
    );
    let raw = fs::read_to_string(&env.paths.execution_log).unwrap();
    assert!(!raw.contains(FAKE_KEY));
}

#[test]
fn a_missing_layer_is_refused_unless_the_user_opts_out() {
    let (mut env, _ctx) = setup();
    let mut runtime = ToolRuntime::default();
    runtime.terminal.capabilities = Some(Capabilities::none());
    runtime.terminal.parent_env = Some(vec![("PATH".into(), PATH.into())]);
    env.host.set_runtime(runtime);
    let out = env.call("terminal.run", json!({"command": "true"}));
    assert_eq!(
        out.result["error"]["code"], "SANDBOX_UNAVAILABLE",
        "{:#}",
        out.result
    );
    assert!(
        out.result["error"]["details"]["hint"]
            .as_str()
            .unwrap()
            .contains("baton doctor")
    );
    env.policy.terminal.require_sandbox = false;
    let out = env.call("terminal.run", json!({"command": "true"}));
    assert_eq!(out.result["ok"], true, "{:#}", out.result);
    assert_eq!(out.result["exitCode"], 0);
    let layers: Vec<&str> = out.result["sandbox"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        !layers.iter().any(|l| l.starts_with("filesystem")),
        "{layers:?}"
    );
    assert_eq!(env.audit().len(), 2);
}

#[test]
fn the_policy_decides_what_runs() {
    let (mut env, _ctx) = setup();
    if !sandbox_complete(capabilities()) {
        return;
    }
    env.policy.terminal.enabled = false;
    let out = env.call("terminal.run", json!({"command": "true"}));
    assert_eq!(out.result["error"]["code"], "TOOL_NOT_AVAILABLE");
    env.policy.terminal = TerminalSettings {
        allowed_commands: Some(vec!["echo".into()]),
        env_allowlist: vec!["CI".into()],
        allow_shell_exec: true,
        ..terminal_policy()
    };
    let out = env.call("terminal.run", json!({"command": "env"}));
    assert_eq!(out.result["error"]["code"], "COMMAND_NOT_ALLOWED");
    let out = env.call(
        "terminal.run",
        json!({"command": "/bin/echo", "args": ["hi"]}),
    );
    assert_eq!(out.result["stdout"], "hi\n", "{:#}", out.result);
    let out = env.call(
        "shell.exec",
        json!({"script": "echo \"$CI $OPENAI_API_KEY\" > shell.txt; cat shell.txt"}),
    );
    assert_eq!(
        out.result["stdout"], "true \n",
        "allowlisted CI passes, the key does not: {:#}",
        out.result
    );
    assert!(env.project_root.join("shell.txt").exists());
    let out = env.call(
        "terminal.run",
        json!({"command": "echo", "args": ["a"], "timeoutMs": 999_999_999}),
    );
    assert_eq!(
        out.result["ok"], true,
        "a longer timeout is clamped, not refused"
    );
}

#[test]
fn network_on_reaches_a_loopback_listener() {
    let (mut env, ctx) = setup();
    if !sandbox_complete(capabilities()) {
        return;
    }
    env.policy.terminal.network = true;
    let port = ctx.tcp.local_addr().unwrap().port();
    ctx.tcp.set_nonblocking(false).unwrap();
    let listener = ctx.tcp.try_clone().unwrap();
    let accept = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).unwrap();
        buf
    });
    let out = env.call(
        "terminal.run",
        json!({"command": "bash", "args": ["-c", format!("echo hello > /dev/tcp/127.0.0.1/{port}")]}),
    );
    assert_eq!(out.result["exitCode"], 0, "{:#}", out.result);
    assert_eq!(accept.join().unwrap(), "hello\n");
}

#[test]
fn new_config_and_git_dirs_are_removed() {
    let (mut env, ctx) = setup();
    if !sandbox_complete(capabilities()) {
        return;
    }
    fs::remove_file(ctx.project.join("baton.toml")).unwrap();
    fs::remove_dir_all(ctx.project.join(".git")).unwrap();
    let out = env.call(
        "terminal.run",
        json!({"command": "sh", "args": ["-c", "printf '[tools.terminal]\\nnetwork = true\\n' > baton.toml; mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit"]}),
    );
    assert_eq!(out.result["exitCode"], 0, "{:#}", out.result);
    assert!(!ctx.project.join("baton.toml").exists());
    assert!(!ctx.project.join(".git").exists());
    assert_eq!(
        out.result["warnings"].as_array().unwrap().len(),
        2,
        "{:#}",
        out.result
    );
}

/// Without a `.workflow/.maestro/` yet, a command that makes one (a session of the model's own,
/// for the next `baton session continue` to pick up) has it removed.
#[test]
fn a_sessions_folder_made_by_a_command_is_removed() {
    let (mut env, ctx) = setup();
    if !sandbox_complete(capabilities()) {
        return;
    }
    fs::remove_dir_all(ctx.project.join(".workflow")).unwrap();
    let out = env.call(
        "terminal.run",
        json!({"command": "sh", "args": ["-c", "mkdir -p .workflow/.maestro/ralph-9 .workflow/plans && echo '{}' > .workflow/.maestro/ralph-9/status.json && echo plan > .workflow/plans/p.md"]}),
    );
    assert_eq!(out.result["exitCode"], 0, "{:#}", out.result);
    assert!(!ctx.project.join(".workflow/.maestro").exists());
    // The rest of .workflow/ is the model's to write.
    assert!(ctx.project.join(".workflow/plans/p.md").is_file());
    let warnings = out.result["warnings"].to_string();
    assert!(warnings.contains(".workflow/.maestro"), "{:#}", out.result);
}

#[test]
fn fs_tools_cannot_write_the_config_file() {
    let (mut env, ctx) = setup();
    for path in ["@project/baton.toml", "@project/BATON.TOML"] {
        let out = env.call(
            "fs.write",
            json!({"path": path, "content": "[tools.terminal]\nnetwork = true\n"}),
        );
        assert_eq!(
            out.result["error"]["code"], "E_SANDBOX_VIOLATION",
            "{:#}",
            out.result
        );
        assert_eq!(out.result["error"]["details"]["reason"], "config");
    }
    assert_eq!(
        fs::read_to_string(ctx.project.join("baton.toml")).unwrap(),
        "# the user's settings\n"
    );
}

#[test]
fn a_stopping_run_aborts_the_command_in_flight() {
    let (mut env, ctx) = setup();
    if !sandbox_complete(capabilities()) {
        return;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let mut runtime = ToolRuntime {
        abort: Some(Arc::new(move || flag.load(Ordering::SeqCst))),
        ..ToolRuntime::default()
    };
    runtime.terminal.parent_env = Some(vec![("PATH".into(), PATH.into())]);
    env.host.set_runtime(runtime);
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::SeqCst);
    });
    let started = Instant::now();
    let out = env.call(
        "terminal.run",
        marked(json!({"command": "sleep", "args": ["30"]}), &ctx.nonce),
    );
    setter.join().unwrap();
    assert_eq!(
        out.result["error"]["code"], "EXEC_ABORTED",
        "{:#}",
        out.result
    );
    // Aborted, not run out: well under the `sleep 30`, with room for a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    no_marked_process(&ctx);
    assert_eq!(env.audit().len(), 1);
}

/// `$HOME` is unreadable but for its toolchains: the shell's rc file and history, the
/// OpenAI CLI's folder, `.netrc`, `.docker`, `.kube` and a cloud CLI's folder leak nothing,
/// while `~/.cargo` stays readable (its credentials excepted); `home_readable = ["."]` opens
/// the rest again, secrets list excepted.
#[test]
fn the_users_home_is_unreadable_but_its_toolchains() {
    let (mut env, ctx) = setup();
    if !sandbox_complete(capabilities()) {
        return;
    }
    let h = &ctx.user_home;
    let secrets = [
        (".bashrc", "export OPENAI_API_KEY=sk-from-bashrc"),
        (
            ".bash_history",
            "curl -H 'Authorization: Bearer tok-history'",
        ),
        (".config/openai/auth.json", "sk-openai-cli"),
        (".netrc", "machine x password netrc-pass"),
        (".docker/config.json", "docker-auth-token"),
        (".kube/config", "kube-client-key"),
        (".config/doctl/config.yaml", "doctl-token"),
        (".cargo/credentials.toml", "cargo-registry-token"),
    ];
    for (rel, text) in secrets {
        fs::create_dir_all(h.join(rel).parent().unwrap()).unwrap();
        fs::write(h.join(rel), text).unwrap();
    }
    fs::create_dir_all(h.join(".cargo/bin")).unwrap();
    fs::write(h.join(".cargo/env"), "toolchain-env").unwrap();
    let script = secrets
        .iter()
        .map(|(rel, _)| format!("cat {}/{rel};", h.display()))
        .chain([format!(
            "ls -a {}; cat {}/.cargo/env",
            h.display(),
            h.display()
        )])
        .collect::<String>();
    let out = env.call("terminal.run", sh(script.clone()));
    let text = stdout(&out.result);
    assert!(text.contains("toolchain-env"), "{:#}", out.result);
    for (rel, secret) in secrets {
        assert!(!text.contains(secret), "{rel} leaked: {:#}", out.result);
    }
    assert!(!text.contains(".bashrc"), "the home is listed: {text}");

    env.policy.terminal.home_readable = vec![".".into()];
    let out = env.call("terminal.run", sh(script));
    let text = stdout(&out.result);
    assert!(text.contains("sk-from-bashrc"), "{:#}", out.result);
    for secret in [
        "netrc-pass",
        "docker-auth-token",
        "kube-client-key",
        "cargo-registry-token",
    ] {
        assert!(!text.contains(secret), "{secret} leaked: {:#}", out.result);
    }
}
