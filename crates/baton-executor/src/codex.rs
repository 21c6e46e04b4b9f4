//! The Codex adapter: `codex exec --json`, pointed at the gateway as a custom Responses API
//! provider whose key is the run's token, quiet and offline (no analytics, plugins or hosted web
//! search), its tools' environment without the token.

use crate::{Adapter, Event, ExecutorKind, Invocation, Launch};
use serde_json::{Value, json};
use std::ffi::OsString;

/// The variable the provider reads its key from (the run's token).
pub const TOKEN_ENV: &str = "BATON_GATEWAY_TOKEN";

/// The provider's name in Codex's configuration.
const PROVIDER: &str = "baton";

pub struct Codex;

impl Adapter for Codex {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Codex
    }

    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        let provider = format!(
            "model_providers.{PROVIDER}={{name={},base_url={},env_key={},wire_api=\"responses\"}}",
            toml_string(PROVIDER),
            toml_string(&format!("{}/v1", inv.gateway.trim_end_matches('/'))),
            toml_string(TOKEN_ENV),
        );
        let mut args: Vec<OsString> = vec![
            "exec".into(),
            "--json".into(),
            // The workdir may be a plain folder; baton's sandbox confines the CLI, so Codex's
            // own sandbox and approvals (which would stop a headless run) are off.
            "--skip-git-repo-check".into(),
            "--dangerously-bypass-approvals-and-sandbox".into(),
            "-c".into(),
            "analytics.enabled=false".into(),
            "--disable".into(),
            "plugins".into(),
            // Hosted web search would run at the vendor, outside the gateway's record.
            "-c".into(),
            "web_search=\"disabled\"".into(),
            // The model can read the tools' environment (`env`): keep the token out of it.
            "-c".into(),
            format!(
                "shell_environment_policy.exclude=[{}]",
                toml_string(TOKEN_ENV)
            )
            .into(),
            "-c".into(),
            format!("model_provider={PROVIDER}").into(),
            "-c".into(),
            provider.into(),
            "-C".into(),
            inv.workdir.into(),
        ];
        if !inv.model.is_empty() {
            args.extend(["-m".into(), inv.model.into()]);
        }
        args.extend(inv.extra_args.iter().map(OsString::from));
        if let Some(session) = inv.resume {
            args.extend(["resume".into(), session.into()]);
        }
        // After `--` a prompt starting with `-` stays the prompt.
        args.extend(["--".into(), inv.prompt.into()]);
        let codex_home = inv.home.join(".codex");
        Launch {
            program: inv.program.to_path_buf(),
            args,
            env: vec![
                (TOKEN_ENV.into(), inv.token.into()),
                // Sessions (what a resume reads), logs and state stay in the per-run home.
                ("CODEX_HOME".into(), codex_home.into_os_string()),
            ],
            // Codex refuses a CODEX_HOME that does not exist; the file makes the folder.
            files: vec![(
                ".codex/config.toml".into(),
                b"# baton passes Codex's settings on its command line.\n".to_vec(),
            )],
        }
    }

    fn parse_line(&self, line: &str) -> Vec<Event> {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return Vec::new();
        };
        match v["type"].as_str().unwrap_or_default() {
            "thread.started" => v["thread_id"]
                .as_str()
                .map(|id| Event::Session { id: id.to_string() })
                .into_iter()
                .collect(),
            "item.completed" => completed(&v["item"]),
            "request_user_input" => vec![Event::Question {
                text: questions(&v["questions"]),
            }],
            "turn.completed" => vec![Event::Result {
                text: String::new(),
                is_error: false,
            }],
            "turn.failed" => vec![Event::Result {
                text: text(&v["error"]["message"]),
                is_error: true,
            }],
            _ => Vec::new(),
        }
    }
}

