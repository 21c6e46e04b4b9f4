//! `terminal.run` and `shell.exec`: a command in the project, without a shell (unless
//! `shell.exec` is allowed), in a clean environment, inside the sandbox of `baton-sandbox`,
//! with capped output and a deadline. Results never name a host path: the project root reads
//! `@project` and the run's temporary home `$HOME`.

mod command;
mod confined;
mod exec;
mod git;
mod guard;
mod hidden;
mod project;
mod protected;
mod runtime;
mod tool;

pub use confined::{
    ConfinedOutput, ConfinedRequest, OutputKeep, base_environment, open_project_dir, readiness,
    run_confined,
};
pub use exec::{Ended, ExecOutput};
pub use git::GitSandbox;
pub use guard::ProjectGuard;
pub use hidden::{hide_from_commands, set_command_temp_root};
pub use project::ProjectShell;
pub use protected::CONFIG_FILE;
pub use runtime::TerminalRuntime;
pub use tool::Terminal;
