//! The `[autopilot]` table of the project's `baton.toml`:
//!
//! ```toml
//! [autopilot]
//! implementation_artifacts = "_bmad-output/implementation-artifacts"
//! max_review_cycles = 3
//!
//! pipeline = ["build", "code-review"]  # optional: the phases in run order (default: what the
//!                                 # installed BMAD method implies, see `pipeline`)
//! retrospective = true            # run the installed bmad-retrospective once an epic is done
//!
//! [autopilot.phases.dev]          # create-story, validate, dev, build, revision, code-review
//! package = "path/to/package"     # a directory or .bmad, or an installed package name
//! workflow = "dev-story"
//! agent = "dev"
//!
//! [autopilot.phases.code-review]
//! skill = "bmad-code-review"      # an installed BMAD skill or classic workflow (or its folder)
//! ```
//!
//! Without a `package` or `skill`, a phase runs the project's installed BMAD method when it has
//! one for that phase (see [`super::method`]), else the bundled `bmad-phase4`.
//! `render = "auto" | "uv" | "baton"` says how an installed skill is rendered (`auto`: BMAD's
//! `render_skill.py` with `uv` when `uv` is on PATH, else baton resolves it itself).
//!
//! ```toml
//! [autopilot.verify]
//! commands = ["cargo test"]       # each run with `sh -c` in the project
//! timeout_s = 900
//! max_attempts = 3                # verify failures sent back to dev before the loop pauses
//!
//! [autopilot.git]
//! commit = true
//!
//! [autopilot.publish]             # see `baton_worktree::publish`
//! push = true                     # each approved story's branch baton/<epic>/<story>
//! remote = "origin"               # a remote's name or a URL
//! command = "gh pr create --fill --head {branch} --base {base}"
//! command_timeout_s = 120
//! done_when = "approved"          # or "merged": done once the remote's base has it
//! ```

use super::error::{EpicError, Result};
use baton_bmad::phase::Phase;
use baton_executor::ExecutorKind;
use baton_executor::config::ExecutorConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

pub const CONFIG_FILE: &str = "baton.toml";
pub const DEFAULT_MAX_REVIEW_CYCLES: u32 = 3;
pub const DEFAULT_VERIFY_TIMEOUT_S: u64 = 900;
pub const DEFAULT_VERIFY_ATTEMPTS: u32 = 3;
pub const DEFAULT_PUBLISH_TIMEOUT_S: u64 = 120;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseConfig {
    pub package: Option<String>,
    pub workflow: Option<String>,
    pub agent: Option<String>,
    /// An installed BMAD skill or classic workflow, by name or project-relative folder.
    pub skill: Option<String>,
    /// Who runs the phase: `baton` (its own tool loop) or a coding-agent CLI (`claude-code`,
    /// `codex`, `opencode`); default `[autopilot] executor`.
    pub executor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyConfig {
    #[serde(default)]
    pub commands: Vec<String>,
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            commands: Vec::new(),
            timeout_s: DEFAULT_VERIFY_TIMEOUT_S,
            max_attempts: DEFAULT_VERIFY_ATTEMPTS,
        }
    }
}

fn default_timeout() -> u64 {
    DEFAULT_VERIFY_TIMEOUT_S
}

