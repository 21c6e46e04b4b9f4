//! `[autopilot.publish]`: an approved story's commit is put on its own branch
//! (`baton/<epic>/<story>`), pushed to the operator's remote, and the operator's own command
//! (a forge's CLI opening a pull request) runs after the push. With `done_when = "merged"` the
//! story waits until the remote's base branch contains its commit.
//!
//! What is kept, `.baton-epic-publish.json` in the artifacts folder ([`Ledger`]): each story's
//! branch, commit, base, how far publishing got and its last error, so a failed push or command
//! is retried on resume and a story is never lost between approval and merge.
//!
//! **git and credentials.** The branch is made with the confined git of [`crate::git`]. Pushing
//! and fetching need the network and the person's credentials, so they run unconfined through
//! [`baton_git::hardening::remote_command`], on the repository folder only (`--git-dir`, no work
//! tree), after checking that no configuration git reads includes a file of the tree. They get
//! the person's git configuration (`~/.gitconfig`, the system's, the repository's: remotes,
//! `url.*.insteadOf`, credential helpers, ssh settings) and the environment ssh and https need
//! (`SSH_AUTH_SOCK`, proxies, certificates), never hooks (a `pre-push` hook does not run),
//! fsmonitor or submodule recursion, nor baton's secrets.
//!
//! **The command** is the operator's own: it runs with `sh -c` in the project, not confined (it
//! needs the forge's credentials and the network), with the operator's environment less model
//! keys (`*_API_KEY`), baton's own variables (`BATON_*`) and database settings (`DATABASE_URL`,
//! `PG*`). Every value filled in is shell-quoted ([`quote`]), so a story title cannot add to the
//! command; a placeholder the template itself puts in quotes is refused ([`check_template`]).

use super::error::{EpicError, Result};
use baton_bmad::layout::Artifacts;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const FILE_NAME: &str = ".baton-epic-publish.json";
/// The placeholders a command may use.
pub const PLACEHOLDERS: [&str; 5] = ["branch", "base", "story", "epic", "title"];
/// Bytes of the command's output kept in the story's record (its tail).
pub const OUTPUT_BYTES: usize = 4000;
/// Largest ledger read.
const LEDGER_LIMIT: u64 = 4 << 20;

pub const PUSH_FAILED: &str = "EPIC_PUBLISH_PUSH_FAILED";
pub const COMMAND_FAILED: &str = "EPIC_PUBLISH_COMMAND_FAILED";
pub const CHECK_FAILED: &str = "EPIC_PUBLISH_CHECK_FAILED";

/// How far a story's publishing got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Approved and committed; not pushed yet (or the push failed).
    Approved,
    /// On the remote; the command has not run yet (or failed).
    Pushed,
    /// Pushed and the command ran: waiting for the merge when that is what done means.
    Published,
    /// The remote's base branch contains the story's commit.
    Merged,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Approved => "approved",
            State::Pushed => "pushed",
            State::Published => "published",
            State::Merged => "merged",
        }
    }
}

/// A failure of publishing, as the board shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub hint: Option<String>,
}

impl From<&EpicError> for Failure {
    fn from(e: &EpicError) -> Failure {
        Failure {
            code: e.code.to_string(),
            message: e.message.clone(),
            hint: e.hint.clone(),
        }
    }
}

/// The last run of the operator's command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandRun {
    /// The command as it ran (values filled in, quoted).
    pub command: String,
    /// Its exit code; `None`: killed (timed out) or not started.
    pub exit: Option<i32>,
    pub timed_out: bool,
    /// The tail of its output (stdout, then stderr).
    pub output: String,
}

impl CommandRun {
    pub fn ok(&self) -> bool {
        self.exit == Some(0) && !self.timed_out
    }
}

/// One story's publishing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Story {
    pub story: String,
    pub epic: String,
    pub title: String,
    pub branch: String,
    pub base: String,
    pub commit: String,
    pub state: State,
    /// `done_when = "merged"`: the story is done only once merged.
    pub wait_merge: bool,
    pub command: Option<CommandRun>,
    /// The last URL the command printed (the pull request).
    pub url: Option<String>,
    /// Why publishing (or the merge check) stopped last; cleared by a success.
    pub error: Option<Failure>,
}

