//! A loopback OpenAI-compatible server that plays the model of a lifecycle session on the
//! `csvsum` sample (`examples/projects/csvsum/`), the way the bundled skills ask: each step's
//! work written with `fs.write`, the tests run with `terminal.run` when it is offered, the step
//! ended with `session.complete` citing its evidence, and every quality gate judged from the
//! result files in its prompt.
//!
//! The story it plays: phase 1 adds `--header`; the first execute forgets that a file holding
//! only a header must print `0`, verify finds it (the tests fail), the post-verify gate says
//! `fix`, debug finds the cause, the second plan and execute fix it, verify passes, the gate
//! proceeds, review passes and the milestone completes.
//!
//! It keeps no memory between requests: each answer is computed from the request and the
//! project's files (execute writes the fixed tool once a `debug.md` exists), so a killed and
//! continued session gets the same answers as one that ran straight through; a turn whose
//! calls a kill interrupted is played again.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_testkit::json_server::JsonServer;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

struct Shared {
    project: PathBuf,
    /// What each request was (`step:<skill>`, `gate:<gate>`, `other`), in order.
    served: Mutex<Vec<String>>,
    next_id: AtomicU64,
}

/// The played model; its server stops when it is dropped.
pub struct SessionPlayer {
    server: JsonServer,
    shared: Arc<Shared>,
}

impl SessionPlayer {
    pub fn start(project: &Path) -> SessionPlayer {
        let shared = Arc::new(Shared {
            project: project.to_path_buf(),
            served: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        });
        let s = shared.clone();
        let server = JsonServer::start(Arc::new(move |body: &Value| play(&s, body)));
        SessionPlayer { server, shared }
    }

    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    pub fn served(&self) -> Vec<String> {
        self.shared.served.lock().unwrap().clone()
    }
}

fn text_reply(content: &str) -> Value {
    json!({
        "id": "chatcmpl-session-player", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 30, "total_tokens": 70}
    })
}

