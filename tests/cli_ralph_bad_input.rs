//! Bad input never crashes `baton ralph` and never writes: corrupt or half-written JSON,
//! `steps` not an array, missing fields, unknown status values, absurd indexes, session ids
//! that are paths, a command file that names an endless file. Each is a clear error with a
//! code, exit 1 or 2, and the session directory is left byte for byte as it was.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::ralph_support;

use ralph_support::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

const ID: &str = "ralph-20260524-101500";

/// Every file of a directory with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_file() {
                out.insert(
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                );
            }
        }
    }
    out
}

/// Every verb that reads or changes a session.
fn every_verb() -> Vec<Vec<&'static str>> {
    vec![
        vec!["check"],
        vec!["session"],
        vec!["status"],
        vec!["next"],
        vec!["complete", "0", "--status", "DONE"],
        vec!["retry", "0"],
        vec!["skip", "0"],
        vec!["pause"],
        vec!["resume"],
        vec!["abandon"],
        vec!["release", "--force"],
        vec!["insert", "--after", "0", "--template", "post-verify"],
        vec!["decide", "0", "--verdict", "proceed", "--confidence", "90"],
    ]
}

/// Runs every verb against the session and checks: exit 1, E010 named with its location,
/// nothing written (lock file aside, which a mutating verb creates empty). A file that parses
/// is still shown by `session` (exit 0, the problem listed), as maestro shows it.
fn refused_everywhere(fx: &Fx, located: &str) {
    let before = snapshot(&fx.dir(ID));
    let parses =
        serde_json::from_slice::<serde_json::Value>(&fx.raw(ID)).is_ok_and(|v| v.is_object());
    for args in every_verb() {
        let out = fx.ralph(&args);
        let shown = parses && args == ["session"];
        assert_eq!(
            out.code,
            if shown { 0 } else { 1 },
            "{args:?}\nstdout: {}\nstderr: {}",
            out.stdout,
            out.stderr
        );
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(text.contains("E010"), "{args:?}: {text}");
        assert!(
            text.contains(located),
            "{args:?} should say {located:?}: {text}"
        );
        assert!(!text.contains("panicked"), "{text}");
        let mut after = snapshot(&fx.dir(ID));
        after.remove("status.json.lock");
        assert_eq!(after, before, "{args:?} wrote something");
    }
    // --json: a structured error with the code.
    let out = fx.ralph(&["next", "--json"]);
    assert_eq!(out.code, 1);
    let v = out.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "E010");
}

#[test]
fn corrupt_and_half_written_json() {
    let fx = Fx::new();
    let full = stringify(&simple(&fx, ID));
    fx.put_raw(ID, &full.as_bytes()[..full.len() / 2]);
    refused_everywhere(&fx, "not valid JSON");
    let out = fx.ralph(&["next"]);
    assert!(
        out.stderr.starts_with(&format!("[ralph next] E010: {ID}: status.json is damaged: at $: not valid JSON: EOF while parsing")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("(line "), "{}", out.stderr);
    fx.put_raw(ID, b"");
    refused_everywhere(&fx, "the file is empty");
    fx.put_raw(ID, b"[1, 2]");
    refused_everywhere(&fx, "status.json must hold a JSON object, found an array");
    fx.put_raw(
        ID,
        b"{\"session_id\": \"x\", \"status\": \"running\", \"steps\": [] } trailing",
    );
    refused_everywhere(&fx, "not valid JSON: trailing characters");
}

#[test]
fn steps_not_an_array_and_missing_fields() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    set(&mut doc, "steps", json!("plan, execute"));
    fx.put(ID, &doc);
    refused_everywhere(&fx, "session.steps is not an array");

    let mut doc = simple(&fx, ID);
    doc.as_object_mut().unwrap().remove("status");
    fx.put(ID, &doc);
    // Without --session the session is not known to be active; name it.
    let out = fx.ralph(&["next", "--session", ID]);
    out.code(1);
    assert!(
        out.stderr
            .contains("at status: session is missing required field: status"),
        "{}",
        out.stderr
    );

    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 1).remove("index");
    step_mut(&mut doc, 2).remove("stage");
    fx.put(ID, &doc);
    refused_everywhere(&fx, "step is missing required field: index");
    let out = fx.ralph(&["next"]);
    assert!(
        out.stderr
            .contains("E010 at steps[1].index: step is missing required field: index"),
        "{}",
        out.stderr
    );
    let out = fx.ralph(&["check", "--json"]);
    out.code(1);
    let findings = out.json()["findings"].clone();
    assert!(
        findings.as_array().unwrap().iter().any(
            |f| f["step_index"] == 2 && f["message"] == "step is missing required field: stage"
        )
    );
}

