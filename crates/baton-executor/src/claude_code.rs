//! The Claude Code adapter: `claude -p` in stream-JSON mode, pointed at the gateway with the
//! run's token, quiet and offline (no telemetry, updates or other traffic than the model's).

use crate::{Adapter, Event, ExecutorKind, Invocation, Launch};
use serde_json::Value;
use std::ffi::OsString;

/// The tool Claude Code offers the model to ask the person (disabled in `-p` mode, so a model
/// calling it gets an error; baton still surfaces it as the question it was).
const ASK_TOOL: &str = "AskUserQuestion";

pub struct ClaudeCode;

impl Adapter for ClaudeCode {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::ClaudeCode
    }

    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        let mut args: Vec<OsString> = [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]
        .map(OsString::from)
        .to_vec();
        if !inv.model.is_empty() {
            args.extend(["--model".into(), inv.model.into()]);
        }
        if let Some(session) = inv.resume {
            args.extend(["--resume".into(), session.into()]);
        }
        args.extend(inv.extra_args.iter().map(OsString::from));
        // After `--` a prompt starting with `-` stays the prompt.
        args.extend(["--".into(), inv.prompt.into()]);

        let mut env: Vec<(OsString, OsString)> = [
            ("ANTHROPIC_BASE_URL", inv.gateway),
            ("ANTHROPIC_API_KEY", inv.token),
            // No telemetry, error reports, update checks, release notes or model lists: the
            // gateway is the only address the CLI needs (and, confined, the only one it has).
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            // Memory would carry a run's notes into the next one through the home.
            ("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1"),
            // `--dangerously-skip-permissions` is refused as root unless the CLI is told it is
            // sandboxed (it is: baton's sandbox).
            ("IS_SANDBOX", "1"),
        ]
        .map(|(k, v)| (k.into(), v.into()))
        .to_vec();
        if !inv.model.is_empty() {
            // Background and subagent requests ask for the configured model too, not a vendor
            // default the upstream may not serve (and the budget did not plan for).
            for var in [
                "ANTHROPIC_DEFAULT_HAIKU_MODEL",
                "ANTHROPIC_SMALL_FAST_MODEL",
                "CLAUDE_CODE_SUBAGENT_MODEL",
            ] {
                env.push((var.into(), inv.model.into()));
            }
        }
        Launch {
            program: inv.program.to_path_buf(),
            args,
            env,
            files: vec![(
                ".claude.json".into(),
                br#"{"hasCompletedOnboarding": true, "autoUpdates": false}"#.to_vec(),
            )],
        }
    }

    fn parse_line(&self, line: &str) -> Vec<Event> {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return Vec::new();
        };
        match v["type"].as_str().unwrap_or_default() {
            "system" if v["subtype"] == "init" => v["session_id"]
                .as_str()
                .map(|id| Event::Session { id: id.to_string() })
                .into_iter()
                .collect(),
            "assistant" => blocks(&v).flat_map(assistant_block).collect(),
            "user" => blocks(&v).filter_map(tool_result).collect(),
            "result" => vec![Event::Result {
                text: v["result"]
                    .as_str()
                    .map(str::to_string)
                    // An error result may carry no text, only its kind.
                    .unwrap_or_else(|| v["subtype"].as_str().unwrap_or_default().to_string()),
                is_error: v["is_error"].as_bool().unwrap_or(false),
            }],
            _ => Vec::new(),
        }
    }
}

fn blocks(v: &Value) -> impl Iterator<Item = &Value> {
    v["message"]["content"].as_array().into_iter().flatten()
}

fn assistant_block(b: &Value) -> Vec<Event> {
    match b["type"].as_str().unwrap_or_default() {
        "text" => {
            let text = b["text"].as_str().unwrap_or_default();
            if text.is_empty() {
                return Vec::new();
            }
            vec![Event::Message {
                text: text.to_string(),
            }]
        }
        "tool_use" => {
            let name = b["name"].as_str().unwrap_or_default().to_string();
            let ask = (name == ASK_TOOL).then(|| Event::Question {
                text: ask_text(&b["input"]),
            });
            let mut events = vec![Event::ToolCall {
                id: b["id"].as_str().unwrap_or_default().to_string(),
                name,
                input: b["input"].clone(),
            }];
            events.extend(ask);
            events
        }
        _ => Vec::new(),
    }
}

/// The questions of an `AskUserQuestion` call, one a line, with their options.
fn ask_text(input: &Value) -> String {
    let lines: Vec<String> = input["questions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            let question = q["question"].as_str().unwrap_or_default();
            let options: Vec<&str> = q["options"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|o| o["label"].as_str())
                .collect();
            if options.is_empty() {
                question.to_string()
            } else {
                format!("{question} ({})", options.join(" / "))
            }
        })
        .collect();
    if lines.is_empty() {
        input.to_string()
    } else {
        lines.join("\n")
    }
}

