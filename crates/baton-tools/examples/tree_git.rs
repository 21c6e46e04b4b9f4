//! What git on a model-written tree costs through `baton-git` (the hardened configuration, the
//! protected files checked around each command, the sandbox) against the same commands run
//! plainly: one worker checkpoint's `status --porcelain`, `add -A`, `commit`, `rev-parse HEAD`
//! on a tree where one file changed, alternately, N times each.
//!
//! `cargo run --release -p baton-tools --example tree_git [-- N]`
#![allow(clippy::unwrap_used, clippy::expect_used)] // bench code: a failed setup step fails it

use baton_git::hardening::remote_command;
use baton_git::{Identity, TreeGit};
use baton_tools::terminal::GitSandbox;
use baton_tools::{TerminalRuntime, TerminalSettings};
use std::path::Path;
use std::time::Instant;

fn plain(tree: &Path, args: &[&str]) -> String {
    let out = remote_command(tree)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@baton.invalid")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@baton.invalid")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    let tmp = tempfile::tempdir().unwrap();
    let tree = baton_testkit::sample_project(tmp.path());
    plain(&tree, &["init", "-q", "-b", "main"]);
    plain(&tree, &["add", "-A"]);
    plain(&tree, &["commit", "-q", "-m", "start"]);
    let sandbox = GitSandbox::new(TerminalSettings::default(), TerminalRuntime::default()).unwrap();
    let identity = Identity::Fixed {
        name: "bench".into(),
        email: "bench@baton.invalid".into(),
    };
    let (mut plain_ms, mut tree_ms) = (Vec::new(), Vec::new());
    for i in 0..n * 2 {
        std::fs::write(tree.join("artifacts-bench.txt"), format!("change {i}\n")).unwrap();
        let message = format!("checkpoint {i}");
        let start = Instant::now();
        if i % 2 == 0 {
            assert!(!plain(&tree, &["status", "--porcelain"]).is_empty());
            plain(&tree, &["add", "-A"]);
            plain(&tree, &["commit", "--quiet", "--no-verify", "-m", &message]);
            plain(&tree, &["rev-parse", "HEAD"]);
            plain_ms.push(start.elapsed().as_secs_f64() * 1000.0);
        } else {
            // Opened for each checkpoint, as the worker does.
            let git = TreeGit::open(&tree, &sandbox, None, identity.clone()).unwrap();
            assert!(!git.ok(&["status", "--porcelain"]).unwrap().is_empty());
            git.ok(&["add", "-A"]).unwrap();
            git.ok(&["commit", "--quiet", "--no-verify", "-m", &message])
                .unwrap();
            git.ok(&["rev-parse", "HEAD"]).unwrap();
            tree_ms.push(start.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let (p, t) = (median(plain_ms), median(tree_ms));
    println!("checkpoint git (status, add -A, commit, rev-parse), {n} times each, alternately:");
    println!("  plain git            median {p:.1} ms");
    println!("  baton-git, confined  median {t:.1} ms");
    println!("  difference {:.1} ms, ratio {:.2}", t - p, t / p);
}
