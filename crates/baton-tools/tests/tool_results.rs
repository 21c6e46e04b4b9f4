//! Tool results shaped as in the seed-000 trace, and the behaviour behind them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod common;

use common::Env;
use serde_json::{Value, json};
use std::fs;

fn ok(v: &Value) -> &Value {
    assert_eq!(v["ok"], true, "{v:#}");
    v
}

fn err(v: &Value) -> &str {
    assert_eq!(v["ok"], false, "{v:#}");
    v["error"]["code"].as_str().unwrap()
}

#[test]
fn missing_file_message_matches_the_trace() {
    let mut env = Env::new();
    let r = env
        .call(
            "fs.read",
            json!({"path": "@project/artifacts/sprint-status.yaml"}),
        )
        .result;
    assert_eq!(
        r,
        json!({"ok": false, "error": {"code": "ENOENT", "message": "File not found: @project/artifacts/sprint-status.yaml"}})
    );
}

#[test]
fn read_returns_content_bytes_and_sha256() {
    let mut env = Env::new();
    let r = env
        .call("fs.read", json!({"path": "@project/artifacts/epics.md"}))
        .result;
    let on_disk = fs::read(env.project_root.join("artifacts/epics.md")).unwrap();
    ok(&r);
    assert_eq!(r["bytes"], on_disk.len());
    assert_eq!(r["sha256"], baton_package::digest::sha256_hex(&on_disk));
    assert_eq!(r["content"], String::from_utf8(on_disk).unwrap());
    assert_eq!(r["truncated"], false);
    assert_eq!(r["path"], "@project/artifacts/epics.md");
}

#[test]
fn read_windows_and_truncation() {
    let mut env = Env::new();
    let r = env
        .call(
            "fs.read",
            json!({"path": "@project/artifacts/epics.md", "startLine": 3, "endLine": 4}),
        )
        .result;
    assert_eq!(r["content"], "## Epic 1: Accounts and access\n\n");
    assert_eq!(r["startLine"], 3);
    assert_eq!(r["endLine"], 4);
    let big = "line of text\n".repeat(100_000);
    fs::write(env.project_root.join("big.md"), &big).unwrap();
    let r = env
        .call("fs.read", json!({"path": "@project/big.md"}))
        .result;
    ok(&r);
    assert_eq!(r["truncated"], true);
    assert!(r.get("content").is_none());
    assert_eq!(r["contentPreview"].as_str().unwrap().len(), 524_288);
    assert!(r["hint"].as_str().unwrap().contains("fs.search"));
    assert_eq!(r["bytes"], big.len());
    assert_eq!(
        r["sha256"],
        baton_package::digest::sha256_hex(big.as_bytes()),
        "the hash covers the whole file"
    );
    let bad = env
        .call(
            "fs.read",
            json!({"path": "@project/big.md", "startLine": 5, "endLine": 2}),
        )
        .result;
    assert_eq!(err(&bad), "E_INVALID_ARGS");
}

#[test]
fn list_sorts_marks_dirs_and_skips_hidden() {
    let mut env = Env::new();
    fs::create_dir_all(env.project_root.join("artifacts/create-story")).unwrap();
    fs::write(env.project_root.join("artifacts/.hidden"), "x").unwrap();
    let r = env
        .call("fs.list", json!({"path": "@project/artifacts"}))
        .result;
    assert_eq!(
        r,
        json!({"ok": true, "path": "@project/artifacts", "entries": ["PRD.md", "architecture.md", "create-story/", "epics.md", "ux.md"]})
    );
    for i in 0..250 {
        fs::write(env.project_root.join(format!("artifacts/f{i:03}.md")), "x").unwrap();
    }
    let r = env
        .call("fs.list", json!({"path": "@project/artifacts"}))
        .result;
    assert_eq!(r["truncated"], true);
    assert_eq!(r["entriesPreview"].as_array().unwrap().len(), 200);
    assert_eq!(r["total"], 255);
}