impl Story {
    /// Still to be pushed or to run the command.
    pub fn unpublished(&self) -> bool {
        matches!(self.state, State::Approved | State::Pushed)
    }

    /// Not done yet: a story that waits for its merge.
    pub fn holds(&self) -> bool {
        self.wait_merge && self.state != State::Merged
    }
}

/// `.baton-epic-publish.json`: every published story of the project.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ledger {
    pub stories: Vec<Story>,
    /// When the remote was last asked about merges (seconds since the epoch).
    #[serde(default)]
    pub checked_at: u64,
}

impl Ledger {
    pub fn load(dir: &Artifacts) -> Result<Ledger> {
        let Some(bytes) = dir.file(FILE_NAME).read(LEDGER_LIMIT)? else {
            return Ok(Ledger::default());
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            EpicError::failure("EPIC_PUBLISH_STATE_INVALID", format!("{FILE_NAME}: {e}"))
                .hint("this file is baton's own; `baton epic status` shows each story's branch")
        })
    }

    pub fn save(&self, dir: &Artifacts) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))?;
        bytes.push(b'\n');
        dir.file(FILE_NAME).write(&bytes)
    }

    pub fn get(&self, story: &str) -> Option<&Story> {
        self.stories.iter().find(|s| s.story == story)
    }

    /// Records `story` (a story approved again keeps what it published only for the same
    /// commit).
    pub fn record(&mut self, story: Story) {
        match self.stories.iter_mut().find(|s| s.story == story.story) {
            Some(s) if s.commit == story.commit && s.branch == story.branch => {
                s.wait_merge = story.wait_merge;
            }
            Some(s) => *s = story,
            None => self.stories.push(story),
        }
    }

    /// Stories that are not done until merged, and not merged yet.
    pub fn holding(&self) -> impl Iterator<Item = &Story> {
        self.stories.iter().filter(|s| s.holds())
    }
}

/// Where and how to publish.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    pub project: &'a Path,
    /// A remote's name or a URL.
    pub remote: &'a str,
    pub command: Option<&'a str>,
    pub timeout: Duration,
}

/// `s` as one word of `sh`: in single quotes, each `'` closed, escaped and reopened.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Checks a command template: only [`PLACEHOLDERS`], never inside quotes the template writes
/// (a quoted value in double quotes would still expand `$(…)`). The error says what is wrong.
pub fn check_template(template: &str) -> std::result::Result<(), String> {
    let mut quote_char: Option<char> = None;
    let mut escaped = false;
    let mut chars = template.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote_char, c) {
            (Some('\''), '\'') => quote_char = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (None, '\'' | '"') => quote_char = Some(c),
            (Some('"'), '"') => quote_char = None,
            _ => {}
        }
        if c == '{'
            && let Some(name) = placeholder_at(&template[i..])
        {
            if !PLACEHOLDERS.contains(&name) {
                if quote_char.is_some() {
                    // Quoted text of the command's own (`jq '{a}'`): left as it is.
                    continue;
                }
                return Err(format!(
                    "{{{name}}} is not a placeholder; the placeholders are {}",
                    PLACEHOLDERS.map(|p| format!("{{{p}}}")).join(", ")
                ));
            }
            if quote_char.is_some() {
                return Err(format!(
                    "{{{name}}} is inside quotes: baton quotes each value itself, write {{{name}}} without quotes"
                ));
            }
            for _ in 0..name.len() + 1 {
                chars.next();
            }
        }
    }
    Ok(())
}

/// The name of a `{name}` placeholder at the start of `s` (lowercase letters and `_`).
fn placeholder_at(s: &str) -> Option<&str> {
    let rest = s.strip_prefix('{')?;
    let end = rest.find('}')?;
    let name = &rest[..end];
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')).then_some(name)
}

