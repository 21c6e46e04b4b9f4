//! MCP servers as tools, against small stdio servers built here with rmcp's server side: this
//! test binary runs itself as the server when `BATON_MCP_TEST_SERVER` names a behaviour
//! (hence `harness = false`). Tools are listed with their schemas, a call round-trips, a
//! server that crashes mid-call or hangs gives a tool error within the timeout (and is started
//! again next time), one that never finishes its handshake is unavailable, a disallowed server
//! is `TOOL_NOT_AVAILABLE`, every call leaves an audit line, and no server outlives its hub.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod common;

use baton_tools::{McpConfig, McpHub, McpServerConfig, ToolRuntime};
use common::Env;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const MODE: &str = "BATON_MCP_TEST_SERVER";
const MARKER: &str = "BATON_MCP_TEST_MARKER";

// ---------------------------------------------------------------- the server side

struct TestServer;

fn schema(props: Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(
        json!({"type": "object", "properties": props})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = vec![
            Tool::new(
                "echo",
                "Echoes its text",
                schema(json!({"text": {"type": "string"}})),
            ),
            Tool::new("where", "Says where the server runs", schema(json!({}))),
            Tool::new("fail", "Always reports an error", schema(json!({}))),
            Tool::new("crash", "Exits while answering", schema(json!({}))),
            Tool::new("hang", "Never answers", schema(json!({}))),
            Tool::new("flood", "Answers with a megabyte", schema(json!({}))),
            Tool::new(
                "odd name/with.dots",
                "A name providers refuse",
                schema(json!({})),
            ),
        ];
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = |s: String| Ok(CallToolResult::success(vec![ContentBlock::text(s)]).into());
        match request.name.as_ref() {
            "echo" => text(format!(
                "echo: {}",
                args.get("text").and_then(Value::as_str).unwrap_or("")
            )),
            "where" => text(
                std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
            ),
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text("it went wrong")]).into()),
            "crash" => std::process::exit(3),
            "hang" => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                text(String::new())
            }
            "flood" => text("z".repeat(1024 * 1024)),
            _ => text("odd".into()),
        }
    }
}

fn run_server(mode: &str) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        std::process::exit(2);
    };
    rt.block_on(async {
        match mode {
            "exit-at-once" => std::process::exit(1),
            "silent" => {
                // Reads nothing, answers nothing: a handshake that never ends.
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            _ => {
                if let Ok(service) = TestServer.serve(rmcp::transport::stdio()).await {
                    let _ = service.waiting().await;
                }
            }
        }
    });
}

// ---------------------------------------------------------------- the client side

fn server(mode: &str, marker: &str) -> McpServerConfig {
    McpServerConfig {
        command: std::env::current_exe()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        args: vec![],
        env: BTreeMap::from([
            (MODE.to_string(), mode.to_string()),
            (MARKER.to_string(), marker.to_string()),
        ]),
        cwd: None,
    }
}

struct Setup {
    env: Env,
    hub: Arc<McpHub>,
    marker: String,
}

fn setup(call_ms: u64, start_ms: u64) -> Setup {
    let mut env = Env::new();
    let marker = format!("{}-{}", std::process::id(), env.run_id);
    let config = McpConfig {
        servers: BTreeMap::from([
            ("good".to_string(), server("normal", &marker)),
            ("other".to_string(), server("normal", &marker)),
            ("silent".to_string(), server("silent", &marker)),
            ("gone".to_string(), server("exit-at-once", &marker)),
        ]),
        call_timeout: Duration::from_millis(call_ms),
        start_timeout: Duration::from_millis(start_ms),
    };
    let hub = McpHub::new(config, &env.project_root);
    env.host.set_runtime(ToolRuntime {
        mcp: Some(hub.clone()),
        ..ToolRuntime::default()
    });
    env.policy.mcp_enabled = true;
    env.policy.mcp_allowed_servers = vec!["good".into(), "silent".into(), "gone".into()];
    Setup { env, hub, marker }
}

fn code(r: &Value) -> Option<&str> {
    r.pointer("/error/code").and_then(Value::as_str)
}

