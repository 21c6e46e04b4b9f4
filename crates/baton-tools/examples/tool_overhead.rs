//! What `terminal.run` and MCP calls cost on top of the work they do.
//!
//! `cargo run --release -p baton-tools --example tool_overhead [-- N]`
//!
//! - `/bin/true` spawned plainly (pipes for stdout/stderr, stdin closed) against the same
//!   program through `terminal.run` (policy, working directory, the sandbox with every layer
//!   this kernel has, output threads, process-group kill, audit line), and through the sandbox
//!   alone;
//! - an MCP `echo` call made directly with an rmcp client against the same call through the
//!   ToolHost (`mcp__bench__echo`: policy, the client thread, result bounds, audit line).
//!
//! The example is its own MCP server when `BATON_BENCH_MCP_SERVER` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::Package;
use baton_sandbox::{Confinement, Limits, SandboxSpec, capabilities};
use baton_store::{NewRun, Store};
use baton_testkit::{repo, sample_project};
use baton_tools::{
    CallContext, EffectivePolicy, McpConfig, McpHub, McpServerConfig, RunBinding,
    SystemToolSettings, TerminalSettings, ToolCall, ToolHost, ToolRuntime,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::TokioChildProcess;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SERVER: &str = "BATON_BENCH_MCP_SERVER";

struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "echo",
            "Echoes its text",
            Arc::new(schema.as_object().cloned().unwrap_or_default()),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .and_then(|a| a.get("text").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

fn stats(name: &str, mut samples: Vec<Duration>, baseline: Option<f64>) -> f64 {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = ms(samples[samples.len() / 2]);
    let p95 = ms(samples[samples.len() * 95 / 100]);
    let vs = baseline.map_or("—".to_string(), |b| format!("+{:.2} ms", median - b));
    println!("| {name} | {median:.2} ms | {p95:.2} ms | {vs} |");
    median
}

fn time(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..5 {
        f();
    }
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

fn main() {
    if std::env::var_os(SERVER).is_some() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            if let Ok(s) = Echo.serve(rmcp::transport::stdio()).await {
                let _ = s.waiting().await;
            }
        });
        return;
    }
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let tmp = tempfile::tempdir().expect("tempdir");
    let project_root = sample_project(tmp.path());
    let store = Store::new(tmp.path().join("home"));
    let package =
        Package::load(&repo().join("examples/packages/create-story-micro")).expect("package");
    let installed = store
        .packages()
        .install(&package, "bench")
        .expect("install")
        .package;
    let project = store.project(&project_root).expect("project");
    let run = project
        .create_run(NewRun {
            package: &package,
            installed: &installed,
            workflow_ref: None,
            agent_id: "sm",
        })
        .expect("run");
    let paths = project.run_paths(&run.run_id);
    let mut host = ToolHost::open(
        &project_root,
        &installed.path,
        &paths.state_dir,
        &paths.execution_log,
        RunBinding {
            run_id: run.run_id.clone(),
            graph: package.workflows()[0].graph.clone(),
            state: project.state_file(&run.run_id),
            artifacts_dir: "artifacts".into(),
        },
    )
    .expect("host");
    let exe = std::env::current_exe().expect("exe");
    let hub = McpHub::new(
        McpConfig {
            servers: BTreeMap::from([(
                "bench".to_string(),
                McpServerConfig {
                    command: exe.to_string_lossy().into_owned(),
                    args: vec![],
                    env: BTreeMap::from([(SERVER.to_string(), "1".to_string())]),
                    cwd: None,
                },
            )]),
            ..McpConfig::default()
        },
        &project_root,
    );
    host.set_runtime(ToolRuntime {
        mcp: Some(hub.clone()),
        ..ToolRuntime::default()
    });
    let mut policy = EffectivePolicy::merge(&SystemToolSettings::default(), None);
    policy.terminal = TerminalSettings {
        enabled: true,
        ..TerminalSettings::default()
    };
    policy.mcp_enabled = true;
    policy.mcp_allowed_servers = vec!["bench".into()];
    let caps = capabilities();
    println!("kernel layers: {caps:?}; {n} samples each\n");
    println!("| what | median | p95 | added |");
    println!("|---|---|---|---|");

    let plain = stats(
        "`/bin/true`, plain spawn (baseline)",
        time(n, || {
            let out = Command::new("/bin/true")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output()
                .expect("true");
            assert!(out.status.success());
        }),
        None,
    );
    let home = tempfile::tempdir().expect("home");
    let spec = SandboxSpec {
        writable: vec![project_root.clone(), home.path().to_path_buf()],
        read_denied: vec![tmp.path().join("home")],
        read_only: vec![],
        network: false,
        limits: Limits::default(),
        enforce: true,
        ..SandboxSpec::default()
    };
    stats(
        "`/bin/true` in the sandbox only (prepare + spawn)",
        time(n, || {
            let c = Confinement::prepare(&spec, caps).expect("sandbox");
            let mut cmd = Command::new("/bin/true");
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            c.install(&mut cmd, None);
            assert!(cmd.output().expect("true").status.success());
        }),
        Some(plain),
    );
    let mut id = 0;
    let mut call = |host: &mut ToolHost, name: &str, args: &Value| -> Value {
        id += 1;
        let call_id = format!("b{id}");
        let arguments = args.to_string();
        host.execute(
            ToolCall {
                id: &call_id,
                name,
                arguments: &arguments,
            },
            CallContext {
                agent_id: "sm",
                node_id: "step-01-select-story",
                policy: &policy,
            },
        )
        .result
    };
    stats(
        "`terminal.run {command: \"true\"}` through the ToolHost",
        time(n, || {
            let r = call(&mut host, "terminal.run", &json!({"command": "true"}));
            assert_eq!(r["exitCode"], 0, "{r}");
        }),
        Some(plain),
    );

    // MCP: a direct rmcp client, then the same server through the ToolHost.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let direct = rt.block_on(async {
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.env(SERVER, "1");
        let transport = TokioChildProcess::new(cmd).expect("server");
        ().serve(transport).await.expect("handshake")
    });
    let direct_median = stats(
        "MCP `echo`, direct rmcp client (baseline)",
        time(n, || {
            rt.block_on(async {
                let params = CallToolRequestParams::new("echo").with_arguments(
                    json!({"text": "hi"})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                );
                direct.call_tool(params).await.expect("call");
            })
        }),
        None,
    );
    stats(
        "`mcp__bench__echo` through the ToolHost",
        time(n, || {
            let r = call(&mut host, "mcp__bench__echo", &json!({"text": "hi"}));
            assert_eq!(r["content"], "hi", "{r}");
        }),
        Some(direct_median),
    );
    rt.block_on(async {
        let _ = direct.cancel().await;
    });
    hub.shutdown();
}