/// The command with each placeholder replaced by its value, quoted.
pub fn fill(template: &str, story: &Story) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at]);
        let value = placeholder_at(&rest[at..]).and_then(|name| match name {
            "branch" => Some((name, story.branch.as_str())),
            "base" => Some((name, story.base.as_str())),
            "story" => Some((name, story.story.as_str())),
            "epic" => Some((name, story.epic.as_str())),
            "title" => Some((name, story.title.as_str())),
            _ => None,
        });
        match value {
            Some((name, v)) => {
                out.push_str(&quote(v));
                rest = &rest[at + name.len() + 2..];
            }
            None => {
                out.push('{');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The last `http://` or `https://` URL in `text`.
pub fn url_in(text: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '(' | ')'))
        .filter(|w| w.starts_with("https://") || w.starts_with("http://"))
        .map(|w| w.trim_end_matches(['.', ',', ';']))
        .rfind(|w| w.len() > "https://".len())
        .map(str::to_string)
}

/// git that talks to the remote: unconfined, the person's configuration and credentials, on the
/// repository folder only (see the module's documentation).
fn remote_git(project: &Path, args: &[&str]) -> Result<baton_git::Output> {
    let fail = |e: baton_git::GitError| {
        let mut err = EpicError::failure(e.code, e.message);
        err.hint = e.hint;
        err
    };
    let dirs = baton_git::RepoDirs::resolve(project).map_err(fail)?;
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let global = home
        .as_ref()
        .map(|h| h.join(".gitconfig"))
        .filter(|g| g.is_file());
    baton_git::includes::check(&dirs, global.as_deref(), home.as_deref()).map_err(fail)?;
    let out = baton_git::hardening::remote_command(project)
        .arg(format!("--git-dir={}", dirs.git_dir.display()))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| EpicError::failure("EPIC_GIT_FAILED", format!("git cannot start: {e}")))?;
    Ok(baton_git::Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Puts the story's commit on its branch and pushes the branch to the remote.
pub fn push(target: &Target<'_>, story: &Story) -> Result<()> {
    let full = format!("refs/heads/{}", story.branch);
    let out = crate::git::run(
        target.project,
        &[],
        &["update-ref", "-m", "baton: publish", &full, &story.commit],
        &[],
    )?;
    if !out.ok() {
        return Err(EpicError::failure(
            PUSH_FAILED,
            format!(
                "branch {} cannot be set to {}: {}",
                story.branch,
                crate::git::short(&story.commit),
                out.stderr.trim()
            ),
        ));
    }
    let refspec = format!("{}:{full}", story.commit);
    let out = remote_git(target.project, &["push", "-q", target.remote, &refspec])?;
    if !out.ok() {
        return Err(EpicError::failure(
            PUSH_FAILED,
            format!(
                "git push {} {}: {}",
                target.remote,
                story.branch,
                crate::worktree::tail(out.stderr.trim(), OUTPUT_BYTES)
            ),
        )
        .hint(format!(
            "check that `git push {} {}` works from the project as you (remote, credentials); `baton epic resume` pushes again",
            target.remote, story.branch
        )));
    }
    Ok(())
}

/// Runs the operator's command for `story` (see the module's documentation).
pub fn run_command(target: &Target<'_>, template: &str, story: &Story) -> CommandRun {
    let command = fill(template, story);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(&command)
        .current_dir(target.project)
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| passes(&k.to_string_lossy())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    {
        use std::os::unix::process::CommandExt;
        // Its own group: a timeout kills whatever it started too.
        cmd.process_group(0);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return CommandRun {
                command,
                exit: None,
                timed_out: false,
                output: format!("sh cannot start: {e}"),
            };
        }
    };
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel::<Piped>();
    for (i, pipe) in [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .enumerate()
    {
        if let Some(pipe) = pipe {
            reader(i, pipe, tx.clone());
        }
    }
    std::thread::spawn(move || {
        let code = child.wait().ok().and_then(|s| s.code());
        let _ = tx.send(Piped::Exit(code));
    });
    let mut deadline = Instant::now() + target.timeout;
    let (mut exit, mut ended, mut timed_out, mut killed) = (None, false, false, false);
    let mut texts = [String::new(), String::new()];
    let mut pending = 3;
    while pending > 0 {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Piped::Exit(code)) => (exit, ended, pending) = (code, true, pending - 1),
            Ok(Piped::Text(i, text)) => (texts[i], pending) = (text, pending - 1),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !killed => {
                // The group still has members (`sh`, or what it left holding the output
                // open): its id is theirs, so the signal reaches nothing else.
                baton_sandbox::kill_group(pid, baton_sandbox::Signal::Kill);
                (killed, timed_out) = (true, !ended);
                deadline = Instant::now() + Duration::from_secs(5);
            }
            Err(_) => break,
        }
    }
    if timed_out {
        exit = None;
    }
    let mut output = texts[0].clone();
    if !output.is_empty() && !texts[1].is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    output.push_str(&texts[1]);
    CommandRun {
        command,
        exit,
        timed_out,
        output: crate::worktree::tail(&output, OUTPUT_BYTES),
    }
}