/// Server processes carrying `marker` that are still alive.
fn servers_alive(marker: &str) -> Vec<String> {
    let want = format!("{MARKER}={marker}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            !stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
                && std::fs::read(e.path().join("environ"))
                    .is_ok_and(|v| v.split(|b| *b == 0).any(|x| x == want.as_bytes()))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn tools_are_listed_with_their_schemas() {
    let s = setup(5_000, 1_500);
    let tools = s.env.host.mcp_tools(&s.env.policy);
    let started = Instant::now();
    let again = s.env.host.mcp_tools(&s.env.policy);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "a server that did not start is not waited for again at every turn"
    );
    assert_eq!(again, tools);
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"mcp__good__echo"), "{names:?}");
    assert!(
        names.contains(&"mcp__good__odd_name_with_dots"),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__other__")),
        "other is not allowed"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__silent__")),
        "silent never started"
    );
    let echo = tools.iter().find(|t| t.name == "mcp__good__echo").unwrap();
    assert_eq!(echo.description, "Echoes its text");
    assert_eq!(echo.parameters["properties"]["text"]["type"], "string");
    assert!(names.iter().all(|n| {
        n.len() <= 64
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }));
}

fn a_call_round_trips_and_is_audited() {
    let mut s = setup(5_000, 10_000);
    let started = Instant::now();
    let out = s.env.call("mcp__good__echo", json!({"text": "hello"}));
    assert_eq!(out.result["ok"], true, "{:#}", out.result);
    assert_eq!(out.result["content"], "echo: hello");
    let first = started.elapsed();
    let started = Instant::now();
    let out = s.env.call("mcp__good__where", json!({}));
    assert_eq!(
        out.result["content"], "@project",
        "the project's host path is not shown"
    );
    eprintln!(
        "    first call (with start) {first:?}, second {:?}",
        started.elapsed()
    );
    let out = s.env.call("mcp__good__odd_name_with_dots", json!({}));
    assert_eq!(
        out.result["content"], "odd",
        "the exposed name maps back to the server's"
    );
    let out = s.env.call("mcp__good__fail", json!({}));
    assert_eq!(code(&out.result), Some("MCP_TOOL_ERROR"));
    assert_eq!(out.result["error"]["message"], "it went wrong");
    let long = "q".repeat(5000);
    let out = s.env.call("mcp__good__echo", json!({"text": long}));
    assert_eq!(out.result["ok"], true);
    let out = s.env.call("mcp__good__flood", json!({}));
    assert_eq!(out.result["truncated"], true);
    assert_eq!(
        out.result["content"].as_str().unwrap().len(),
        baton_tools::mcp::MAX_RESULT_BYTES
    );
    let audit = s.env.audit();
    assert_eq!(audit.len(), 6, "one audit line per call");
    assert_eq!(audit[0]["toolName"], "mcp__good__echo");
    assert!(
        audit[4]["input"]["text"]["sha256"].is_string(),
        "a long argument is redacted"
    );
    assert!(
        audit[0]["output"]["content"]["sha256"].is_string(),
        "the result text is redacted"
    );
}