#[test]
fn write_records_new_artifacts_once() {
    let mut env = Env::new();
    let content = "# Target Story\n\n- storyKey: 1-2-user-authentication\n";
    let r = env
        .call(
            "fs.write",
            json!({"path": "@project/artifacts/create-story/target.md", "content": content}),
        )
        .result;
    ok(&r);
    assert_eq!(r["bytesWritten"], content.len());
    assert_eq!(r["path"], "@project/artifacts/create-story/target.md");
    assert_eq!(r["artifactRecorded"], "artifacts/create-story/target.md");
    assert_eq!(
        fs::read_to_string(env.project_root.join("artifacts/create-story/target.md")).unwrap(),
        content
    );
    assert_eq!(
        env.state()["artifacts"],
        json!(["artifacts/create-story/target.md"])
    );
    // Overwriting does not record again; files outside artifacts/ are not recorded.
    ok(&env
        .call(
            "fs.write",
            json!({"path": "@project/artifacts/create-story/target.md", "content": "v2"}),
        )
        .result);
    ok(&env
        .call(
            "fs.write",
            json!({"path": "@project/notes.md", "content": "n"}),
        )
        .result);
    assert_eq!(
        env.state()["artifacts"],
        json!(["artifacts/create-story/target.md"])
    );
    // The model's own artifacts.append afterwards (as in the trace) adds no duplicate.
    let r = env
        .call(
            "fs.apply_patch",
            json!({"path": "@state/workflow.md", "operation": "updateFrontmatter",
        "update": {"artifacts": {"append": ["artifacts/create-story/target.md"]}}}),
        )
        .result;
    ok(&r);
    assert_eq!(
        r["stateFrontmatterAfter"]["artifacts"],
        json!(["artifacts/create-story/target.md"])
    );
}

#[test]
fn append_mode_and_if_match() {
    let mut env = Env::new();
    ok(&env
        .call(
            "fs.write",
            json!({"path": "@project/log.md", "content": "a\n"}),
        )
        .result);
    ok(&env
        .call(
            "fs.write",
            json!({"path": "@project/log.md", "content": "b\n", "mode": "append"}),
        )
        .result);
    assert_eq!(
        fs::read_to_string(env.project_root.join("log.md")).unwrap(),
        "a\nb\n"
    );
    let sha = baton_package::digest::sha256_hex(b"a\nb\n");
    ok(&env
        .call(
            "fs.write",
            json!({"path": "@project/log.md", "content": "c\n", "ifMatchSha256": sha}),
        )
        .result);
    let stale = env
        .call(
            "fs.write",
            json!({"path": "@project/log.md", "content": "d\n", "ifMatchSha256": sha}),
        )
        .result;
    assert_eq!(err(&stale), "E_PRECONDITION_FAILED");
    assert_eq!(
        fs::read_to_string(env.project_root.join("log.md")).unwrap(),
        "c\n"
    );
}

#[test]
fn failed_state_recording_rolls_the_file_back() {
    let mut env = Env::new();
    // Corrupt the state so the artifact patch cannot apply.
    fs::write(&env.paths.state_file, "not a state file").unwrap();
    let r = env
        .call(
            "fs.write",
            json!({"path": "@project/artifacts/new.md", "content": "x"}),
        )
        .result;
    assert_eq!(err(&r), "E_INVALID_FRONTMATTER");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("was not kept")
    );
    assert!(!env.project_root.join("artifacts/new.md").exists());
}

#[test]
fn state_patch_flat_and_nested_follow_the_guard() {
    let mut env = Env::new();
    let tc07 = json!({
        "path": "@state/workflow.md", "operation": "updateFrontmatter",
        "update": {
            "stepsCompleted": {"append": ["step-01-select-story"]},
            "variables": {"set": {"storyKey": "1-2-user-authentication"}},
            "currentNodeId": {"set": "step-02-discover-inputs"},
            "updatedAt": {"set": "2025-12-25T00:00:00Z"}
        }
    });
    let out = env.call("fs.apply_patch", tc07);
    assert!(out.state_changed);
    let r = out.result;
    ok(&r);
    let after = &r["stateFrontmatterAfter"];
    assert_eq!(after["currentNodeId"], "step-02-discover-inputs");
    assert_eq!(after["stepsCompleted"], json!(["step-01-select-story"]));
    assert_eq!(after["variables"]["storyKey"], "1-2-user-authentication");
    assert_eq!(
        r["changes"]["stepsCompletedAppended"],
        json!(["step-01-select-story"])
    );
    assert_ne!(r["sha256Before"], r["sha256After"]);
    // Nested form; an illegal jump is refused with allowedNext.
    let r = env.call("fs.apply_patch", json!({"path": "@state/workflow.md", "patch": {"operation": "updateFrontmatter", "update": {"currentNodeId": {"set": "end-99"}}}})).result;
    assert_eq!(err(&r), "E_INVALID_TRANSITION");
    assert_eq!(
        r["error"]["details"]["allowedNext"][0]["to"],
        "step-03-extract-context"
    );
    let r = env.call("fs.apply_patch", json!({"path": "@state/workflow.md", "patch": {"update": {"currentNodeId": {"set": "step-03-extract-context"}}}})).result;
    ok(&r);
}