/// Whether an environment variable reaches the operator's command.
fn passes(name: &str) -> bool {
    !(name.ends_with("_API_KEY")
        || name.starts_with("BATON_")
        || name == "DATABASE_URL"
        || name.starts_with("PG"))
}

/// What the command's threads report.
enum Piped {
    Exit(Option<i32>),
    Text(usize, String),
}

/// Reads pipe `i` to its end, keeping the tail, and sends it.
fn reader(i: usize, mut pipe: Box<dyn Read + Send>, tx: std::sync::mpsc::Sender<Piped>) {
    std::thread::spawn(move || {
        let mut kept: Vec<u8> = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > 4 * OUTPUT_BYTES {
                kept.drain(..kept.len() - 2 * OUTPUT_BYTES);
            }
        }
        let _ = tx.send(Piped::Text(i, String::from_utf8_lossy(&kept).into_owned()));
    });
}

/// Pushes (unless pushed) and runs the command (unless it ran), updating `story`: `Ok` once it
/// is published, else the failure (also kept in `story.error`).
pub fn publish(target: &Target<'_>, story: &mut Story) -> Result<()> {
    let r = publish_steps(target, story);
    story.error = r.as_ref().err().map(Failure::from);
    r
}

fn publish_steps(target: &Target<'_>, story: &mut Story) -> Result<()> {
    if story.state == State::Approved {
        push(target, story)?;
        story.state = State::Pushed;
    }
    if story.state == State::Pushed {
        if let Some(template) = target.command {
            let run = run_command(target, template, story);
            if let Some(url) = url_in(&run.output) {
                story.url = Some(url);
            }
            let ok = run.ok();
            let detail = match (run.timed_out, run.exit) {
                (true, _) => format!("timed out after {}s", target.timeout.as_secs()),
                (_, Some(code)) => format!("exit code {code}"),
                (_, None) => "killed or not started".to_string(),
            };
            let last = run.output.lines().last().unwrap_or("").to_string();
            story.command = Some(run);
            if !ok {
                return Err(EpicError::failure(
                    COMMAND_FAILED,
                    format!("the publish command for {} failed ({detail}): {last}", story.story),
                )
                .hint("its output is in `baton epic status --json` (publish.command); `baton epic resume` runs it again"));
            }
        }
        story.state = State::Published;
    }
    Ok(())
}

/// Whether the remote's `base` branch contains `commit` (fetched into
/// `refs/baton/publish/<base>`, nothing else of the repository changes).
pub fn is_merged(project: &Path, remote: &str, base: &str, commit: &str) -> Result<bool> {
    let local = format!("refs/baton/publish/{base}");
    let spec = format!("+refs/heads/{base}:{local}");
    let out = remote_git(
        project,
        &[
            "fetch",
            "-q",
            "--no-tags",
            "--no-write-fetch-head",
            remote,
            &spec,
        ],
    )?;
    if !out.ok() {
        return Err(EpicError::failure(
            CHECK_FAILED,
            format!(
                "git fetch {remote} {base}: {}",
                crate::worktree::tail(out.stderr.trim(), OUTPUT_BYTES)
            ),
        )
        .hint("check that the remote and its base branch exist; the check runs again on `baton epic status` and `baton epic resume`"));
    }
    let out = remote_git(project, &["merge-base", "--is-ancestor", commit, &local])?;
    match out.code {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(EpicError::failure(
            CHECK_FAILED,
            format!(
                "git merge-base {} {local}: {}",
                crate::git::short(commit),
                out.stderr.trim()
            ),
        )),
    }
}

