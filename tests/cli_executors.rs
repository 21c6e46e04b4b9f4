//! `baton executors list|check` and the executors of `baton doctor`, through the real binary:
//! the installed CLIs with their versions; a one-file task run by the real Claude Code through
//! baton's gateway against a strict played Anthropic API holding the operator's key (the check
//! passes only when the CLI wrote the file with its own tool); a missing key or an unknown
//! name refused with a code and a hint. Skipped, saying so, when the CLI is missing (fails with
//! `BATON_REQUIRE_EXECUTORS=1`, as CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_executor::ExecutorKind;
use baton_executor::testing::require_or_skip;
use baton_llm::testing::anthropic::{AnthropicServer, message};
use common::{Baton, claude_origin};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const KEY: &str = "sk-ant-operator-key-for-the-check";
const KEY_VAR: &str = "BATON_TEST_CHECK_KEY";

fn baton(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .env("BATON_HOME", home)
        .env_remove(KEY_VAR)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn project(cli: &Path, upstream: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "[executors.claude-code]\ncommand = {cli:?}\nupstream = {upstream:?}\napi_key_env = \"{KEY_VAR}\"\nmodel = \"claude-sonnet-4-5\"\n"
        ),
    )
    .unwrap();
    dir
}

#[test]
fn the_check_runs_a_one_file_task_through_the_gateway_and_doctor_lists_the_cli() {
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    let home = Baton::new();
    let answers = vec![
        message(
            None,
            "",
            &[(
                "toolu_check".into(),
                "Bash".into(),
                json!({"command": "echo ok > baton-check.txt", "description": "the check"}),
            )],
        ),
        message(None, "Wrote baton-check.txt.", &[]),
    ];
    let upstream = AnthropicServer::start(answers).unwrap();
    let url = claude_origin(&upstream);
    let p = project(&cli, &url);
    let dir = p.path().to_str().unwrap();

    let (code, out, err) = baton(
        home.home.path(),
        &["executors", "check", "claude-code", "-p", dir, "--json"],
        &[(KEY_VAR, KEY)],
    );
    assert_eq!(code, 0, "{out}{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(report["exchanges"], 2, "{report}");
    assert_eq!(report["toolCalls"], 1, "{report}");
    assert!(
        report["version"].as_str().unwrap().contains("Claude Code"),
        "{report}"
    );
    assert!(!out.contains(KEY), "the key is never shown");
    let exchanges = upstream.exchanges();
    assert_eq!(exchanges.len(), 2);
    assert!(exchanges.iter().all(|e| e.header("x-api-key") == Some(KEY)));

    // A CLI that writes nothing fails the check, saying so.
    let idle = AnthropicServer::start(vec![message(None, "Done.", &[])]).unwrap();
    let q = project(&cli, &claude_origin(&idle));
    let (code, out, _) = baton(
        home.home.path(),
        &[
            "executors",
            "check",
            "claude-code",
            "-p",
            q.path().to_str().unwrap(),
            "--json",
        ],
        &[(KEY_VAR, KEY)],
    );
    assert_eq!(code, 1, "{out}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["passed"], false);
    assert!(
        report["problem"]
            .as_str()
            .unwrap()
            .contains("baton-check.txt"),
        "{report}"
    );

    // No key: refused before anything starts, with the variable named.
    let (code, out, _) = baton(
        home.home.path(),
        &["executors", "check", "claude-code", "-p", dir, "--json"],
        &[],
    );
    assert_ne!(code, 0);
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(e["error"]["code"], "EXECUTOR_KEY_MISSING", "{e}");
    assert!(
        e["error"]["hint"].as_str().unwrap().contains(KEY_VAR),
        "{e}"
    );

    // Unknown names are refused.
    let (code, out, _) = baton(
        home.home.path(),
        &["executors", "check", "cursor", "-p", dir, "--json"],
        &[],
    );
    assert_eq!(code, 2, "{out}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["error"]["code"],
        "EXECUTOR_UNKNOWN"
    );

    // `executors list` and `doctor` show the CLI with its version and the settings.
    let (code, out, err) = baton(
        home.home.path(),
        &["executors", "list", "-p", dir, "--json"],
        &[(KEY_VAR, KEY)],
    );
    assert_eq!(code, 0, "{err}");
    let list: Value = serde_json::from_str(&out).unwrap();
    let claude = list["executors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "claude-code")
        .unwrap()
        .clone();
    assert!(
        claude["version"].as_str().unwrap().contains("Claude Code"),
        "{claude}"
    );
    assert_eq!(claude["keySet"], true);
    assert_eq!(claude["upstream"], url);
    let (_, out, _) = baton(home.home.path(), &["doctor", "-p", dir, "--json"], &[]);
    let doctor: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = doctor["executors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["claude-code", "codex", "opencode"]);
    assert_eq!(doctor["executors"][0]["keySet"], false);
}

/// From inside the CLI's own shell tool: the operator's home is unreadable, nothing outside the
/// task's folder is writable, and no address but the gateway answers (not the host's loopback,
/// not the internet).
#[test]
fn the_cli_cannot_read_the_operators_home_write_outside_or_reach_the_network() {
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    if common::no_private_network() {
        return;
    }
    let store = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("operator-home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "OPERATOR-SECRET-KEY-MATERIAL").unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host.local_addr().unwrap().port();
    let script = format!(
        "cat {secret} 2>&1; echo x > {out}/escape.txt 2>&1; \
         (echo > /dev/tcp/1.1.1.1/80) 2>/dev/null && echo NET-OUT; \
         (echo > /dev/tcp/127.0.0.1/{host_port}) 2>/dev/null && echo NET-HOST; \
         echo ok > baton-check.txt; echo probed",
        secret = home.join(".ssh/id_ed25519").display(),
        out = outside.display()
    );
    let answers = vec![
        message(
            None,
            "",
            &[(
                "toolu_probe".into(),
                "Bash".into(),
                json!({"command": script, "description": "probe"}),
            )],
        ),
        message(None, "Probed.", &[]),
    ];
    let upstream = AnthropicServer::start(answers).unwrap();
    let p = project(&cli, &claude_origin(&upstream));
    let (code, out, err) = baton(
        store.home.path(),
        &[
            "executors",
            "check",
            "claude-code",
            "-p",
            p.path().to_str().unwrap(),
            "--json",
        ],
        &[(KEY_VAR, KEY), ("HOME", home.to_str().unwrap())],
    );
    assert_eq!(code, 0, "{out}{err}");
    let exchanges = upstream.exchanges();
    assert_eq!(exchanges.len(), 2, "{exchanges:#?}");
    // The probe's output came back to the model in the second request, as the tool's result.
    let seen = exchanges[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == "tool_result" && c["tool_use_id"] == "toolu_probe")
        .map(|c| c["content"].to_string())
        .expect("the probe's result");
    assert!(seen.contains("probed"), "{seen}");
    assert!(
        !seen.contains("OPERATOR-SECRET-KEY-MATERIAL"),
        "the home was read: {seen}"
    );
    assert!(
        !seen.contains("NET-OUT"),
        "the internet was reachable: {seen}"
    );
    assert!(
        !seen.contains("NET-HOST"),
        "the host's loopback was reachable: {seen}"
    );
    assert!(
        !outside.join("escape.txt").exists(),
        "a file was written outside"
    );
    host.set_nonblocking(true).unwrap();
    assert!(
        host.accept().is_err(),
        "something connected to the host's listener"
    );
}