#[test]
fn fs_write_cannot_bypass_the_guard() {
    let mut env = Env::new();
    let text = fs::read_to_string(&env.paths.state_file)
        .unwrap()
        .replace("currentNodeId: \"\"", "currentNodeId: end-99");
    let r = env
        .call(
            "fs.write",
            json!({"path": "@state/workflow.md", "content": text}),
        )
        .result;
    assert_eq!(err(&r), "E_INVALID_TRANSITION");
    let r = env
        .call(
            "fs.write",
            json!({"path": "@state/workflow.md", "content": "garbage"}),
        )
        .result;
    assert_eq!(err(&r), "E_INVALID_FRONTMATTER");
    let r = env.call("fs.apply_patch", json!({"path": "@state/workflow.md", "operation": "replaceText", "find": "workflowType: create-story-micro", "replace": "workflowType: \"\""})).result;
    assert_eq!(err(&r), "E_SCHEMA_VALIDATION");
}

#[test]
fn replace_text_and_unified_diff_on_project_files() {
    let mut env = Env::new();
    ok(&env
        .call(
            "fs.write",
            json!({"path": "@project/notes.md", "content": "one\ntwo\nthree\ntwo\n"}),
        )
        .result);
    let r = env.call("fs.apply_patch", json!({"path": "@project/notes.md", "operation": "replaceText", "find": "two", "replace": "2"})).result;
    assert_eq!(err(&r), "E_PATCH_FAILED", "ambiguous without count");
    ok(&env.call("fs.apply_patch", json!({"path": "@project/notes.md", "operation": "replaceText", "find": "two", "replace": "2", "count": 2})).result);
    assert_eq!(
        fs::read_to_string(env.project_root.join("notes.md")).unwrap(),
        "one\n2\nthree\n2\n"
    );
    let diff = "--- a/notes.md\n+++ b/notes.md\n@@ -1,4 +1,4 @@\n one\n-2\n+two\n three\n 2\n";
    let r = env
        .call(
            "fs.apply_patch",
            json!({"path": "@project/notes.md", "operation": "unifiedDiff", "diff": diff}),
        )
        .result;
    ok(&r);
    assert_eq!(
        fs::read_to_string(env.project_root.join("notes.md")).unwrap(),
        "one\ntwo\nthree\n2\n"
    );
    let r = env
        .call(
            "fs.apply_patch",
            json!({"path": "@project/notes.md", "diff": diff}),
        )
        .result;
    assert_eq!(err(&r), "E_PATCH_FAILED", "the same diff no longer applies");
    let r = env.call("fs.apply_patch", json!({"path": "@project/artifacts/epics.md", "operation": "updateFrontmatter", "update": {"a": {"set": 1}}})).result;
    assert_eq!(
        err(&r),
        "E_INVALID_FRONTMATTER",
        "epics.md has no frontmatter"
    );
}

#[test]
fn search_literal_regex_context_and_limits() {
    let mut env = Env::new();
    let r = env
        .call(
            "fs.search",
            json!({"path": "@project", "pattern": "Story 1.2"}),
        )
        .result;
    ok(&r);
    let m = &r["matches"][0];
    assert_eq!(m["path"], "@project/artifacts/epics.md");
    assert_eq!(m["text"], "### Story 1.2: user-authentication");
    assert_eq!(m["before"], json!([""]));
    assert_eq!(m["after"], json!([""]));
    let line = fs::read_to_string(env.project_root.join("artifacts/epics.md"))
        .unwrap()
        .lines()
        .position(|l| l.contains("Story 1.2"))
        .unwrap()
        + 1;
    assert_eq!(m["line"], line);
    let r = env.call("fs.search", json!({"path": "@project/artifacts", "pattern": "/argon2(id)?/i", "before": 0, "after": 0})).result;
    let files: Vec<&str> = r["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            "@project/artifacts/architecture.md",
            "@project/artifacts/epics.md"
        ]
    );
    let r = env
        .call(
            "fs.search",
            json!({"path": "@project", "pattern": "/Story/", "maxMatches": 3}),
        )
        .result;
    assert_eq!(r["matches"].as_array().unwrap().len(), 3);
    assert_eq!(r["truncated"], true);
    let bad = env
        .call(
            "fs.search",
            json!({"path": "@project", "pattern": "/(unclosed/"}),
        )
        .result;
    assert_eq!(err(&bad), "E_INVALID_ARGS");
}