fn default_attempts() -> u32 {
    DEFAULT_VERIFY_ATTEMPTS
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitConfig {
    #[serde(default)]
    pub commit: bool,
}

/// When a published story is done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DoneWhen {
    /// Its code review approved it (as without publishing).
    #[default]
    Approved,
    /// The remote's base branch contains its commit.
    Merged,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishConfig {
    #[serde(default)]
    pub push: bool,
    #[serde(default = "default_remote")]
    pub remote: String,
    /// The operator's own command, run after the push (placeholders filled in, quoted).
    pub command: Option<String>,
    #[serde(default = "default_publish_timeout")]
    pub command_timeout_s: u64,
    #[serde(default)]
    pub done_when: DoneWhen,
}

impl Default for PublishConfig {
    fn default() -> Self {
        PublishConfig {
            push: false,
            remote: default_remote(),
            command: None,
            command_timeout_s: DEFAULT_PUBLISH_TIMEOUT_S,
            done_when: DoneWhen::Approved,
        }
    }
}

fn default_remote() -> String {
    "origin".to_string()
}

fn default_publish_timeout() -> u64 {
    DEFAULT_PUBLISH_TIMEOUT_S
}

impl PublishConfig {
    /// Stories done only once merged on the remote.
    pub fn waits_for_merge(&self) -> bool {
        self.push && self.done_when == DoneWhen::Merged
    }

    fn check(&self) -> Result<()> {
        let at = |m: String| invalid(format!("{CONFIG_FILE}: [autopilot.publish] {m}"));
        if !self.push && (self.command.is_some() || self.done_when == DoneWhen::Merged) {
            return Err(at(
                "command and done_when = \"merged\" need push = true (they act on the pushed branch)".into(),
            ));
        }
        let remote = self.remote.trim();
        if remote.is_empty() || remote.starts_with('-') {
            return Err(at(format!(
                "remote = {:?} is not a remote's name or URL",
                self.remote
            )));
        }
        if self.command_timeout_s == 0 {
            return Err(at("command_timeout_s must be at least 1".into()));
        }
        if let Some(c) = &self.command {
            if c.trim().is_empty() {
                return Err(at("command is empty".into()));
            }
            baton_worktree::publish::check_template(c).map_err(|m| at(format!("command: {m}")))?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutopilotConfig {
    pub implementation_artifacts: Option<String>,
    /// How installed BMAD skills are rendered: `auto` (default), `uv` or `baton`.
    pub render: Option<String>,
    #[serde(default = "default_cycles")]
    pub max_review_cycles: u32,
    #[serde(default)]
    pub phases: BTreeMap<String, PhaseConfig>,
    #[serde(default)]
    pub verify: VerifyConfig,
    #[serde(default)]
    pub git: GitConfig,
    /// `[autopilot.publish]`: approved stories' branches pushed, a pull request command, done
    /// when merged.
    #[serde(default)]
    pub publish: PublishConfig,
    /// `parallel = N` or `[autopilot.parallel]`: stories in flight at once (see
    /// [`super::parallel`]).
    #[serde(default)]
    pub parallel: super::schedule::ParallelConfig,
    /// Where story worktrees are kept (relative to the project; default: beside the store).
    pub worktrees: Option<String>,
    /// The phases in run order; `None`: what the installed BMAD method implies.
    pub pipeline: Option<Vec<String>>,
    /// Run the installed `bmad-retrospective` once an epic's stories are done.
    #[serde(default)]
    pub retrospective: bool,
    /// Who runs the phases (default `baton`); see [`AutopilotConfig::executor_for`].
    pub executor: Option<String>,
    /// `[executors.<name>]` (top level of `baton.toml`): how each coding-agent CLI is run.
    #[serde(skip)]
    pub executors: BTreeMap<ExecutorKind, ExecutorConfig>,
}

fn default_cycles() -> u32 {
    DEFAULT_MAX_REVIEW_CYCLES
}

impl Default for AutopilotConfig {
    fn default() -> Self {
        AutopilotConfig {
            implementation_artifacts: None,
            render: None,
            max_review_cycles: DEFAULT_MAX_REVIEW_CYCLES,
            phases: BTreeMap::new(),
            verify: VerifyConfig::default(),
            git: GitConfig::default(),
            publish: PublishConfig::default(),
            parallel: super::schedule::ParallelConfig::default(),
            worktrees: None,
            pipeline: None,
            retrospective: false,
            executor: None,
            executors: BTreeMap::new(),
        }
    }
}

#[derive(Deserialize)]
struct FileToml {
    autopilot: Option<AutopilotConfig>,
}

/// An executor name of `key` (`[autopilot] executor`, a phase's, `--executor`).
pub fn parse_executor(key: &str, name: &str) -> Result<ExecutorKind> {
    ExecutorKind::parse(name.trim()).ok_or_else(|| {
        EpicError::usage(
            "EPIC_CONFIG_INVALID",
            format!("{key} = {name:?} is not an executor"),
        )
        .hint("the executors are baton (its own tool loop), claude-code, codex and opencode")
    })
}

fn invalid(message: String) -> EpicError {
    EpicError::usage("EPIC_CONFIG_INVALID", message)
        .hint("see docs/autopilot.md for the [autopilot] settings")
}

impl AutopilotConfig {
    /// The project's `baton.toml` `[autopilot]` table; defaults without one.
    pub fn load(project: &Path) -> Result<AutopilotConfig> {
        let root = baton_autopilot::untrusted::open_root(project)
            .map_err(|e| EpicError::io("open", project)(e))?;
        let limit = baton_autopilot::untrusted::limit::CONFIG;
        match baton_autopilot::untrusted::read_in(&root, Path::new(CONFIG_FILE), limit) {
            Ok(Some(bytes)) => AutopilotConfig::parse(&String::from_utf8_lossy(&bytes)),
            Ok(None) => Ok(AutopilotConfig::default()),
            Err(e) => Err(baton_bmad::error::refused(CONFIG_FILE, &e)),
        }
    }

    pub fn parse(text: &str) -> Result<AutopilotConfig> {
        let file: FileToml = toml::from_str(text)
            .map_err(|e| invalid(format!("{CONFIG_FILE}: {}", e.to_string().trim())))?;
        let mut config = file.autopilot.unwrap_or_default();
        let doc: toml::Table = toml::from_str(text)
            .map_err(|e| invalid(format!("{CONFIG_FILE}: {}", e.to_string().trim())))?;
        config.executors = baton_executor::config::read_executors(&doc, Path::new(CONFIG_FILE))
            .map_err(|e| EpicError::usage(e.code(), e.to_string()).hint(e.hint()))?;
        if let Some(name) = &config.executor {
            parse_executor(&format!("{CONFIG_FILE}: [autopilot] executor"), name)?;
        }
        for (name, phase) in &config.phases {
            if let Some(e) = &phase.executor {
                parse_executor(
                    &format!("{CONFIG_FILE}: [autopilot.phases.{name}] executor"),
                    e,
                )?;
            }
            if Phase::parse(name).is_none() {
                return Err(invalid(format!(
                    "{CONFIG_FILE}: [autopilot.phases.{name}] is not a phase; the phases are create-story, validate, dev, build, revision, code-review"
                )));
            }
            if phase.skill.is_some()
                && (phase.package.is_some() || phase.workflow.is_some() || phase.agent.is_some())
            {
                return Err(invalid(format!(
                    "{CONFIG_FILE}: [autopilot.phases.{name}] names a skill and a package (package, workflow, agent); give one of them"
                )));
            }
            if phase.skill.as_deref().is_some_and(|s| s.trim().is_empty()) {
                return Err(invalid(format!(
                    "{CONFIG_FILE}: [autopilot.phases.{name}] skill is empty"
                )));
            }
        }
        if let Some(names) = &config.pipeline {
            super::pipeline::Pipeline::configured(names)?;
        }
        if let Some(r) = &config.render
            && !matches!(r.as_str(), "auto" | "uv" | "baton")
        {
            return Err(invalid(format!(
                "{CONFIG_FILE}: [autopilot] render = {r:?}; expected \"auto\", \"uv\" or \"baton\""
            )));
        }
        if config.max_review_cycles == 0 {
            return Err(invalid(format!(
                "{CONFIG_FILE}: [autopilot] max_review_cycles must be at least 1"
            )));
        }
        if config.verify.timeout_s == 0 {
            return Err(invalid(format!(
                "{CONFIG_FILE}: [autopilot.verify] timeout_s must be at least 1"
            )));
        }
        config.publish.check()?;
        if let Some(i) = config
            .verify
            .commands
            .iter()
            .position(|c| c.trim().is_empty())
        {
            return Err(invalid(format!(
                "{CONFIG_FILE}: [autopilot.verify] commands[{i}] is empty"
            )));
        }
        Ok(config)
    }

    pub fn phase(&self, phase: Phase) -> PhaseConfig {
        self.phases.get(phase.as_str()).cloned().unwrap_or_default()
    }

    /// Who runs `phase`: its own `executor`, else `[autopilot] executor` (which `--executor`
    /// replaces), else baton's tool loop. Names were checked when the file was read.
    pub fn executor_for(&self, phase: Phase) -> ExecutorKind {
        self.phases
            .get(phase.as_str())
            .and_then(|p| p.executor.as_deref())
            .or(self.executor.as_deref())
            .and_then(|n| ExecutorKind::parse(n.trim()))
            .unwrap_or(ExecutorKind::Baton)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_a_full_table() {
        assert_eq!(
            AutopilotConfig::parse("").unwrap(),
            AutopilotConfig::default()
        );
        let c = AutopilotConfig::parse(
            "model = \"x\"\n[autopilot]\nmax_review_cycles = 2\n[autopilot.phases.dev]\nworkflow = \"dev-story\"\n[autopilot.verify]\ncommands = [\"true\"]\n[autopilot.git]\ncommit = true\n",
        )
        .unwrap();
        assert_eq!(c.max_review_cycles, 2);
        assert_eq!(c.phase(Phase::Dev).workflow.as_deref(), Some("dev-story"));
        assert!(c.git.commit);
        assert_eq!(c.verify.timeout_s, DEFAULT_VERIFY_TIMEOUT_S);
    }

    #[test]
    fn publishing_is_read_and_its_mistakes_named() {
        let c = AutopilotConfig::parse(
            "[autopilot.publish]\npush = true\ncommand = \"gh pr create --head {branch} --base {base} --title {title}\"\ndone_when = \"merged\"\n",
        )
        .unwrap();
        assert!(c.publish.waits_for_merge());
        assert_eq!(c.publish.remote, "origin");
        assert_eq!(c.publish.command_timeout_s, DEFAULT_PUBLISH_TIMEOUT_S);
        assert!(!AutopilotConfig::default().publish.push);
        let err = |text: &str| AutopilotConfig::parse(text).unwrap_err();
        let e = err("[autopilot.publish]\npush = true\ndone_when = \"closed\"\n");
        assert_eq!(e.code, "EPIC_CONFIG_INVALID");
        assert!(
            e.message.contains("closed") && e.message.contains("line 3"),
            "{e}"
        );
        let e = err("[autopilot.publish]\ncommand = \"gh pr create\"\n");
        assert!(
            e.message.contains("[autopilot.publish]") && e.message.contains("push = true"),
            "{e}"
        );
        let e = err("[autopilot.publish]\npush = true\ncommand = \"echo {pr}\"\n");
        assert!(
            e.message.contains("command: {pr} is not a placeholder"),
            "{e}"
        );
        let e = err("[autopilot.publish]\npush = true\ncommand = \"echo \\\"{title}\\\"\"\n");
        assert!(e.message.contains("inside quotes"), "{e}");
        let e = err("[autopilot.publish]\npush = true\nremote = \"--upload-pack=x\"\n");
        assert!(e.message.contains("remote"), "{e}");
        let e = err("[autopilot.publish]\npush = true\ncommand_timeout_s = 0\n");
        assert!(e.message.contains("command_timeout_s"), "{e}");
        let e = err("[autopilot.publish]\npush = true\nbranch = \"x\"\n");
        assert!(e.message.contains("branch"), "{e}");
    }

    #[test]
    fn mistakes_are_named() {
        let e =
            AutopilotConfig::parse("[autopilot.phases.deploy]\nworkflow = \"x\"\n").unwrap_err();
        assert_eq!(e.code, "EPIC_CONFIG_INVALID");
        assert!(e.message.contains("deploy"), "{e}");
        let e = AutopilotConfig::parse("[autopilot]\nmax_cycles = 2\n").unwrap_err();
        assert!(e.message.contains("max_cycles"), "{e}");
        let e = AutopilotConfig::parse(
            "[autopilot.phases.dev]\nskill = \"bmad-build-auto\"\npackage = \"x\"\n",
        )
        .unwrap_err();
        assert!(e.message.contains("skill and a package"), "{e}");
        let e = AutopilotConfig::parse("[autopilot]\nrender = \"python\"\n").unwrap_err();
        assert!(e.message.contains("render"), "{e}");
        let c = AutopilotConfig::parse(
            "[autopilot]\nrender = \"baton\"\n[autopilot.phases.dev]\nskill = \"bmad-build-auto\"\n",
        )
        .unwrap();
        assert_eq!(
            c.phase(Phase::Dev).skill.as_deref(),
            Some("bmad-build-auto")
        );
    }
}
