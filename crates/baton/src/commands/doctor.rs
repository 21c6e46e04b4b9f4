//! `baton doctor`: which sandbox layers this kernel enforces for `terminal.run`, and whether the
//! project's settings would let a command run.

use crate::exit;
use crate::failure::Failure;
use baton_sandbox::capabilities;
use baton_store::Store;
use baton_tools::{EffectivePolicy, TerminalRuntime, ToolsConfig};
use clap::Args;
use serde_json::{Value, json};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The project whose baton.toml is read.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DoctorArgs) -> anyhow::Result<u8> {
    let store = Store::open_default()?;
    let config = match ToolsConfig::load(Some(store.home()), Some(&args.project)) {
        Ok(c) => c,
        Err(e) => {
            return Ok(Failure::new(e.code(), e.to_string(), exit::INVALID)
                .hint(Some(e.hint()))
                .report(args.json));
        }
    };
    let caps = capabilities();
    let layers: Vec<Value> = caps
        .layers()
        .iter()
        .map(|l| json!({"layer": l.layer.as_str(), "available": l.available, "how": l.how}))
        .collect();
    // The operator's ceiling as an agent that asks for everything would get it.
    let mut policy = EffectivePolicy::merge(&config.system, None);
    policy.terminal = config.system.terminal.clone();
    let t = &policy.terminal;
    let runtime = TerminalRuntime {
        store_home: Some(store.home().to_path_buf()),
        ..TerminalRuntime::default()
    };
    let verdict = baton_tools::terminal::readiness(&args.project, &policy, &runtime, caps);
    let (would_run, detail) = match &verdict {
        Ok(applied) => (true, json!(applied)),
        Err(e) => (
            false,
            json!({"code": e.code(), "message": e.to_string(), "hint": e.hint()}),
        ),
    };
    let sources: Vec<String> = config
        .sources
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    // Set in `main`: MCP servers (outside the sandbox) cannot read baton's memory or
    // environment, where the API key is.
    let dumpable = baton_sandbox::dumpable();
    let report = json!({
        "os": caps.os,
        "root": caps.root,
        "layers": layers,
        "process": {"dumpable": dumpable},
        "terminal": {
            "enabled": t.enabled,
            "network": t.network,
            "requireSandbox": t.require_sandbox,
            "allowShellExec": t.allow_shell_exec,
            "timeoutMs": t.timeout_ms,
            "homeReadable": t.home_readable,
            "unixSockets": t.unix_sockets,
            "wouldRun": would_run,
            "sandbox": detail,
        },
        "mcp": {
            "enabled": config.system.mcp_enabled,
            "servers": config.mcp.servers.keys().collect::<Vec<_>>(),
            "allowedServers": config.system.mcp_allowed_servers,
        },
        "configFiles": sources,
    });
    if args.json {
        crate::ui::print_json(&report)?;
        return Ok(exit::OK);
    }
    outln!(
        "sandbox of terminal.run on this system ({}{}):",
        caps.os,
        if caps.root { ", running as root" } else { "" }
    );
    for l in caps.layers() {
        outln!(
            "  {:<16} {:<4} {}",
            l.layer.as_str(),
            if l.available { "yes" } else { "no" },
            l.how
        );
    }
    outln!(
        "  {:<16} {:<4} non-dumpable: MCP servers cannot read its memory or /proc/<pid>/environ (the key) without CAP_SYS_PTRACE",
        "baton itself",
        if dumpable == Some(false) { "yes" } else { "no" },
    );
    outln!();
    let state = if t.enabled { "enabled" } else { "disabled" };
    outln!(
        "terminal: {state} (network {}, sandbox {}, shell.exec {})",
        if t.network { "on" } else { "off" },
        if t.require_sandbox {
            "required"
        } else {
            "best effort"
        },
        if t.allow_shell_exec { "on" } else { "off" }
    );
    match &verdict {
        Ok(applied) => outln!(
            "  a command in {} would run with: {}",
            args.project.display(),
            applied.join(", ")
        ),
        Err(e) => {
            outln!("  a command would be refused: [{}] {e}", e.code());
            outln!("  help: {}", e.hint());
        }
    }
    if !t.enabled {
        outln!(
            "  turn it on with [tools.terminal] enabled = true in baton.toml (agents must ask for it too)"
        );
    }
    let servers: Vec<&String> = config.mcp.servers.keys().collect();
    outln!(
        "mcp: {} ({} server{} configured{}); `baton mcp list` starts them and lists their tools",
        if config.system.mcp_enabled {
            "enabled"
        } else {
            "disabled"
        },
        servers.len(),
        if servers.len() == 1 { "" } else { "s" },
        if servers.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                servers
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    if sources.is_empty() {
        outln!("config: no baton.toml found (defaults)");
    } else {
        outln!("config: {}", sources.join(", "));
    }
    Ok(exit::OK)
}