#[test]
fn unknown_status_values_and_wrong_types() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 2).insert("status".into(), json!("done"));
    fx.put(ID, &doc);
    refused_everywhere(
        &fx,
        "step.status must be one of pending|running|completed|skipped|failed, found \"done\"",
    );
    assert!(fx.ralph(&["next"]).stderr.contains("at steps[2].status: "));

    let mut doc = simple(&fx, ID);
    set(&mut doc, "status", json!("sleeping"));
    fx.put(ID, &doc);
    let out = fx.ralph(&["next", "--session", ID]);
    out.code(1);
    assert!(out.stderr.contains("at status: session.status must be one of running|paused|completed|failed, found \"sleeping\""));

    for (field, value, located) in [
        // (-1 is not damage but a pointer out of range, E008: cli_ralph_slips.)
        (
            "active_step_index",
            json!("0"),
            "session.active_step_index must be null or an integer, found \"0\"",
        ),
        (
            "revision",
            json!(1.5),
            "session.revision must be a non-negative integer, found 1.5",
        ),
    ] {
        let mut doc = simple(&fx, ID);
        set(&mut doc, field, value);
        fx.put(ID, &doc);
        refused_everywhere(&fx, located);
    }
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 0).insert("completion_evidence".into(), json!({"path": "x"}));
    step_mut(&mut doc, 1).insert("retry_count".into(), json!("two"));
    fx.put(ID, &doc);
    refused_everywhere(
        &fx,
        "step.completion_evidence must be null, a string or an array of strings, found an object",
    );
}

#[test]
fn absurd_indexes() {
    let fx = Fx::new();
    fx.put(ID, &simple(&fx, ID));
    let before = snapshot(&fx.dir(ID));
    let huge = "184467440737095516159999";
    for (args, code) in [
        (vec!["complete", huge, "--status", "DONE"], 1),
        (vec!["complete", "3", "--status", "DONE"], 1),
        (vec!["complete", "-0", "--status", "DONE"], 1),
        (vec!["complete", "1e3", "--status", "DONE"], 2),
        (vec!["complete", " 1", "--status", "DONE"], 2),
        (vec!["retry", huge], 1),
        (vec!["skip", huge], 1),
        (vec!["skip", "0x1"], 2),
        (
            vec!["insert", "--after", huge, "--template", "post-verify"],
            1,
        ),
        (
            vec!["insert", "--after", "-5", "--template", "post-verify"],
            2,
        ),
        (
            vec!["decide", huge, "--verdict", "fix", "--confidence", "9"],
            1,
        ),
        (
            vec!["decide", "", "--verdict", "fix", "--confidence", "9"],
            2,
        ),
    ] {
        let out = fx.ralph(&args);
        assert_eq!(out.code, code, "{args:?}: {}", out.stderr);
        let expected = if args[1] == "-0" {
            // maestro's parser reads `-0` as an option it does not know: exit 1.
            "OPTION_UNKNOWN"
        } else if code == 1 {
            "INDEX_OUT_OF_RANGE"
        } else {
            "INDEX_INVALID"
        };
        assert!(out.stderr.contains(expected), "{args:?}: {}", out.stderr);
        let mut after = snapshot(&fx.dir(ID));
        after.remove("status.json.lock");
        let mut b = before.clone();
        b.remove("status.json.lock");
        assert_eq!(after, b, "{args:?} wrote something");
    }
}