/// Asks the remote about every story that waits for its merge; those merged now are returned
/// (their state is `Merged`). A failed check is kept in the story's `error` and the story waits.
pub fn check_merges(ledger: &mut Ledger, project: &Path, remote: &str, now: u64) -> Vec<String> {
    ledger.checked_at = now;
    let mut merged = Vec::new();
    for s in ledger
        .stories
        .iter_mut()
        .filter(|s| s.holds() && s.state == State::Published)
    {
        match is_merged(project, remote, &s.base, &s.commit) {
            Ok(true) => {
                s.state = State::Merged;
                s.error = None;
                merged.push(s.story.clone());
            }
            Ok(false) => s.error = None,
            Err(e) => s.error = Some(Failure::from(&e)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn story(title: &str) -> Story {
        Story {
            story: "1-2-auth".into(),
            epic: "epic-1".into(),
            title: title.into(),
            branch: "baton/epic-1/1-2-auth".into(),
            base: "main".into(),
            commit: "abc".into(),
            state: State::Approved,
            wait_merge: false,
            command: None,
            url: None,
            error: None,
        }
    }

    #[test]
    fn values_are_quoted_as_one_word() {
        assert_eq!(quote("plain"), "'plain'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        let hostile = "x'; touch pwned; echo '$(id)`id`\"";
        let filled = fill(
            "gh pr create --title {title} --head {branch}",
            &story(hostile),
        );
        // sh reads it back as the title, one argument, nothing run.
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "printf '%s\\n' {}",
                &filled["gh pr create --title ".len()..]
            ))
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stdout);
        let args: Vec<&str> = printed.lines().collect();
        assert_eq!(args, [hostile, "--head", "baton/epic-1/1-2-auth"]);
    }

    #[test]
    fn templates_are_checked() {
        assert!(check_template("gh pr create --fill --head {branch} --base {base}").is_ok());
        assert!(check_template("echo {story} {epic} {title} > out.txt; jq '{a}'").is_ok());
        let e = check_template("echo {nope}").unwrap_err();
        assert!(e.contains("{nope} is not a placeholder"), "{e}");
        let e = check_template("gh pr create --title \"{title}\"").unwrap_err();
        assert!(e.contains("inside quotes"), "{e}");
        let e = check_template("echo '{title}'").unwrap_err();
        assert!(e.contains("inside quotes"), "{e}");
        // A `{` that is no placeholder stays as it is.
        assert_eq!(
            fill("a {B} {branch}", &story("t")),
            "a {B} 'baton/epic-1/1-2-auth'"
        );
    }

    #[test]
    fn the_last_url_printed_is_the_link() {
        assert_eq!(
            url_in("Creating pull request\nhttps://example.test/o/r/pull/7\n"),
            Some("https://example.test/o/r/pull/7".into())
        );
        assert_eq!(
            url_in("see <http://a.test/x>."),
            Some("http://a.test/x".into())
        );
        assert_eq!(url_in("no link"), None);
    }

    #[test]
    fn a_command_is_bounded_in_time_and_keeps_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let target = Target {
            project: dir.path(),
            remote: "origin",
            command: None,
            timeout: Duration::from_secs(1),
        };
        let run = run_command(
            &target,
            "echo opened https://x.test/pr/1; sleep 30",
            &story("t"),
        );
        assert!(run.timed_out && run.exit.is_none() && !run.ok(), "{run:?}");
        assert_eq!(url_in(&run.output).as_deref(), Some("https://x.test/pr/1"));
        let run = run_command(&target, "echo {story} >&2; exit 3", &story("t"));
        assert_eq!((run.exit, run.timed_out), (Some(3), false));
        assert_eq!(run.output.trim(), "1-2-auth");
    }

    #[test]
    fn secrets_do_not_reach_the_command() {
        assert!(!passes("OPENAI_API_KEY"));
        assert!(!passes("BATON_HOME"));
        assert!(!passes("PGPASSWORD"));
        assert!(passes("GH_TOKEN"));
        assert!(passes("PATH"));
    }
}
