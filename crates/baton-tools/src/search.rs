//! `fs.search`: ripgrep's walker and searcher over one mount.
//!
//! The walk (gitignore rules, hidden and `node_modules` skipped, links not followed) runs on the
//! mount's host path, but every file is *opened* through the mount handle, so a directory
//! swapped for a symlink between the walk and the open still cannot lead outside.

use crate::files::open_regular;
use crate::mounts::{Mount, MountPath, Mounts};
use crate::result::{ToolError, ok};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use serde_json::{Value, json};

pub struct SearchRequest {
    pub root: MountPath,
    pub pattern: String,
    pub globs: Vec<String>,
    pub before: usize,
    pub after: usize,
    pub max_matches: usize,
}

#[derive(Debug, Clone, serde::Serialize)]
struct Match {
    path: String,
    line: u64,
    text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    before: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    after: Vec<String>,
}

/// `/regex/` or `/regex/i` is a regex; anything else a literal.
fn matcher(pattern: &str) -> Result<RegexMatcher, ToolError> {
    let mut builder = RegexMatcherBuilder::new();
    // As ripgrep does: lets the searcher look for candidate lines instead of matching line by line.
    builder.line_terminator(Some(b'\n'));
    let regex = pattern
        .strip_prefix('/')
        .and_then(|p| {
            p.strip_suffix("/i")
                .map(|r| (r, true))
                .or_else(|| p.strip_suffix('/').map(|r| (r, false)))
        })
        .filter(|(r, _)| !r.is_empty());
    let built = match regex {
        Some((r, insensitive)) => builder.case_insensitive(insensitive).build(r),
        None => builder.fixed_strings(true).build(pattern),
    };
    built.map_err(|e| ToolError::invalid_args(format!("invalid pattern: {e}")))
}

fn text_of(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim_end_matches(['\n', '\r']);
    // Minified files have giant lines; the model needs the neighbourhood, not the megabyte.
    if s.len() > 500 {
        let mut cut = 500;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…", &s[..cut])
    } else {
        s.to_string()
    }
}

struct Collector<'a> {
    path: String,
    /// Set when a match arrived after `max` were collected.
    overflow: bool,
    matches: &'a mut Vec<Match>,
    pending_before: Vec<String>,
    max: usize,
    first_of_file: usize,
}

impl Sink for Collector<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.matches.len() >= self.max {
            self.overflow = true;
            return Ok(false);
        }
        self.matches.push(Match {
            path: self.path.clone(),
            line: mat.line_number().unwrap_or(0),
            text: text_of(mat.bytes()),
            before: std::mem::take(&mut self.pending_before),
            after: Vec::new(),
        });
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        match ctx.kind() {
            SinkContextKind::Before => self.pending_before.push(text_of(ctx.bytes())),
            SinkContextKind::After => {
                if self.matches.len() > self.first_of_file
                    && let Some(last) = self.matches.last_mut()
                {
                    last.after.push(text_of(ctx.bytes()));
                }
            }
            SinkContextKind::Other => {}
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        self.pending_before.clear();
        Ok(true)
    }
}

pub fn search(mounts: &Mounts, req: &SearchRequest) -> Result<Value, ToolError> {
    let matcher = matcher(&req.pattern)?;
    let host_root = mounts.host_root(req.root.mount).to_path_buf();
    let start = host_root.join(&req.root.rel);
    // Existence and type through the mount handle: a symlinked start outside is refused here.
    let start_meta = mounts
        .dir(req.root.mount)
        .metadata(req.root.rel_path())
        .map_err(|e| crate::mounts::io_error(&req.root, &e))?;
    let files = if start_meta.is_file() {
        vec![req.root.rel.clone()]
    } else {
        walk(&start, &host_root, &req.globs)?
    };
    let (mut matches, files_scanned, truncated) = search_files(mounts, req, &matcher, &files);
    matches.truncate(req.max_matches);
    let found = matches.len();
    let mut out = json!({
        "path": req.root.display(),
        "matches": matches,
        "stats": {"filesScanned": files_scanned, "matchesFound": found},
    });
    if truncated {
        out["truncated"] = json!(true);
        out["hint"] = json!(format!(
            "Stopped at maxMatches={}. Narrow the path or the pattern.",
            req.max_matches
        ));
    }
    Ok(ok(out))
}