#[test]
fn search_skips_ignored_hidden_and_node_modules_and_accepts_globs() {
    let mut env = Env::new();
    for (p, c) in [
        ("node_modules/lib/index.js", "needle"),
        (".git/config", "needle"),
        (".cache/x.md", "needle"),
        ("build/out.md", "needle"),
        ("src/main.rs", "needle"),
        ("docs/guide.md", "needle"),
        (".gitignore", "build/\n"),
    ] {
        let path = env.project_root.join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, c).unwrap();
    }
    let r = env
        .call(
            "fs.search",
            json!({"path": "@project", "pattern": "needle"}),
        )
        .result;
    let files: Vec<&str> = r["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["@project/docs/guide.md", "@project/src/main.rs"]);
    let r = env
        .call(
            "fs.search",
            json!({"query": "needle", "globs": ["@project/**/*.md"]}),
        )
        .result;
    let files: Vec<&str> = r["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["@project/docs/guide.md"]);
    assert_eq!(r["stats"]["matchesFound"], 1);
}

#[test]
fn ask_user_validates_and_returns_a_question() {
    let mut env = Env::new();
    let out = env.call(
        "ui.ask_user",
        json!({"widgetId": "w1", "type": "selection", "message": "Which story?",
        "options": [{"value": "1-2", "label": "1.2 user-authentication"}]}),
    );
    ok(&out.result);
    let q = out.question.unwrap();
    assert_eq!(
        (
            q.widget_id.as_str(),
            q.widget_type.as_str(),
            q.message.as_str()
        ),
        ("w1", "selection", "Which story?")
    );
    for bad in [
        json!({"widgetId": "w", "type": "selection", "message": "m", "options": []}),
        json!({"widgetId": "w", "type": "form", "message": "m", "schema": {"properties": {"x": {"type": "object"}}}}),
        json!({"widgetId": "w", "type": "plan_review", "message": "m"}),
        json!({"widgetId": "w", "type": "poll", "message": "m"}),
        json!({"widgetId": "w", "type": "confirmation"}),
    ] {
        let out = env.call("ui.ask_user", bad.clone());
        assert_eq!(err(&out.result), "E_INVALID_ARGS", "{bad}");
        assert!(out.question.is_none());
    }
}

#[test]
fn rewind_goes_back_with_confirmation() {
    let mut env = Env::new();
    for (step, next) in [
        ("step-01-select-story", "step-02-discover-inputs"),
        ("step-02-discover-inputs", "step-03-extract-context"),
    ] {
        ok(&env
            .call(
                "fs.apply_patch",
                json!({"path": "@state/workflow.md", "operation": "updateFrontmatter",
            "update": {"stepsCompleted": {"append": [step]}, "currentNodeId": {"set": next}}}),
            )
            .result);
    }
    let r = env
        .call(
            "workflow.rewind",
            json!({"toNodeId": "step-02-discover-inputs", "reason": "redo", "confirmed": false}),
        )
        .result;
    assert_eq!(err(&r), "E_CONFIRMATION_REQUIRED");
    let r = env
        .call(
            "workflow.rewind",
            json!({"toNodeId": "step-04-generate-story", "reason": "x", "confirmed": true}),
        )
        .result;
    assert_eq!(err(&r), "E_INVALID_TRANSITION");
    let r = env.call("workflow.rewind", json!({"toNodeId": "step-02-discover-inputs", "reason": "inputs changed", "confirmed": true})).result;
    ok(&r);
    let state = env.state();
    assert_eq!(state["currentNodeId"], "step-02-discover-inputs");
    assert_eq!(state["stepsCompleted"], json!(["step-01-select-story"]));
    assert_eq!(state["decisionLog"][0]["label"], "rewind");
}

#[test]
fn confirmation_gate_is_one_shot() {
    let mut env = Env::new();
    env.host.gate.arm(true);
    let patch = json!({"path": "@state/workflow.md", "operation": "updateFrontmatter", "update": {"variables": {"set": {"note": "x"}}}});
    let r = env.call("fs.apply_patch", patch.clone()).result;
    assert_eq!(err(&r), "STATE_CHANGE_REQUIRES_CONFIRMATION");
    env.host.gate.grant();
    ok(&env.call("fs.apply_patch", patch.clone()).result);
    let r = env.call("fs.apply_patch", patch).result;
    assert_eq!(
        err(&r),
        "STATE_CHANGE_REQUIRES_CONFIRMATION",
        "one confirmation, one change"
    );
    // Recording a new artifact is bookkeeping and passes.
    ok(&env
        .call(
            "fs.write",
            json!({"path": "@project/artifacts/extra.md", "content": "x"}),
        )
        .result);
}

#[test]
fn policy_and_argument_errors() {
    let mut env = Env::new();
    let r = env.call("shell.exec", json!({"script": "rm -rf /"})).result;
    assert_eq!(err(&r), "TOOL_NOT_AVAILABLE");
    let r = env.call_raw("fs.read", "{\"path\": ").result;
    assert_eq!(err(&r), "TOOL_ARGS_INVALID_JSON");
    let r = env.call_raw("fs.read", "[1]").result;
    assert_eq!(err(&r), "TOOL_ARGS_INVALID_JSON");
    let r = env.call("fs.read", json!({"file": "@project/x"})).result;
    assert_eq!(err(&r), "E_INVALID_ARGS");
    env.policy.fs_enabled = false;
    let r = env
        .call("fs.read", json!({"path": "@project/artifacts/epics.md"}))
        .result;
    assert_eq!(err(&r), "TOOL_NOT_AVAILABLE");
    let out = env.call(
        "ui.ask_user",
        json!({"widgetId": "w", "type": "confirmation", "message": "ok?"}),
    );
    ok(&out.result);
    let names: Vec<&str> = baton_tools::ToolHost::visible_tools(&env.policy)
        .iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["ui.ask_user", "workflow.rewind"]);
    env.policy.fs_enabled = true;
    env.policy.max_write_bytes = 10;
    let r = env
        .call(
            "fs.write",
            json!({"path": "@project/a.md", "content": "more than ten bytes"}),
        )
        .result;
    assert_eq!(err(&r), "E_WRITE_LIMIT");
    assert!(!env.project_root.join("a.md").exists());
}