/// A TOML basic string (quoted, escaped).
fn toml_string(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// A finished item: the model's words, or one of its tool calls with the result (Codex reports a
/// call whole when it ends, so both are read from there).
fn completed(item: &Value) -> Vec<Event> {
    let id = text(&item["id"]);
    let status = item["status"].as_str().unwrap_or_default();
    let failed = matches!(status, "failed" | "declined");
    let (name, input, output, is_error) = match item["type"].as_str().unwrap_or_default() {
        "agent_message" => {
            let text = text(&item["text"]);
            return if text.is_empty() {
                Vec::new()
            } else {
                vec![Event::Message { text }]
            };
        }
        "command_execution" => (
            "shell".to_string(),
            json!({"command": item["command"]}),
            text(&item["aggregated_output"]),
            failed || item["exit_code"].as_i64().is_some_and(|c| c != 0),
        ),
        "file_change" => {
            let changes: Vec<String> = item["changes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| format!("{} {}", text(&c["kind"]), text(&c["path"])))
                .collect();
            (
                "apply_patch".to_string(),
                json!({"changes": item["changes"]}),
                changes.join("\n"),
                failed,
            )
        }
        "mcp_tool_call" => {
            let output = match (&item["result"], &item["error"]) {
                (_, Value::Object(e)) => e.get("message").map(text).unwrap_or_default(),
                (r, _) => r["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            (
                format!("mcp__{}__{}", text(&item["server"]), text(&item["tool"])),
                item["arguments"].clone(),
                output,
                failed || item["error"].is_object(),
            )
        }
        "collab_tool_call" => (
            text(&item["tool"]),
            json!({"prompt": item["prompt"], "receivers": item["receiver_thread_ids"]}),
            String::new(),
            failed,
        ),
        "web_search" => (
            "web_search".to_string(),
            json!({"query": item["query"]}),
            String::new(),
            false,
        ),
        // Reasoning summaries, to-do lists and Codex's own warnings are not the run's record.
        _ => return Vec::new(),
    };
    vec![
        Event::ToolCall {
            id: id.clone(),
            name,
            input,
        },
        Event::ToolResult {
            id,
            output,
            is_error,
        },
    ]
}

/// The questions of a `request_user_input` event, one a line, with their options.
fn questions(questions: &Value) -> String {
    questions
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            let question = text(&q["question"]);
            let options: Vec<String> = q["options"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| text(&o["label"]))
                .filter(|l| !l.is_empty())
                .collect();
            if options.is_empty() {
                question
            } else {
                format!("{question} ({})", options.join(" / "))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Real output of Codex 0.171.0 against a scripted model (host paths replaced): a message
    /// and a shell call writing hello.txt, a failing shell call, an apply_patch adding notes.md,
    /// the final message; the session resumed with an answer; resumed again, refused (400).
    const FIXTURE: &str = include_str!("../tests/fixtures/codex/exec-0.171.0.jsonl");
    const THREAD: &str = "01a227e8-93e0-72a3-b579-9cd41d38e81d";

    fn events() -> Vec<Event> {
        FIXTURE.lines().flat_map(|l| Codex.parse_line(l)).collect()
    }

    #[test]
    fn the_recorded_stream_reads_as_session_messages_calls_results_and_results() {
        let events = events();
        assert_eq!(
            events[..11],
            [
                Event::Session { id: THREAD.into() },
                Event::Message {
                    text: "I'll create the file.".into()
                },
                Event::ToolCall {
                    id: "item_1".into(),
                    name: "shell".into(),
                    input: json!({"command": "/bin/bash -lc \"printf 'hello from codex\\\\n' > hello.txt && cat hello.txt\""}),
                },
                Event::ToolResult {
                    id: "item_1".into(),
                    output: "hello from codex\n".into(),
                    is_error: false,
                },
                Event::ToolCall {
                    id: "item_2".into(),
                    name: "shell".into(),
                    input: json!({"command": "/bin/bash -lc 'ls missing-file'"}),
                },
                Event::ToolResult {
                    id: "item_2".into(),
                    output: "ls: cannot access 'missing-file': No such file or directory\n".into(),
                    is_error: true,
                },
                Event::ToolCall {
                    id: "item_3".into(),
                    name: "apply_patch".into(),
                    input: json!({"changes": [{"path": "/project/notes.md", "kind": "add"}]}),
                },
                Event::ToolResult {
                    id: "item_3".into(),
                    output: "add /project/notes.md".into(),
                    is_error: false,
                },
                Event::Message {
                    text: "Created hello.txt and notes.md.".into()
                },
                Event::Result {
                    text: String::new(),
                    is_error: false
                },
                // The resumed session is the same thread.
                Event::Session { id: THREAD.into() },
            ]
        );
        assert_eq!(
            events[11..14],
            [
                Event::Message {
                    text: "Yes, both files are there.".into()
                },
                Event::Result {
                    text: String::new(),
                    is_error: false
                },
                Event::Session { id: THREAD.into() },
            ]
        );
        // A refused request ends the turn as a failed result naming the API's error.
        let [Event::Result { text, is_error }] = &events[14..] else {
            panic!("{:?}", &events[14..]);
        };
        assert!(is_error);
        assert!(text.contains("Budget exceeded"), "{text}");
    }

    #[test]
    fn lines_that_are_not_the_record_read_as_nothing() {
        for line in [
            "",
            "not json",
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `played` not found."}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"reasoning","text":"thinking"}}"#,
        ] {
            assert_eq!(Codex.parse_line(line), [], "{line}");
        }
    }

    #[test]
    fn mcp_calls_and_questions_are_read() {
        let mcp = r#"{"type":"item.completed","item":{"id":"item_5","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"result":{"content":[{"type":"text","text":"found"}],"structured_content":null},"error":null,"status":"completed"}}"#;
        assert_eq!(
            Codex.parse_line(mcp),
            [
                Event::ToolCall {
                    id: "item_5".into(),
                    name: "mcp__docs__search".into(),
                    input: json!({"q": "x"}),
                },
                Event::ToolResult {
                    id: "item_5".into(),
                    output: "found".into(),
                    is_error: false,
                },
            ]
        );
        let failed = r#"{"type":"item.completed","item":{"id":"item_6","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{},"result":null,"error":{"message":"server gone"},"status":"failed"}}"#;
        assert_eq!(
            Codex.parse_line(failed)[1],
            Event::ToolResult {
                id: "item_6".into(),
                output: "server gone".into(),
                is_error: true,
            }
        );
        let ask = r#"{"type":"request_user_input","id":"t1","call_id":"c1","questions":[{"id":"db","header":"DB","question":"Which database?","options":[{"label":"Postgres","description":""},{"label":"SQLite","description":""}]}]}"#;
        assert_eq!(
            Codex.parse_line(ask),
            [Event::Question {
                text: "Which database? (Postgres / SQLite)".into()
            }]
        );
    }

    fn invocation<'a>(resume: Option<&'a str>, extra: &'a [String]) -> Invocation<'a> {
        Invocation {
            program: Path::new("/opt/bin/codex"),
            workdir: Path::new("/work/story"),
            home: Path::new("/run/home"),
            gateway: "http://127.0.0.1:4000/",
            token: "tok-run",
            model: "gpt-5.5",
            prompt: "-implement the story",
            resume,
            extra_args: extra,
        }
    }

    fn args(launch: &Launch) -> Vec<String> {
        launch
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn launch_points_codex_at_the_gateway_with_the_token_only() {
        let extra = vec![
            "-c".to_string(),
            "model_reasoning_effort=\"low\"".to_string(),
        ];
        let launch = Codex.launch(&invocation(None, &extra));
        assert_eq!(launch.program, Path::new("/opt/bin/codex"));
        assert_eq!(
            args(&launch),
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "-c",
                "analytics.enabled=false",
                "--disable",
                "plugins",
                "-c",
                "web_search=\"disabled\"",
                "-c",
                "shell_environment_policy.exclude=[\"BATON_GATEWAY_TOKEN\"]",
                "-c",
                "model_provider=baton",
                "-c",
                "model_providers.baton={name=\"baton\",base_url=\"http://127.0.0.1:4000/v1\",env_key=\"BATON_GATEWAY_TOKEN\",wire_api=\"responses\"}",
                "-C",
                "/work/story",
                "-m",
                "gpt-5.5",
                "-c",
                "model_reasoning_effort=\"low\"",
                "--",
                "-implement the story",
            ]
        );
        assert_eq!(
            launch.env,
            [
                ("BATON_GATEWAY_TOKEN".into(), "tok-run".into()),
                ("CODEX_HOME".into(), "/run/home/.codex".into()),
            ]
        );
        assert_eq!(launch.files.len(), 1);
        assert_eq!(launch.files[0].0, Path::new(".codex/config.toml"));
    }

    #[test]
    fn a_resume_continues_the_session_with_the_answer() {
        let launch = Codex.launch(&invocation(Some("01a2-thread"), &[]));
        let args = args(&launch);
        assert_eq!(
            args[args.len() - 4..],
            ["resume", "01a2-thread", "--", "-implement the story"]
        );
    }

    #[test]
    fn toml_strings_are_quoted_and_escaped() {
        assert_eq!(toml_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(toml_string("a\nb"), r#""a\u000Ab""#);
    }
}