/// Files under `start` (mount-relative, sorted): gitignore rules, hidden and `node_modules`
/// skipped, links not followed.
fn walk(
    start: &std::path::Path,
    host_root: &std::path::Path,
    globs: &[String],
) -> Result<Vec<String>, ToolError> {
    let mut walk = WalkBuilder::new(start);
    walk.hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != "node_modules");
    if !globs.is_empty() {
        let mut overrides = OverrideBuilder::new(start);
        for g in globs {
            overrides
                .add(g)
                .map_err(|e| ToolError::invalid_args(format!("invalid glob {g}: {e}")))?;
        }
        walk.overrides(
            overrides
                .build()
                .map_err(|e| ToolError::invalid_args(format!("invalid globs: {e}")))?,
        );
    }
    // Walk on all cores, then sort: the order (and so a truncated result) stays deterministic.
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8);
    walk.threads(threads);
    let files = std::sync::Mutex::new(Vec::new());
    walk.build_parallel().run(|| {
        let files = &files;
        Box::new(move |entry| {
            let rel = entry
                .ok()
                .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
                .and_then(|e| {
                    e.path()
                        .strip_prefix(host_root)
                        .ok()?
                        .to_str()
                        .map(str::to_owned)
                });
            if let (Some(rel), Ok(mut f)) = (rel, files.lock()) {
                f.push(rel);
            }
            ignore::WalkState::Continue
        })
    });
    let mut files = files.into_inner().unwrap_or_default();
    files.sort_unstable();
    Ok(files)
}

/// Which files are done, so the search can stop once the files *in order* hold enough matches.
struct Progress {
    done: std::collections::BTreeMap<usize, usize>,
    next: usize,
    prefix_matches: usize,
}

/// Searches `files` on all cores. Results are the first `max_matches` matches in file order,
/// exactly as a sequential search would give: workers take files in order, and stop taking
/// new ones only when every file before some point is done and those files already hold
/// `max_matches` matches.
fn search_files(
    mounts: &Mounts,
    req: &SearchRequest,
    matcher: &RegexMatcher,
    files: &[String],
) -> (Vec<Match>, usize, bool) {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let progress = Mutex::new(Progress {
        done: Default::default(),
        next: 0,
        prefix_matches: 0,
    });
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(8)
        .min(files.len().max(1));
    let results: Vec<Vec<(usize, Vec<Match>, bool)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut searcher = SearcherBuilder::new()
                        .line_number(true)
                        .before_context(req.before)
                        .after_context(req.after)
                        .binary_detection(BinaryDetection::quit(0))
                        .build();
                    let mut mine = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(rel) = files.get(i) else { break };
                        let path = MountPath {
                            mount: req.root.mount,
                            rel: rel.clone(),
                        };
                        let mut found = Vec::new();
                        let mut overflow = false;
                        if let Ok((file, _)) = open_regular(mounts, &path) {
                            let mut sink = Collector {
                                path: path.display(),
                                overflow: false,
                                first_of_file: 0,
                                matches: &mut found,
                                pending_before: Vec::new(),
                                max: req.max_matches,
                            };
                            let _ = searcher.search_reader(matcher, file, &mut sink);
                            overflow = sink.overflow;
                        }
                        let count = found.len();
                        mine.push((i, found, overflow));
                        let Ok(mut p) = progress.lock() else { break };
                        p.done.insert(i, count);
                        let p = &mut *p;
                        while let Some(c) = p.done.remove(&p.next) {
                            p.prefix_matches += c;
                            p.next += 1;
                        }
                        if p.prefix_matches >= req.max_matches {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    mine
                })
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().ok()).collect()
    });
    let mut per_file: Vec<(usize, Vec<Match>, bool)> = results.into_iter().flatten().collect();
    per_file.sort_by_key(|(i, _, _)| *i);
    let scanned = per_file.len();
    let mut matches = Vec::new();
    let mut truncated = false;
    for (_, found, overflow) in per_file {
        if matches.len() >= req.max_matches {
            truncated = truncated || !found.is_empty();
            continue;
        }
        matches.extend(found);
        truncated = truncated || overflow;
    }
    if matches.len() > req.max_matches {
        truncated = true;
    }
    let truncated = truncated || (stop.load(Ordering::Relaxed) && scanned < files.len());
    (matches, scanned, truncated)
}

/// Splits `{query, globs}` globs such as `@project/docs/**/*.md` into a search root and
/// patterns relative to it. All globs must use the same mount.
pub fn root_from_globs(globs: &[String]) -> Result<(MountPath, Vec<String>), ToolError> {
    let mut mount: Option<Mount> = None;
    let mut rels = Vec::new();
    for g in globs {
        let (alias, rest) = g.split_once('/').unwrap_or((g.as_str(), "**"));
        let parsed = crate::mounts::parse(alias)?;
        if mount.is_some_and(|m| m != parsed.mount) {
            return Err(ToolError::invalid_args(
                "all globs must be under the same mount",
            ));
        }
        if rest.split('/').any(|s| s == "..") {
            return Err(ToolError::sandbox(format!(
                "Path not allowed: {g}: '..' is not allowed"
            )));
        }
        mount = Some(parsed.mount);
        rels.push(rest.to_string());
    }
    let mount = mount.ok_or_else(|| ToolError::invalid_args("globs is empty"))?;
    Ok((
        MountPath {
            mount,
            rel: String::new(),
        },
        rels,
    ))
}