fn a_crash_mid_call_is_a_tool_error_and_the_server_comes_back() {
    let mut s = setup(5_000, 10_000);
    assert_eq!(
        s.env.call("mcp__good__echo", json!({"text": "a"})).result["ok"],
        true
    );
    let started = Instant::now();
    let out = s.env.call("mcp__good__crash", json!({}));
    assert_eq!(
        code(&out.result),
        Some("MCP_SERVER_CRASHED"),
        "{:#}",
        out.result
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let out = s.env.call("mcp__good__echo", json!({"text": "again"}));
    assert_eq!(out.result["content"], "echo: again", "{:#}", out.result);
}

fn a_hang_is_a_timeout_within_the_limit() {
    let mut s = setup(400, 10_000);
    assert_eq!(
        s.env.call("mcp__good__echo", json!({"text": "a"})).result["ok"],
        true
    );
    let started = Instant::now();
    let out = s.env.call("mcp__good__hang", json!({}));
    let took = started.elapsed();
    assert_eq!(code(&out.result), Some("MCP_TIMEOUT"), "{:#}", out.result);
    assert!(took < Duration::from_secs(3), "{took:?}");
    let out = s.env.call("mcp__good__echo", json!({"text": "after"}));
    assert_eq!(out.result["content"], "echo: after", "{:#}", out.result);
}

fn a_server_that_never_starts_is_unavailable() {
    let mut s = setup(1_000, 400);
    let started = Instant::now();
    let out = s.env.call("mcp__silent__anything", json!({}));
    assert_eq!(
        code(&out.result),
        Some("MCP_SERVER_UNAVAILABLE"),
        "{:#}",
        out.result
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    let out = s.env.call("mcp__gone__anything", json!({}));
    assert_eq!(
        code(&out.result),
        Some("MCP_SERVER_UNAVAILABLE"),
        "{:#}",
        out.result
    );
    assert!(
        !out.result
            .to_string()
            .contains(&*s.env.project_root.to_string_lossy())
    );
}

fn disallowed_servers_and_tools_are_not_available() {
    let mut s = setup(5_000, 10_000);
    for name in [
        "mcp__other__echo",
        "mcp__nowhere__echo",
        "mcp__good__no_such_tool",
        "mcp__good",
        "mcp____",
    ] {
        let out = s.env.call(name, json!({}));
        assert_eq!(
            code(&out.result),
            Some("TOOL_NOT_AVAILABLE"),
            "{name}: {:#}",
            out.result
        );
    }
    s.env.policy.mcp_enabled = false;
    let out = s.env.call("mcp__good__echo", json!({"text": "x"}));
    assert_eq!(code(&out.result), Some("TOOL_NOT_AVAILABLE"));
    assert!(s.env.host.mcp_tools(&s.env.policy).is_empty());
    s.env.policy.mcp_enabled = true;
    s.env.policy.mcp_allowed_servers.clear();
    let out = s.env.call("mcp__good__echo", json!({"text": "x"}));
    assert_eq!(
        code(&out.result),
        Some("TOOL_NOT_AVAILABLE"),
        "an empty list allows no server"
    );
    assert_eq!(s.env.audit().len(), 7);
}

fn no_server_outlives_its_hub() {
    let mut s = setup(5_000, 10_000);
    assert_eq!(
        s.env.call("mcp__good__echo", json!({"text": "a"})).result["ok"],
        true
    );
    let _ = s.hub.tools("other");
    assert!(!servers_alive(&s.marker).is_empty(), "the servers run");
    let marker = s.marker.clone();
    s.hub.shutdown();
    drop(s);
    let started = Instant::now();
    while !servers_alive(&marker).is_empty() {
        assert!(
            // Generous for a loaded 2-core machine (the servers never end by themselves).
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            servers_alive(&marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    if let Ok(mode) = std::env::var(MODE) {
        run_server(&mode);
        return;
    }
    let tests: [(&str, fn()); 7] = [
        (
            "tools_are_listed_with_their_schemas",
            tools_are_listed_with_their_schemas,
        ),
        (
            "a_call_round_trips_and_is_audited",
            a_call_round_trips_and_is_audited,
        ),
        (
            "a_crash_mid_call_is_a_tool_error_and_the_server_comes_back",
            a_crash_mid_call_is_a_tool_error_and_the_server_comes_back,
        ),
        (
            "a_hang_is_a_timeout_within_the_limit",
            a_hang_is_a_timeout_within_the_limit,
        ),
        (
            "a_server_that_never_starts_is_unavailable",
            a_server_that_never_starts_is_unavailable,
        ),
        (
            "disallowed_servers_and_tools_are_not_available",
            disallowed_servers_and_tools_are_not_available,
        ),
        ("no_server_outlives_its_hub", no_server_outlives_its_hub),
    ];
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    let mut ran = 0;
    for (name, test) in tests {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        let started = Instant::now();
        match std::panic::catch_unwind(test) {
            Ok(()) => println!("test {name} ... ok ({:?})", started.elapsed()),
            Err(_) => {
                failed += 1;
                println!("test {name} ... FAILED");
            }
        }
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        ran - failed
    );
    if failed > 0 {
        std::process::exit(101);
    }
}