fn calls_reply(shared: &Shared, calls: Vec<(&str, Value)>) -> Value {
    let calls: Vec<Value> = calls
        .into_iter()
        .map(|(name, args)| {
            let id = format!("call_{}", shared.next_id.fetch_add(1, Ordering::SeqCst));
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    json!({
        "id": "chatcmpl-session-player", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 60, "completion_tokens": 40, "total_tokens": 100}
    })
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

fn play(shared: &Shared, body: &Value) -> Value {
    let messages: Vec<Value> = body["messages"].as_array().cloned().unwrap_or_default();
    let system = messages
        .iter()
        .filter(|m| m["role"] == "system")
        .map(content)
        .collect::<Vec<_>>()
        .join("\n");
    let first_user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(content)
        .unwrap_or("");
    if system.contains("You decompose a software change") {
        shared.served.lock().unwrap().push("decompose".into());
        return text_reply(&pretty(&decomposition()));
    }
    if system.contains("---VERDICT---") {
        let gate = first_user
            .lines()
            .find_map(|l| l.strip_prefix("Gate: "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or("")
            .to_string();
        shared.served.lock().unwrap().push(format!("gate:{gate}"));
        return text_reply(&judge(&gate, first_user, &system));
    }
    if let Some((skill, args)) = step_of(first_user) {
        shared.served.lock().unwrap().push(format!("step:{skill}"));
        let tools: Vec<String> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        let turn = turns_done(&messages);
        let step = Step {
            project: &shared.project,
            skill: &skill,
            phase: phase_of(&shared.project, &skill, &args),
            gaps: args.contains("--gaps"),
            terminal: tools.iter().any(|t| t == "terminal_run"),
            messages: &messages,
        };
        return match step.turn(turn) {
            Some(calls) => calls_reply(shared, calls),
            None => text_reply("The step is finished."),
        };
    }
    shared.served.lock().unwrap().push("other".into());
    text_reply("I can only play the steps and gates of a lifecycle session.")
}

/// The assistant turns of a step whose calls all ran. A turn the run was stopped in (a kill:
/// its unfinished calls are answered `E_INTERRUPTED` on resume) is done again, as the result
/// asks a model to.
pub fn turns_done(messages: &[Value]) -> usize {
    let interrupted = |m: &Value| {
        m["tool_calls"].as_array().into_iter().flatten().any(|c| {
            messages.iter().any(|r| {
                r["role"] == "tool"
                    && r["tool_call_id"] == c["id"]
                    && content(r).contains("E_INTERRUPTED")
            })
        })
    };
    messages
        .iter()
        .filter(|m| m["role"] == "assistant" && !interrupted(m))
        .count()
}

/// The session's boundary contract and its one sub-goal.
fn decomposition() -> Value {
    json!({
        "boundary_contract": {
            "in_scope": ["a --header flag of csvsum.sh", "test cases for it in test.sh"],
            "out_of_scope": ["quoted fields and other CSV dialects"],
            "constraints": ["POSIX sh and awk only"],
            "definition_of_done": "sh test.sh passes, with cases for --header"
        },
        "execution_criteria": [
            "without --header the output does not change",
            "a failing check is fixed, not hidden"
        ],
        "task_decomposition": [{
            "id": "G1",
            "goal": "csvsum.sh --header COLUMN skips the first line of the input",
            "boundary": "csvsum.sh and test.sh only",
            "done_when": "verification.json says passed with both --header cases run",
            "evidence": "verification.json",
            "lifecycle": ["verify"],
            "status": "pending"
        }]
    })
}

/// `(skill, args)` from the comment `ralph next` puts at the end of a step's prompt.
fn step_of(prompt: &str) -> Option<(String, String)> {
    let line = prompt
        .lines()
        .find(|l| l.contains(": step [") && l.contains("skill="))?;
    let after = &line[line.find("skill=")? + 6..];
    let skill = after.split_whitespace().next()?.to_string();
    let args = after
        .find("args=")
        .and_then(|i| {
            let rest = &after[i + 5..];
            let mut de = serde_json::Deserializer::from_str(rest).into_iter::<String>();
            de.next()?.ok()
        })
        .unwrap_or_default();
    Some((skill, args))
}

/// The phase an args string names (a bare number), else the first phase of the current
/// milestone. A debug step's args are a gap summary, never a phase.
fn phase_of(project: &Path, skill: &str, args: &str) -> String {
    if skill != "quality-debug"
        && let Some(n) = args
            .split_whitespace()
            .find(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
    {
        return n.to_string();
    }
    let state: Value = std::fs::read(project.join(".workflow/state.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let current = state["current_milestone"].as_str().unwrap_or("M1");
    state["milestones"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["id"] == current)
        .and_then(|m| m["phases"].get(0))
        .map(|p| p.to_string().trim_matches('"').to_string())
        .unwrap_or_else(|| "1".into())
}

/// The body of the `## <name> (...)` section of a gate prompt, if the file was found.
fn section<'a>(prompt: &'a str, name: &str) -> Option<&'a str> {
    let start = prompt.find(&format!("## {name} ("))?;
    let rest = &prompt[start..];
    let body = &rest[rest.find('\n')? + 1..];
    Some(body.find("\n## ").map_or(body, |end| &body[..end]))
}

fn verdict(status: &str, reason: &str, gaps: &str, score: u8, weakest: &str) -> String {
    format!(
        "---VERDICT---\nSTATUS: {status}\nREASON: {reason}\nGAP_SUMMARY: {gaps}\n\
         CONFIDENCE: high\nCONFIDENCE_SCORE: {score}\nWEAKEST_DIMENSION: {weakest}\n---END---"
    )
}

fn judge(gate: &str, prompt: &str, system: &str) -> String {
    if system.contains("all_met") {
        return "---VERDICT---\nSTATUS: all_met\nREASON: every sub-goal has its evidence\n\
                UNMET: []\nCONFIDENCE_SCORE: 90\n---END---"
            .into();
    }
    let file = match gate {
        "post-verify" => "verification.json",
        "post-review" => "review.json",
        "post-test" => "test-results.json",
        "post-business-test" => "report.json",
        _ => "",
    };
    let Some(doc) = section(prompt, file).and_then(|b| serde_json::from_str::<Value>(b).ok())
    else {
        return verdict(
            "fix",
            &format!("{file} is missing"),
            &format!("no {file}"),
            80,
            "evidence",
        );
    };
    let gaps: Vec<String> = doc["gaps"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(doc["failures"].as_array().into_iter().flatten())
        .filter_map(|g| g.as_str().map(str::to_owned))
        .collect();
    let ok = match gate {
        "post-verify" => doc["status"] == "passed" && gaps.is_empty(),
        "post-review" => doc["verdict"] != "BLOCK",
        _ => doc["failed"].as_u64() == Some(0),
    };
    if ok {
        verdict(
            "proceed",
            &format!("{file} shows every check met"),
            "none",
            92,
            "tests",
        )
    } else {
        verdict(
            "fix",
            &format!("{file} reports unmet checks"),
            &gaps.join("; "),
            85,
            "correctness",
        )
    }
}

struct Step<'a> {
    project: &'a Path,
    skill: &'a str,
    phase: String,
    gaps: bool,
    terminal: bool,
    messages: &'a [Value],
}

const TOOL_V1: &str = r#"#!/bin/sh
# csvsum: print the sum of one column of a CSV read from stdin.
# usage: sh csvsum.sh [--header] COLUMN < file.csv   (COLUMN counts from 1)
skip=0
if [ "$1" = "--header" ]; then skip=1; shift; fi
col="$1"
case "$col" in
  ''|*[!0-9]*) echo "usage: csvsum.sh [--header] COLUMN < file.csv" >&2; exit 2 ;;
esac
awk -F, -v col="$col" -v skip="$skip" 'NR == 1 && skip { next } { s += $col } END { print s }'
"#;

const TOOL_V2: &str = r#"#!/bin/sh
# csvsum: print the sum of one column of a CSV read from stdin.
# usage: sh csvsum.sh [--header] COLUMN < file.csv   (COLUMN counts from 1)
skip=0
if [ "$1" = "--header" ]; then skip=1; shift; fi
col="$1"
case "$col" in
  ''|*[!0-9]*) echo "usage: csvsum.sh [--header] COLUMN < file.csv" >&2; exit 2 ;;
esac
# s + 0: no rows (empty input, or a header only) still prints a number.
awk -F, -v col="$col" -v skip="$skip" 'NR == 1 && skip { next } { s += $col } END { print s + 0 }'
"#;

const TESTS: &str = r#"#!/bin/sh
# The tests of csvsum: `sh test.sh` prints one line per case and exits 1 if any fails.
here=$(dirname "$0")
failed=0
check() {
  name="$1"; want="$2"; input="$3"; shift 3
  got=$(printf "$input" | sh "$here/csvsum.sh" "$@" 2>&1)
  if [ "$got" = "$want" ]; then
    echo "ok   $name"
  else
    echo "FAIL $name: want '$want', got '$got'"
    failed=1
  fi
}
check "sums a column" 6 '1,a\n2,b\n3,c\n' 1
check "second column" 9 'x,4\ny,5\n' 2
check "--header skips the first line" 5 'n,v\na,2\nb,3\n' --header 2
check "--header on a header-only file prints 0" 0 'n,v\n' --header 2
exit $failed
"#;

impl Step<'_> {
    fn dir(&self) -> String {
        format!(".workflow/scratch/P{}", self.phase)
    }

    fn rel(&self, name: &str) -> String {
        format!("{}/{name}", self.dir())
    }

    fn write(&self, rel: &str, text: &str) -> (&'static str, Value) {
        (
            "fs_write",
            json!({"path": format!("@project/{rel}"), "content": text}),
        )
    }

    fn done(&self, evidence: &[String]) -> Vec<(&'static str, Value)> {
        vec![(
            "session_complete",
            json!({"status": "DONE", "evidence": evidence}),
        )]
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.project.join(rel)).unwrap_or_default()
    }

    /// The milestone the step works on: the one its phase belongs to in state.json (a
    /// milestone-level step: the current one).
    fn milestone(&self) -> String {
        let state: Value =
            serde_json::from_str(&self.read(".workflow/state.json")).unwrap_or_default();
        let current = state["current_milestone"]
            .as_str()
            .unwrap_or("M1")
            .to_string();
        state["milestones"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| {
                m["status"] != "completed"
                    && m["phases"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|p| p.to_string().trim_matches('"') == self.phase)
            })
            .and_then(|m| m["id"].as_str().map(str::to_owned))
            .unwrap_or(current)
    }

    /// The calls of turn `turn` of this step, or `None` when it has nothing more to say.
    fn turn(&self, turn: usize) -> Option<Vec<(&'static str, Value)>> {
        match self.skill {
            "maestro-verify" => self.verify(turn),
            _ => match turn {
                0 => Some(self.work()),
                1 => Some(self.done(&self.evidence())),
                _ => None,
            },
        }
    }

    /// Everything a step other than verify writes, in one turn.
    fn work(&self) -> Vec<(&'static str, Value)> {
        let p = &self.phase;
        match self.skill {
            "maestro-analyze" => vec![
                self.write(
                    &self.rel("analysis.md"),
                    &format!(
                        "# Analysis of phase {p}: header-row\n\n\
                         Asked: `csvsum.sh --header COLUMN` skips the first line; without the \
                         flag nothing changes.\n\nFiles: `csvsum.sh` (the awk program), \
                         `test.sh` (the tests, run with `sh test.sh`).\n\nRisk: a file \
                         with a header and no rows; awk prints an empty line when no row was \
                         summed.\n"
                    ),
                ),
                self.write(
                    &self.rel("conclusions.json"),
                    &pretty(&json!({
                        "scope_verdict": "small",
                        "summary": "one flag in csvsum.sh and two test cases",
                        "files": ["csvsum.sh", "test.sh"],
                        "risks": ["a header-only file must print 0"]
                    })),
                ),
            ],
            "maestro-plan" => {
                let gaps: Vec<String> = if self.gaps {
                    serde_json::from_str::<Value>(&self.read(&self.rel("verification.json")))
                        .ok()
                        .and_then(|v| v["gaps"].as_array().cloned())
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|g| g.as_str().map(str::to_owned))
                        .collect()
                } else {
                    Vec::new()
                };
                let tasks = if self.gaps {
                    json!([{"id": "T3", "title": "print 0 when no row is summed (see debug.md)",
                            "files": ["csvsum.sh"],
                            "done_when": "sh test.sh exits 0"}])
                } else {
                    json!([
                        {"id": "T1", "title": "add --header to csvsum.sh", "files": ["csvsum.sh"],
                         "done_when": "printf 'n,v\\na,2\\nb,3\\n' | sh csvsum.sh --header 2 prints 5"},
                        {"id": "T2", "title": "test --header, with rows and with a header only",
                         "files": ["test.sh"],
                         "done_when": "sh test.sh exits 0 and runs both --header cases"}
                    ])
                };
                vec![self.write(
                    &self.rel("plan.json"),
                    &pretty(&json!({"phase": p, "gaps": gaps, "tasks": tasks})),
                )]
            }
            "maestro-execute" => {
                // Fixed once this phase's debug found the cause, or an earlier milestone's
                // fix is already in the tool.
                let fixed = self.project.join(self.rel("debug.md")).is_file()
                    || self.read("csvsum.sh").contains("s + 0");
                let (tool, note) = if fixed {
                    (TOOL_V2, "T3: the END block prints `s + 0`, so no row prints 0.")
                } else {
                    (
                        TOOL_V1,
                        "T1: `--header` sets skip=1 and the awk program skips line 1.\n\
                         T2: two cases added to test.sh.",
                    )
                };
                let mut calls = vec![self.write("csvsum.sh", tool)];
                if !fixed {
                    calls.push(self.write("test.sh", TESTS));
                }
                calls.push(self.write(
                    &self.rel("execution.md"),
                    &format!("# Execution of phase {p}\n\n{note}\n"),
                ));
                calls
            }
            "quality-debug" => vec![self.write(
                &self.rel("debug.md"),
                "# Debug: a header-only file prints nothing\n\n\
                 Symptom: `printf 'n,v\\n' | sh csvsum.sh --header 2` prints an empty line; \
                 the test wants `0`.\n\nRoot cause: csvsum.sh, the awk END block prints `s`, \
                 which is unset when no row was summed.\n\nFix: print `s + 0`.\n\n\
                 Check: `sh test.sh` exits 0.\n",
            )],
            "quality-review" => vec![self.write(
                &self.rel("review.json"),
                &pretty(&json!({
                    "verdict": "PASS",
                    "findings": [{"severity": "low", "file": "csvsum.sh",
                                  "note": "--header must come before COLUMN; the usage line says so"}]
                })),
            )],
            "maestro-milestone-audit" => {
                let current = self.milestone();
                vec![self.write(
                    &format!(".workflow/milestones/{current}/audit-report.md"),
                    &format!(
                        "# Audit of {current}\n\n| goal | evidence | met |\n|---|---|---|\n\
                         | G1: `--header` skips the first line | \
                         .workflow/scratch/P1/verification.json (passed, 4 checks) | yes |\n"
                    ),
                )]
            }
            "maestro-milestone-complete" => {
                let mut state: Value =
                    serde_json::from_str(&self.read(".workflow/state.json")).unwrap_or_default();
                let current = self.milestone();
                // The milestone is done; the next open one (if any) becomes current.
                let mut next = None;
                if let Some(ms) = state["milestones"].as_array_mut() {
                    let at = ms.iter().position(|m| m["id"] == current.as_str());
                    for m in ms.iter_mut().filter(|m| m["id"] == current.as_str()) {
                        m["status"] = json!("completed");
                    }
                    next = at.and_then(|at| {
                        ms[at + 1..]
                            .iter()
                            .find(|m| m["status"] != "completed")
                            .and_then(|m| m["id"].as_str().map(str::to_owned))
                    });
                }
                if let Some(next) = next {
                    state["current_milestone"] = json!(next);
                }
                vec![
                    self.write(
                        &format!(".workflow/milestones/{current}/summary.md"),
                        &format!(
                            "# {current} completed\n\nDelivered: `csvsum.sh --header COLUMN`.\n\
                             Proof: `sh test.sh` passes (see \
                             .workflow/scratch/P1/verification.json) and the review passed.\n\
                             Left out: nothing.\n"
                        ),
                    ),
                    self.write(".workflow/state.json", &pretty(&state)),
                ]
            }
            other => vec![self.write(
                &self.rel(&format!("{other}.md")),
                &format!("# {other}\n\nNothing to do for the csvsum sample.\n"),
            )],
        }
    }

    fn evidence(&self) -> Vec<String> {
        match self.skill {
            "maestro-analyze" => vec![self.rel("analysis.md"), self.rel("conclusions.json")],
            "maestro-plan" => vec![self.rel("plan.json")],
            "maestro-execute" => vec![self.rel("execution.md"), "csvsum.sh".into()],
            "quality-debug" => vec![self.rel("debug.md")],
            "quality-review" => vec![self.rel("review.json")],
            "maestro-milestone-audit" => vec![format!(
                ".workflow/milestones/{}/audit-report.md",
                self.milestone()
            )],
            "maestro-milestone-complete" => vec![
                format!(".workflow/milestones/{}/summary.md", self.milestone()),
                ".workflow/state.json".into(),
            ],
            other => vec![self.rel(&format!("{other}.md"))],
        }
    }

    /// Verify runs the tests (with the terminal tool when offered, else as the model would
    /// on its own machine), then writes what they said.
    fn verify(&self, turn: usize) -> Option<Vec<(&'static str, Value)>> {
        let run_first = self.terminal;
        match (turn, run_first) {
            (0, true) => Some(vec![(
                "terminal_run",
                json!({"command": "sh", "args": ["test.sh"]}),
            )]),
            (0, false) | (1, true) => {
                let output = if run_first {
                    self.terminal_output()
                } else {
                    local_tests(self.project)
                };
                Some(vec![self.write(
                    &self.rel("verification.json"),
                    &pretty(&verification(&output)),
                )])
            }
            (1, false) | (2, true) => Some(self.done(&[self.rel("verification.json")])),
            _ => None,
        }
    }

    /// `(exit code, stdout)` of the last terminal result in the conversation.
    fn terminal_output(&self) -> (i64, String) {
        let result = self
            .messages
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .map(content)
            .unwrap_or("");
        let v: Value = serde_json::from_str(result).unwrap_or_default();
        // A terminal the machine cannot offer (no sandbox): run the tests as a model would.
        if v["ok"] != true || v["exitCode"].as_i64().is_none() {
            return local_tests(self.project);
        }
        (
            v["exitCode"].as_i64().unwrap_or(-1),
            v["stdout"].as_str().unwrap_or("").to_string(),
        )
    }
}

