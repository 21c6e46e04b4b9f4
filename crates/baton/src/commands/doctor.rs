//! `baton doctor`: which sandbox layers this kernel enforces for `terminal.run`, whether the
//! project's settings would let a command run, and the configured model's checks (those of
//! `baton models check`).

use crate::commands::models;
use crate::exit;
use crate::failure::Failure;
use crate::ui::visible;
use baton_llm::LlmOverrides;
use baton_llm::probe::{ProbeOptions, Report};
use baton_sandbox::capabilities;
use baton_store::Store;
use baton_tools::{EffectivePolicy, TerminalRuntime, ToolsConfig};
use clap::Args;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The project whose baton.toml is read.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Do not check the configured model (the check spends a few small requests).
    #[arg(long)]
    pub no_model: bool,
}

/// The model section: the checks, or why there are none.
enum ModelSection {
    Checked(Report),
    NotChecked {
        reason: String,
        hint: Option<String>,
        /// The configuration is broken (not merely absent or skipped).
        failed: bool,
    },
}

impl ModelSection {
    fn failed(&self) -> bool {
        match self {
            ModelSection::Checked(r) => r.failed(),
            ModelSection::NotChecked { failed, .. } => *failed,
        }
    }

    fn json(&self) -> Value {
        match self {
            ModelSection::Checked(r) => {
                let mut v = json!({"checked": true});
                if let (Some(o), Ok(Value::Object(report))) =
                    (v.as_object_mut(), serde_json::to_value(r))
                {
                    o.extend(report);
                }
                v
            }
            ModelSection::NotChecked { reason, hint, .. } => {
                json!({"checked": false, "reason": reason, "hint": hint})
            }
        }
    }
}

/// The configuration as a run would load it; `on_checking` is told the model before the
/// (slow) checks start.
fn model_section(args: &DoctorArgs, home: &Path, on_checking: impl Fn(&Report)) -> ModelSection {
    if args.no_model {
        return ModelSection::NotChecked {
            reason: "not checked (--no-model)".into(),
            hint: Some("`baton models check` checks it".into()),
            failed: false,
        };
    }
    let config = match models::load_config(home, &args.project, &LlmOverrides::default()) {
        Ok(c) => c,
        Err(f) => {
            return ModelSection::NotChecked {
                reason: format!("[{}] {}", f.code, f.message),
                hint: f.hint,
                failed: true,
            };
        }
    };
    let Some(name) = config.model.clone() else {
        return ModelSection::NotChecked {
            reason: "no model configured".into(),
            hint: Some(
                "set BATON_MODEL, or model = \"...\" under [llm] in baton.toml (with its key in \
                 OPENAI_API_KEY, its endpoint in OPENAI_BASE_URL or base_url), then `baton models \
                 check`"
                    .into(),
            ),
            failed: false,
        };
    };
    on_checking(&Report {
        model: name,
        endpoint: config.endpoint_shown(),
        api: config.api.as_str().into(),
        checks: Vec::new(),
    });
    match models::probe_model(&config, ProbeOptions::default()) {
        Ok(r) => ModelSection::Checked(r),
        Err(f) => ModelSection::NotChecked {
            reason: format!("[{}] {}", f.code, f.message),
            hint: f.hint,
            failed: true,
        },
    }
}

pub fn run(mut args: DoctorArgs) -> anyhow::Result<u8> {
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
    let mut report = json!({
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
    // The coding-agent CLIs (`executor = "claude-code"`, …): found, and at which version.
    let executors = baton_executor::check::load_configs(&args.project)
        .map(|c| baton_executor::check::survey(&c))
        .map_err(|e| json!({"code": e.code(), "message": e.to_string(), "hint": e.hint()}));
    report["executors"] = match &executors {
        Ok(found) => json!(found),
        Err(e) => json!({"error": e}),
    };
    if args.json {
        let model = model_section(&args, store.home(), |_| {});
        report["model"] = model.json();
        crate::ui::print_json(&report)?;
        return Ok(if model.failed() {
            exit::FAILURE
        } else {
            exit::OK
        });
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
    match &executors {
        Ok(found) => {
            outln!(
                "executors (coding-agent CLIs; `baton executors check NAME` runs a one-file task):"
            );
            crate::commands::executors::print_survey(found);
        }
        Err(e) => outln!("executors: {}", visible(&e.to_string())),
    }
    if sources.is_empty() {
        outln!("config: no baton.toml found (defaults)");
    } else {
        outln!("config: {}", sources.join(", "));
    }
    // Last: it is the slow part, and it spends tokens.
    let model = model_section(&args, store.home(), |r| {
        outln!(
            "model: {} at {} (api {})",
            visible(&r.model),
            r.endpoint,
            r.api
        );
    });
    match &model {
        ModelSection::Checked(r) => models::print_checks(r),
        ModelSection::NotChecked { reason, hint, .. } => {
            outln!("model: {}", visible(reason));
            if let Some(h) = hint {
                outln!("  help: {}", visible(h));
            }
        }
    }
    Ok(if model.failed() {
        exit::FAILURE
    } else {
        exit::OK
    })
}
