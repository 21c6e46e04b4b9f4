//! baton's git on a model-written tree ([`baton_git::TreeGit`]) confined like every command
//! the model can influence: the same sandbox, with the repository folders git writes made
//! writable and the configuration, hooks and `info/` read-only. No network.

use super::confined::{ConfinedRequest, OutputKeep, open_project_dir, run_confined};
use super::exec::Ended;
use super::project::find_in_path;
use super::runtime::TerminalRuntime;
use crate::policy::TerminalSettings;
use baton_git::{Confine, GIT_FAILED, GitError, Invocation, Output};
use std::ffi::OsString;
use std::time::Duration;

/// Longest a git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// Output kept of one git command (file lists can be long).
const GIT_STDOUT: u64 = 16 * 1024 * 1024;

/// Runs git confined; its commands share a temporary `$HOME`, removed with this value.
pub struct GitSandbox {
    settings: TerminalSettings,
    runtime: TerminalRuntime,
    home: tempfile::TempDir,
}

impl GitSandbox {
    /// `settings` are the project's terminal settings (limits); the network is off whatever
    /// they say. `runtime.store_home` should name baton's store.
    ///
    /// Every layer the machine has is applied, but a missing one does not stop git (as it stops
    /// a model's command under `require_sandbox`): what keeps baton's git from running what the
    /// tree says is its configuration (see `baton-git`); the sandbox is a second wall. A worker
    /// in a container without namespaces still checkpoints.
    pub fn new(
        mut settings: TerminalSettings,
        runtime: TerminalRuntime,
    ) -> Result<GitSandbox, GitError> {
        settings.network = false;
        settings.require_sandbox = false;
        settings.max_stdout_bytes = GIT_STDOUT;
        settings.max_stderr_bytes = 64 * 1024;
        settings.max_output_bytes = settings.max_output_bytes.max(GIT_STDOUT * 2);
        let home =
            super::hidden::temp_home(runtime.temp_root.as_deref(), "baton-git-").map_err(|e| {
                GitError::new(
                    GIT_FAILED,
                    format!("git's temporary directory cannot be created ({})", e.kind()),
                )
            })?;
        Ok(GitSandbox {
            settings,
            runtime,
            home,
        })
    }
}

impl Confine for GitSandbox {
    fn run(&self, inv: &Invocation<'_>) -> Result<Output, GitError> {
        let fail = |e: crate::ToolError| {
            let hint = match e.code {
                "SANDBOX_UNAVAILABLE" | "SANDBOX_SETUP_FAILED" => {
                    "run `baton doctor`; git runs in the project's sandbox like every command the model can influence"
                }
                _ => "install git",
            };
            GitError::new(GIT_FAILED, format!("cannot run git: {}", e.message)).hint(hint)
        };
        let home = self.home.path().to_string_lossy().into_owned();
        let mut env = inv.env.to_vec();
        env.retain(|(k, _)| k != "HOME" && k != "TMPDIR");
        env.push(("HOME".into(), home.clone()));
        env.push(("TMPDIR".into(), home));
        let program = find_in_path("git", &env).map_err(fail)?;
        let mut runtime = self.runtime.clone();
        runtime.extra_writable.extend(inv.writable.iter().cloned());
        runtime.read_only.extend(inv.read_only.iter().cloned());
        let out = run_confined(ConfinedRequest {
            project: inv.work_tree,
            cwd: open_project_dir(inv.cwd).map_err(fail)?,
            program,
            args: inv.args.iter().map(OsString::from).collect(),
            env,
            home: self.home.path(),
            settings: &self.settings,
            allow_git_writes: true,
            protected: &runtime.protected,
            runtime: &runtime,
            timeout: GIT_TIMEOUT,
            output: OutputKeep::Head,
            abort: None,
            shown: "git",
        })
        .map_err(fail)?
        .exec;
        Ok(Output {
            code: match out.ended {
                Ended::Exited(c) => Some(c),
                _ => None,
            },
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use baton_git::{Identity, TreeGit};

    fn repo(dir: &std::path::Path) {
        let run = |args: &[&str]| {
            let out = baton_git::hardening::remote_command(dir)
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
        };
        run(&["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    }

    #[test]
    fn git_runs_with_the_layers_a_machine_has_even_where_a_models_command_would_be_refused() {
        let tmp = tempfile::tempdir().unwrap();
        repo(tmp.path());
        let runtime = TerminalRuntime {
            capabilities: Some(baton_sandbox::Capabilities::none()),
            ..TerminalRuntime::default()
        };
        let settings = TerminalSettings {
            require_sandbox: true,
            ..TerminalSettings::default()
        };
        // A model's command (ProjectShell, the same settings) is refused here...
        let shell =
            super::super::ProjectShell::new(tmp.path(), settings.clone(), false, runtime.clone())
                .unwrap();
        let refused = shell.run("git", &["status"], &[], GIT_TIMEOUT).unwrap_err();
        assert_eq!(refused.code, "SANDBOX_UNAVAILABLE");
        // ... baton's git, whose configuration is what keeps the tree's programs out, runs.
        let sandbox = GitSandbox::new(settings, runtime).unwrap();
        let git = TreeGit::open(tmp.path(), &sandbox, None, Identity::baton()).unwrap();
        git.ok(&["add", "-A"]).unwrap();
        git.ok(&["commit", "-q", "-m", "one"]).unwrap();
        assert_eq!(git.ok(&["log", "--format=%an"]).unwrap().trim(), "baton");
    }

    #[test]
    fn a_project_in_a_folder_of_its_repository_runs_git_from_that_folder() {
        let tmp = tempfile::tempdir().unwrap();
        repo(tmp.path());
        let project = tmp.path().join("apps/web");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("b.txt"), "b\n").unwrap();
        let sandbox =
            GitSandbox::new(TerminalSettings::default(), TerminalRuntime::default()).unwrap();
        let git = TreeGit::open(&project, &sandbox, None, Identity::baton()).unwrap();
        assert_eq!(git.dirs().work_tree, tmp.path().canonicalize().unwrap());
        // Pathspecs are the project's: `.` is the project's folder.
        assert_eq!(
            git.ok(&["ls-files", "--others", "--", "."]).unwrap().trim(),
            "b.txt"
        );
        git.ok(&["add", "-A"]).unwrap();
        git.ok(&["commit", "-q", "-m", "both"]).unwrap();
        let files = git
            .ok(&["ls-tree", "--full-tree", "-r", "--name-only", "HEAD"])
            .unwrap();
        assert_eq!(
            files.lines().collect::<Vec<_>>(),
            ["a.txt", "apps/web/b.txt"]
        );
    }
}