fn tool_result(b: &Value) -> Option<Event> {
    if b["type"] != "tool_result" {
        return None;
    }
    let output = match &b["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    Some(Event::ToolResult {
        id: b["tool_use_id"].as_str().unwrap_or_default().to_string(),
        output,
        is_error: b["is_error"].as_bool().unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    /// Real output of Claude Code 2.1.332 against a scripted model (host paths replaced): a
    /// Write call; a failing Bash call, an `AskUserQuestion` call and a question as the final
    /// text; the resumed session's answer.
    const FIXTURE: &str = include_str!("../tests/fixtures/claude-code-2.1.332.jsonl");

    fn events() -> Vec<Event> {
        FIXTURE
            .lines()
            .flat_map(|l| ClaudeCode.parse_line(l))
            .collect()
    }

    #[test]
    fn the_recorded_stream_reads_as_sessions_messages_calls_results_and_questions() {
        let events = events();
        let first = "87380b89-4196-43f5-a912-c3c70110a2bf";
        let second = "fa2a484e-595e-4d6a-8918-6044ff3e0e75";
        let sessions: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::Session { id } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(sessions, [first, second, second]);
        assert_eq!(
            events[1..5],
            [
                Event::Message {
                    text: "I'll create the file.".into()
                },
                Event::ToolCall {
                    id: "toolu_01".into(),
                    name: "Write".into(),
                    input: json!({"file_path": "/project/hello.txt",
                        "content": "hello from claude\n"}),
                },
                Event::ToolResult {
                    id: "toolu_01".into(),
                    output: "File created successfully at: /project/hello.txt (file state is current in your context \u{2014} no need to Read it back)".into(),
                    is_error: false,
                },
                Event::Message {
                    text: "Created hello.txt.".into()
                },
            ]
        );
        assert!(events.contains(&Event::ToolResult {
            id: "toolu_b1".into(),
            output: "Exit code 3\nout".into(),
            is_error: true,
        }));
        assert!(events.contains(&Event::Question {
            text: "Which color? (red / blue)".into()
        }));
        let results: Vec<&Event> = events
            .iter()
            .filter(|e| matches!(e, Event::Result { .. }))
            .collect();
        assert_eq!(
            results,
            [
                &Event::Result {
                    text: "Created hello.txt.".into(),
                    is_error: false
                },
                &Event::Result {
                    text: "Which color do you want for the button?".into(),
                    is_error: false
                },
                &Event::Result {
                    text: "OK, blue it is.".into(),
                    is_error: false
                },
            ]
        );
    }

    #[test]
    fn lines_that_are_not_json_or_not_recorded_say_nothing() {
        for line in [
            "",
            "not json",
            r#"{"type":"system","subtype":"api_retry"}"#,
            r#"{"type":"stream_event"}"#,
        ] {
            assert_eq!(ClaudeCode.parse_line(line), [], "{line}");
        }
    }

    #[test]
    fn an_error_result_without_text_reads_as_its_kind() {
        let line = r#"{"type":"result","subtype":"error_max_turns","is_error":true}"#;
        assert_eq!(
            ClaudeCode.parse_line(line),
            [Event::Result {
                text: "error_max_turns".into(),
                is_error: true
            }]
        );
    }

    #[test]
    fn the_launch_points_at_the_gateway_with_the_token_and_resumes_the_session() {
        let extra = ["--max-turns".to_string(), "30".to_string()];
        let inv = Invocation {
            program: Path::new("/bin/claude"),
            workdir: Path::new("/project"),
            home: Path::new("/run/home"),
            gateway: "http://127.0.0.1:4000",
            token: "baton-run-token",
            model: "claude-sonnet-4-5",
            prompt: "-do the story",
            resume: Some("sess-1"),
            extra_args: &extra,
        };
        let launch = ClaudeCode.launch(&inv);
        let args: Vec<&str> = launch.args.iter().filter_map(|a| a.to_str()).collect();
        assert_eq!(
            args,
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
                "--model",
                "claude-sonnet-4-5",
                "--resume",
                "sess-1",
                "--max-turns",
                "30",
                "--",
                "-do the story"
            ]
        );
        let env = |k: &str| {
            launch
                .env
                .iter()
                .find(|(n, _)| n == k)
                .and_then(|(_, v)| v.to_str())
        };
        assert_eq!(env("ANTHROPIC_BASE_URL"), Some("http://127.0.0.1:4000"));
        assert_eq!(env("ANTHROPIC_API_KEY"), Some("baton-run-token"));
        assert_eq!(env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"), Some("1"));
        assert_eq!(env("IS_SANDBOX"), Some("1"));
        assert_eq!(env("ANTHROPIC_SMALL_FAST_MODEL"), Some("claude-sonnet-4-5"));
        let fresh = ClaudeCode.launch(&Invocation {
            resume: None,
            model: "",
            extra_args: &[],
            ..inv
        });
        assert!(!fresh.args.iter().any(|a| a == "--resume" || a == "--model"));
    }
}
