//! `baton mcp list`: starts each MCP server of `baton.toml`, and shows its status and tools.

use crate::exit;
use crate::failure::Failure;
use baton_store::Store;
use baton_tools::{McpHub, ToolsConfig};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start the configured MCP servers and list their tools as the model would see them.
    List(McpListArgs),
}

#[derive(Debug, Args)]
pub struct McpListArgs {
    /// The project whose baton.toml is read.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// Print the servers as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: McpCommand) -> anyhow::Result<u8> {
    match cmd {
        McpCommand::List(args) => list(args),
    }
}

fn list(mut args: McpListArgs) -> anyhow::Result<u8> {
    args.project = crate::args::project::root(&args.project);
    let store = Store::open_default()?;
    let config = match ToolsConfig::load(Some(store.home()), Some(&args.project)) {
        Ok(c) => c,
        Err(e) => {
            return Ok(Failure::new(e.code(), e.to_string(), exit::INVALID)
                .hint(Some(e.hint()))
                .report(args.json));
        }
    };
    let hub = McpHub::new(config.mcp.clone(), &args.project);
    let allowed = |id: &str| {
        config.system.mcp_enabled
            && config
                .system
                .mcp_allowed_servers
                .as_ref()
                .is_none_or(|list| list.iter().any(|s| s == id))
    };
    let mut servers = Vec::new();
    let mut failed = 0;
    for (id, server) in &config.mcp.servers {
        let mut entry = json!({
            "id": id,
            "command": server.command,
            "args": server.args,
            "allowed": allowed(id),
        });
        match hub.tools(id) {
            Ok(tools) => {
                entry["status"] = json!("up");
                entry["tools"] = Value::Array(
                    tools
                        .iter()
                        .map(|t| json!({"name": t.name, "original": t.original, "description": t.description}))
                        .collect(),
                );
            }
            Err(e) => {
                failed += 1;
                entry["status"] = json!("error");
                entry["error"] = json!({"code": e.code(), "message": e.to_string()});
            }
        }
        servers.push(entry);
    }
    hub.shutdown();
    let code = if failed == 0 { exit::OK } else { exit::FAILURE };
    if args.json {
        crate::ui::print_json(&json!({"enabled": config.system.mcp_enabled, "servers": servers}))?;
        return Ok(code);
    }
    if servers.is_empty() {
        outln!("no MCP server configured; add [mcp.servers.<id>] command = \"...\" to baton.toml");
        return Ok(code);
    }
    if !config.system.mcp_enabled {
        outln!("MCP is disabled: set [mcp] enabled = true (agents must allow the server too)\n");
    }
    for s in &servers {
        let id = s["id"].as_str().unwrap_or_default();
        let note = if s["allowed"] == true {
            ""
        } else {
            " (not allowed by [mcp] allowed_servers)"
        };
        match s["status"].as_str() {
            Some("up") => {
                let tools = s["tools"].as_array().cloned().unwrap_or_default();
                outln!(
                    "{id}: up, {} tool{}{note}",
                    tools.len(),
                    if tools.len() == 1 { "" } else { "s" }
                );
                for t in tools {
                    // A server's tool descriptions are its own words: escapes shown, not sent.
                    outln!(
                        "  {} {}",
                        crate::ui::table::pad(t["name"].as_str().unwrap_or_default(), 40),
                        crate::ui::visible_line(
                            t["description"]
                                .as_str()
                                .unwrap_or_default()
                                .lines()
                                .next()
                                .unwrap_or_default()
                        )
                    );
                }
            }
            _ => outln!(
                "{id}: error [{}] {}{note}",
                s["error"]["code"].as_str().unwrap_or_default(),
                crate::ui::visible(s["error"]["message"].as_str().unwrap_or_default())
            ),
        }
    }
    Ok(code)
}
