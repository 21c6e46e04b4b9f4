//! The OpenCode adapter: `opencode run --format json --auto`, pointed at the gateway through a
//! config file seeded in the per-run home (an OpenAI-compatible provider `baton`), with no
//! traffic but the model's.
//!
//! The seeded config is static: the gateway's URL, the token and the model reach it through
//! `{env:…}` references, so a resumed session (a new gateway, a new token, the home kept) reads
//! the current ones.

use crate::{Adapter, Event, ExecutorKind, Invocation, Launch};
use serde_json::Value;
use std::ffi::OsString;
use std::path::PathBuf;

/// The provider id the config declares (`-m baton/<model>`).
const PROVIDER: &str = "baton";
/// Where the config is seeded, relative to the per-run home (outside OpenCode's own config
/// folders, so it is read once, through `OPENCODE_CONFIG`).
const CONFIG_FILE: &str = ".config/baton/opencode.json";
/// The variables the config reads.
const URL_VAR: &str = "BATON_GATEWAY_URL";
const TOKEN_VAR: &str = "BATON_GATEWAY_TOKEN";
const MODEL_VAR: &str = "BATON_MODEL";

/// OpenCode npm-installs `@opencode-ai/plugin` into its config folder in the background unless
/// that folder has `node_modules` and a lock file naming the package: seeded so, it installs
/// nothing and reaches for no registry (the package only types a user's own plugins).
const PLUGIN_LOCK: &str = ".config/opencode/package-lock.json";
const PLUGIN_MODULES: &str = ".config/opencode/node_modules/.keep";
const PLUGIN_LOCK_JSON: &str =
    r#"{"packages":{"":{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}}}"#;

pub struct Opencode;

impl Adapter for Opencode {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Opencode
    }

    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        let mut args: Vec<OsString> = ["run", "--format", "json", "--auto", "--dir"]
            .map(OsString::from)
            .to_vec();
        args.push(inv.workdir.into());
        if !inv.model.is_empty() {
            args.extend(["-m".into(), format!("{PROVIDER}/{}", inv.model).into()]);
        }
        match inv.resume {
            Some(session) => args.extend(["--session".into(), session.into()]),
            // A given title (empty: the prompt's start) spares the title request OpenCode
            // otherwise sends beside the first turn: one model call less, and the calls come
            // in one order, which a replay needs.
            None => args.extend(["--title".into(), "".into()]),
        }
        args.extend(inv.extra_args.iter().map(OsString::from));
        // After `--` a prompt starting with `-` stays the prompt.
        args.extend(["--".into(), inv.prompt.into()]);

        let config = inv.home.join(CONFIG_FILE);
        let env: Vec<(OsString, OsString)> = [
            ("OPENCODE_CONFIG", config.as_os_str()),
            (URL_VAR, inv.gateway.as_ref()),
            (TOKEN_VAR, inv.token.as_ref()),
            (MODEL_VAR, inv.model.as_ref()),
            // No model list from models.dev, no update check, no sharing, no language-server
            // downloads: the gateway is the only address the CLI needs.
            ("OPENCODE_DISABLE_MODELS_FETCH", "1".as_ref()),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1".as_ref()),
            ("OPENCODE_DISABLE_SHARE", "1".as_ref()),
            ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1".as_ref()),
        ]
        .map(|(k, v)| (k.into(), v.to_os_string()))
        .to_vec();

        Launch {
            program: inv.program.to_path_buf(),
            args,
            env,
            files: vec![
                (PathBuf::from(CONFIG_FILE), config_json().into_bytes()),
                (
                    PathBuf::from(PLUGIN_LOCK),
                    PLUGIN_LOCK_JSON.as_bytes().to_vec(),
                ),
                (PathBuf::from(PLUGIN_MODULES), Vec::new()),
            ],
        }
    }

    fn parse_line(&self, line: &str) -> Vec<Event> {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return Vec::new();
        };
        let session = || {
            v["sessionID"]
                .as_str()
                .map(|id| Event::Session { id: id.to_string() })
        };
        let part = &v["part"];
        match v["type"].as_str().unwrap_or_default() {
            // Each step names the session (the same each time; a run that fails before its
            // first step names it in its error).
            "step_start" => session().into_iter().collect(),
            "text" => match part["text"].as_str() {
                Some(text) if !text.trim().is_empty() => vec![Event::Message {
                    text: text.to_string(),
                }],
                _ => Vec::new(),
            },
            "tool_use" => tool_use(part),
            "step_finish" => finish(part["reason"].as_str().unwrap_or_default())
                .into_iter()
                .collect(),
            "error" => session()
                .into_iter()
                .chain([Event::Result {
                    text: error_text(&v["error"]),
                    is_error: true,
                }])
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The config OpenCode reads: the gateway as its only provider, every permission it would ask
/// for granted (baton's sandbox is the fence), nothing shared or updated.
fn config_json() -> String {
    let env = |var: &str| format!("{{env:{var}}}");
    let model = env(MODEL_VAR);
    serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "baton gateway",
                "options": {
                    "baseURL": format!("{}/v1", env(URL_VAR)),
                    "apiKey": env(TOKEN_VAR),
                },
                "models": { model.clone(): { "name": model.clone() } },
            }
        },
        "model": format!("{PROVIDER}/{model}"),
        // Background requests (titles, summaries) ask for the configured model too, not a
        // vendor default the upstream may not serve.
        "small_model": format!("{PROVIDER}/{model}"),
        "permission": { "edit": "allow", "bash": "allow", "webfetch": "allow" },
        "share": "disabled",
        "autoupdate": false,
    })
    .to_string()
}