#[test]
fn session_ids_that_are_paths_for_every_verb() {
    let fx = Fx::new();
    fx.put(ID, &simple(&fx, ID));
    let outside = fx.project.join(".workflow/x");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("status.json"), stringify(&simple(&fx, "x"))).unwrap();
    let before = snapshot(&outside);
    for bad in ["../x", "../../.workflow/x", "/tmp", "a/../b", "..", "."] {
        for mut args in every_verb() {
            args.extend(["--session", bad]);
            let out = fx.ralph(&args);
            assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
            assert!(
                out.stderr.contains("SESSION_ID_INVALID"),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
    assert_eq!(snapshot(&outside), before);
    assert!(!outside.join("status.json.lock").exists());
}

#[test]
fn discovery_passes_over_a_damaged_newer_session_and_leaves_it_alone() {
    let fx = Fx::new();
    let older = "ralph-20260101-000000";
    fx.put(older, &simple(&fx, older));
    set_mtime(&fx.dir(older), 100);
    let mut half = stringify(&simple(&fx, ID)).into_bytes();
    half.truncate(200);
    fx.put_raw(ID, &half);
    let out = fx.ralph(&["next", "--json"]);
    out.code(0);
    assert_eq!(out.json()["session_id"], older);
    assert!(
        out.stderr.starts_with(&format!(
            "[ralph next] warning: skipped session {ID}: its status.json is damaged (at $: not valid JSON"
        )),
        "{}",
        out.stderr
    );
    assert_eq!(fx.raw(ID), half, "the damaged session was not touched");
    // Named, it is refused with its problems.
    let out = fx.ralph(&["next", "--session", ID]);
    out.code(1);
    assert!(
        out.stderr
            .starts_with(&format!("[ralph next] E010: {ID}: status.json is damaged")),
        "{}",
        out.stderr
    );
}

#[test]
fn a_command_file_naming_an_endless_or_huge_file_is_refused() {
    let fx = Fx::new();
    let big = fx.project.join("big.md");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(5 * 1024 * 1024).unwrap();
    let cmd = fx.file(
        ".claude/commands/greedy.md",
        "---\nname: greedy\n---\n<required_reading>\n@/dev/zero\n@../../big.md\n@../../\n</required_reading>\n",
    );
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 0).insert("skill".into(), json!("greedy"));
    step_mut(&mut doc, 0).insert("command_path".into(), json!(cmd.display().to_string()));
    fx.put(ID, &doc);
    let before = fx.raw(ID);
    let out = fx.ralph(&["next"]);
    out.code(1);
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(
        lines[0].starts_with("[ralph next] E007: required_reading file(s) missing for "),
        "{}",
        out.stderr
    );
    assert!(
        lines[1].starts_with("  - /dev/zero (/dev/zero is not a regular file)"),
        "{}",
        out.stderr
    );
    assert!(
        lines[2].contains("big.md is 5242880 bytes, over the 4194304-byte limit"),
        "{}",
        out.stderr
    );
    assert!(lines[3].contains("is not a regular file"), "{}", out.stderr);
    assert_eq!(fx.raw(ID), before);
}

#[test]
fn a_status_json_that_is_not_a_file_or_is_too_large() {
    let fx = Fx::new();
    std::fs::create_dir_all(fx.dir(ID).join("status.json")).unwrap();
    let out = fx.ralph(&["check", "--session", ID]);
    // A directory named status.json is no session at all.
    out.code(1);
    assert!(out.stderr.contains("SESSION_NOT_FOUND"), "{}", out.stderr);
    std::fs::remove_dir(fx.dir(ID).join("status.json")).unwrap();
    let f = std::fs::File::create(fx.dir(ID).join("status.json")).unwrap();
    f.set_len(65 * 1024 * 1024).unwrap();
    let out = fx.ralph(&["next"]);
    out.code(1);
    assert!(
        out.stderr.contains("over the 67108864-byte limit"),
        "{}",
        out.stderr
    );
    let meta = std::fs::metadata(fx.dir(ID).join("status.json")).unwrap();
    assert_eq!(meta.len(), 65 * 1024 * 1024);
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

/// `ralph args` must end: a verb that blocks on a FIFO is killed after a minute and fails.
fn ends(fx: &Fx, args: &[&str]) -> Out {
    let child = fx
        .cmd(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(out) => {
            let out = out.unwrap();
            Out {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        }
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            panic!("ralph {args:?} hangs");
        }
    }
}

/// What a step's model can make with `terminal.run` (a FIFO, a link) where ralph reads never
/// hangs it or sends its writes out of the project.
#[test]
fn fifos_links_and_an_exhausted_revision_are_refused_not_followed() {
    // A FIFO as the step's command file.
    let fx = Fx::new();
    fx.put(ID, &simple(&fx, ID));
    mkfifo(Path::new(&fx.command_path("maestro-plan")));
    let before = fx.raw(ID);
    let out = ends(&fx, &["check"]);
    assert!(
        out.stdout.contains("not a regular file") || out.stderr.contains("not a regular file"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    let out = ends(&fx, &["next"]);
    assert_ne!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(fx.raw(ID), before);

    // A FIFO named by required_reading.
    let fx = Fx::new();
    let fifo = fx.project.join("pipe.md");
    mkfifo(&fifo);
    let cmd = fx.file(
        ".claude/commands/piped.md",
        "---\nname: piped\n---\n<required_reading>\n@../../pipe.md\n</required_reading>\n",
    );
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 0).insert("skill".into(), json!("piped"));
    step_mut(&mut doc, 0).insert("command_path".into(), json!(cmd.display().to_string()));
    fx.put(ID, &doc);
    let before = fx.raw(ID);
    let out = ends(&fx, &["next"]);
    out.code(1);
    assert!(out.stderr.contains("E007"), "{}", out.stderr);
    assert!(out.stderr.contains("not a regular file"), "{}", out.stderr);
    assert_eq!(fx.raw(ID), before);
    ends(&fx, &["check"]);

    // The session lock as a link to outside the project: never created or truncated there.
    let fx = Fx::new();
    fx.put(ID, &simple(&fx, ID));
    let outside = fx.tmp.path().join("outside.lock");
    std::os::unix::fs::symlink(&outside, fx.dir(ID).join("status.json.lock")).unwrap();
    let before = fx.raw(ID);
    let out = ends(&fx, &["next"]);
    assert_ne!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("PATH_OUTSIDE_PROJECT"),
        "{}",
        out.stderr
    );
    assert!(!outside.exists(), "the lock was created through the link");
    assert_eq!(fx.raw(ID), before);
    // The same lock as a FIFO.
    std::fs::remove_file(fx.dir(ID).join("status.json.lock")).unwrap();
    mkfifo(&fx.dir(ID).join("status.json.lock"));
    let out = ends(&fx, &["next"]);
    assert!(out.stderr.contains("FILE_NOT_REGULAR"), "{}", out.stderr);

    // `revision` at its largest: refused, never wrapped to 0.
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    set(&mut doc, "revision", json!(u64::MAX));
    fx.put(ID, &doc);
    let before = fx.raw(ID);
    let out = ends(&fx, &["next"]);
    assert_ne!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("REVISION_OVERFLOW"), "{}", out.stderr);
    assert_eq!(fx.raw(ID), before);
}