#[test]
fn one_audit_line_per_call_with_content_redacted() {
    let mut env = Env::new();
    env.call(
        "fs.write",
        json!({"path": "@project/artifacts/a.md", "content": "secret content"}),
    );
    env.call("fs.read", json!({"path": "@project/artifacts/a.md"}));
    env.call("fs.read", json!({"path": "@project/../x"}));
    env.call_raw("nope", "{}");
    let lines = env.audit();
    assert_eq!(lines.len(), 4);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["kind"], "tool.exec");
        assert_eq!(l["runId"], env.run_id.as_str());
        assert_eq!(l["toolCallId"], format!("tc{:02}", i + 1));
        assert_eq!(l["agentId"], "sm");
        assert_eq!(l["nodeId"], "step-01-select-story");
        assert!(l["durationMs"].is_u64());
        assert!(l["ts"].as_str().unwrap().ends_with('Z'));
    }
    assert_eq!(
        lines[0]["input"]["content"],
        json!({"bytes": 14, "sha256": baton_package::digest::sha256_hex(b"secret content")})
    );
    assert_eq!(lines[1]["output"]["content"]["bytes"], 14);
    let raw = fs::read_to_string(&env.paths.execution_log).unwrap();
    assert!(
        !raw.contains("secret content"),
        "no file content in the audit log"
    );
    assert!(
        !raw.contains(env.tmp.path().to_str().unwrap()),
        "no host path in the audit log"
    );
    assert_eq!(lines[2]["output"]["error"]["code"], "E_SANDBOX_VIOLATION");
    assert_eq!(lines[3]["output"]["error"]["code"], "TOOL_NOT_AVAILABLE");
}

#[test]
fn truncated_search_is_deterministic_and_in_file_order() {
    let mut env = Env::new();
    for i in 0..120 {
        fs::create_dir_all(env.project_root.join("many")).unwrap();
        fs::write(
            env.project_root.join(format!("many/f{i:03}.txt")),
            "hit a\nmiss\nhit b\nhit c\n",
        )
        .unwrap();
    }
    let first = env.call("fs.search", json!({"path": "@project/many", "pattern": "hit", "maxMatches": 50, "before": 0, "after": 0})).result;
    let paths: Vec<String> = first["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}:{}", m["path"].as_str().unwrap(), m["line"]))
        .collect();
    assert_eq!(paths.len(), 50);
    assert_eq!(first["truncated"], true);
    assert_eq!(paths[0], "@project/many/f000.txt:1");
    assert_eq!(
        paths[49], "@project/many/f016.txt:3",
        "the first 50 matches in path order"
    );
    for _ in 0..20 {
        let again = env.call("fs.search", json!({"path": "@project/many", "pattern": "hit", "maxMatches": 50, "before": 0, "after": 0})).result;
        assert_eq!(again["matches"], first["matches"]);
    }
}