/// A finished tool call: OpenCode reports it once, with its input and its output or error.
fn tool_use(part: &Value) -> Vec<Event> {
    let state = &part["state"];
    let id = part["callID"].as_str().unwrap_or_default().to_string();
    let is_error = state["status"] == "error";
    let output = if is_error {
        &state["error"]
    } else {
        &state["output"]
    };
    vec![
        Event::ToolCall {
            id: id.clone(),
            name: part["tool"].as_str().unwrap_or_default().to_string(),
            input: state["input"].clone(),
        },
        Event::ToolResult {
            id,
            output: match output {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            },
            is_error,
        },
    ]
}

/// The end of a step: a step that asked for tools goes on; `stop` is the CLI's last step (its
/// words came in the text before); any other reason (`length`, `content-filter`, `error`) ends
/// the turn unfinished.
fn finish(reason: &str) -> Option<Event> {
    match reason {
        "tool-calls" | "" => None,
        "stop" => Some(Event::Result {
            text: String::new(),
            is_error: false,
        }),
        other => Some(Event::Result {
            text: format!("the model stopped: {other}"),
            is_error: true,
        }),
    }
}

/// An error's message (an API error's `data.message`), else its name.
fn error_text(error: &Value) -> String {
    error["data"]["message"]
        .as_str()
        .or_else(|| error["name"].as_str())
        .unwrap_or("error")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    /// A real `opencode run --format json` run (1.18.33, scripted model): a text and a write in
    /// one step, a failing bash command, a read of a missing file, the last words; then a run
    /// refused with 401, and one that could not reach its server (host paths replaced).
    const FIXTURE: &str = include_str!("../tests/fixtures/opencode/run-1.18.33.jsonl");
    const SESSION: &str = "ses_dd819422effeVqkIozF0U2Pci0";

    fn events() -> Vec<Event> {
        FIXTURE
            .lines()
            .flat_map(|l| Opencode.parse_line(l))
            .collect()
    }

    fn invocation<'a>(resume: Option<&'a str>, extra: &'a [String]) -> Invocation<'a> {
        Invocation {
            program: Path::new("/opt/bin/opencode"),
            workdir: Path::new("/project"),
            home: Path::new("/run/home"),
            gateway: "http://127.0.0.1:4000",
            token: "baton-run-abc",
            model: "gpt-5.1",
            prompt: "-do the story",
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

    fn env<'a>(launch: &'a Launch, name: &str) -> Option<&'a str> {
        launch
            .env
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.to_str())
    }

    #[test]
    fn the_run_reads_as_session_messages_tool_calls_with_results_and_a_final_stop() {
        let events = events();
        let session = Event::Session { id: SESSION.into() };
        assert_eq!(
            events[..9],
            [
                session.clone(),
                Event::Message {
                    text: "I will write it.".into()
                },
                Event::ToolCall {
                    id: "call_w".into(),
                    name: "write".into(),
                    input: json!({"filePath": "hello.txt", "content": "hello\n"}),
                },
                Event::ToolResult {
                    id: "call_w".into(),
                    output: "Wrote file successfully.".into(),
                    is_error: false,
                },
                session.clone(),
                Event::ToolCall {
                    id: "call_b".into(),
                    name: "bash".into(),
                    input: json!({"command": "cat hello.txt; false", "description": "show"}),
                },
                // A command that exits non-zero is a completed call: its output is the answer.
                Event::ToolResult {
                    id: "call_b".into(),
                    output: "hello\n".into(),
                    is_error: false,
                },
                session.clone(),
                Event::ToolCall {
                    id: "call_r".into(),
                    name: "read".into(),
                    input: json!({"filePath": "missing.txt"}),
                },
            ]
        );
        assert_eq!(
            events[9..13],
            [
                Event::ToolResult {
                    id: "call_r".into(),
                    output: "File not found: /project/missing.txt".into(),
                    is_error: true,
                },
                session,
                Event::Message {
                    text: "All done.".into()
                },
                Event::Result {
                    text: String::new(),
                    is_error: false
                },
            ]
        );
    }

    #[test]
    fn a_refused_or_unreachable_model_is_an_error_result_naming_the_session() {
        let events = events();
        assert_eq!(
            events[13..],
            [
                Event::Session { id: "ses_dd817b67fffeeqPK8QO8MZ11yd".into() },
                Event::Result { text: "invalid token".into(), is_error: true },
                Event::Session { id: SESSION.into() },
                Event::Result {
                    text: "Cannot connect to API: Unable to connect. Is the computer able to access the url?".into(),
                    is_error: true,
                },
            ]
        );
    }

    #[test]
    fn a_step_cut_short_ends_in_error_and_other_lines_say_nothing() {
        let cut = r#"{"type":"step_finish","sessionID":"s","part":{"type":"step-finish","reason":"length"}}"#;
        assert_eq!(
            Opencode.parse_line(cut),
            [Event::Result {
                text: "the model stopped: length".into(),
                is_error: true
            }]
        );
        for quiet in [
            "",
            "not json",
            r#"{"type":"reasoning","sessionID":"s","part":{"text":"hmm"}}"#,
            r#"{"type":"text","sessionID":"s","part":{"type":"text","text":"  "}}"#,
        ] {
            assert_eq!(Opencode.parse_line(quiet), [], "{quiet}");
        }
    }

    #[test]
    fn a_launch_runs_headless_in_the_workdir_against_the_gateway_with_the_prompt_last() {
        let extra = vec!["--agent".to_string(), "build".to_string()];
        let launch = Opencode.launch(&invocation(None, &extra));
        assert_eq!(launch.program, Path::new("/opt/bin/opencode"));
        assert_eq!(
            args(&launch),
            [
                "run",
                "--format",
                "json",
                "--auto",
                "--dir",
                "/project",
                "-m",
                "baton/gpt-5.1",
                "--title",
                "",
                "--agent",
                "build",
                "--",
                "-do the story",
            ]
        );
        assert_eq!(
            env(&launch, "OPENCODE_CONFIG"),
            Some("/run/home/.config/baton/opencode.json")
        );
        assert_eq!(env(&launch, URL_VAR), Some("http://127.0.0.1:4000"));
        assert_eq!(env(&launch, TOKEN_VAR), Some("baton-run-abc"));
        assert_eq!(env(&launch, MODEL_VAR), Some("gpt-5.1"));
        assert_eq!(env(&launch, "OPENCODE_DISABLE_MODELS_FETCH"), Some("1"));
    }

    #[test]
    fn a_resume_continues_the_session_without_a_new_title() {
        let launch = Opencode.launch(&invocation(Some("ses_1"), &[]));
        let args = args(&launch);
        let at = args
            .iter()
            .position(|a| a == "--session")
            .expect("--session");
        assert_eq!(args[at + 1], "ses_1");
        assert!(!args.iter().any(|a| a == "--title"));
    }

    #[test]
    fn the_seeded_config_points_at_the_gateway_through_variables_and_stops_the_plugin_install() {
        let launch = Opencode.launch(&invocation(None, &[]));
        let file = |name: &str| {
            launch
                .files
                .iter()
                .find(|(p, _)| p == Path::new(name))
                .map(|(_, c)| c.clone())
                .expect(name)
        };
        let config: Value = serde_json::from_slice(&file(CONFIG_FILE)).expect("json");
        let baton = &config["provider"]["baton"];
        assert_eq!(baton["npm"], "@ai-sdk/openai-compatible");
        assert_eq!(baton["options"]["baseURL"], "{env:BATON_GATEWAY_URL}/v1");
        assert_eq!(baton["options"]["apiKey"], "{env:BATON_GATEWAY_TOKEN}");
        assert!(baton["models"]["{env:BATON_MODEL}"].is_object());
        assert_eq!(config["permission"]["edit"], "allow");
        assert_eq!(config["permission"]["bash"], "allow");
        assert_eq!(config["share"], "disabled");
        assert_eq!(config["autoupdate"], false);
        // Neither the token nor the gateway is written in the file: a resume reads the new ones.
        let text = String::from_utf8(file(CONFIG_FILE)).expect("utf-8");
        assert!(!text.contains("baton-run-abc") && !text.contains("4000"));
        let lock: Value = serde_json::from_slice(&file(PLUGIN_LOCK)).expect("lock");
        assert!(lock["packages"][""]["dependencies"]["@opencode-ai/plugin"].is_string());
        file(PLUGIN_MODULES);
    }
}