fn local_tests(project: &Path) -> (i64, String) {
    match std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(project)
        .output()
    {
        Ok(o) => (
            o.status.code().map_or(-1, i64::from),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        ),
        Err(e) => (-1, e.to_string()),
    }
}

/// verification.json from the test output: one check per test line.
fn verification((code, stdout): &(i64, String)) -> Value {
    let mut checks = Vec::new();
    let mut gaps = Vec::new();
    for line in stdout.lines() {
        // One check per case; its exit code is the case's (0 passed, 1 failed).
        if let Some(name) = line.strip_prefix("ok   ") {
            checks.push(json!({"name": name, "command": "sh test.sh", "exit_code": 0, "ok": true}));
        } else if let Some(rest) = line.strip_prefix("FAIL ") {
            let name = rest.split(": want").next().unwrap_or(rest);
            checks
                .push(json!({"name": name, "command": "sh test.sh", "exit_code": 1, "ok": false}));
            gaps.push(rest.to_string());
        }
    }
    if *code != 0 && gaps.is_empty() {
        gaps.push(format!("sh test.sh exited with {code}"));
    }
    let status = if *code == 0 && gaps.is_empty() {
        "passed"
    } else {
        "gaps_found"
    };
    json!({"status": status, "checks": checks, "gaps": gaps})
}

/// Gives the project a second milestone, `M2` (phase 2, standard), after `M1`: the session
/// completes M1, advances and runs M2's chain.
pub fn add_second_milestone(project: &Path) {
    let path = project.join(".workflow/state.json");
    let mut state: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    state["milestones"].as_array_mut().unwrap().push(json!({
        "id": "M2",
        "name": "Empty input",
        "type": "standard",
        "status": "planned",
        "phases": [2],
        "phase_slugs": {"2": "empty-input"},
        "roadmap_ref": "roadmap.md",
        "created_at": "2026-11-01T09:00:00Z"
    }));
    std::fs::write(&path, pretty(&state)).unwrap();
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}
