//! `--parallel N`: which stories may run together. Pure functions over what the loop knows
//! (statuses, which stories are in flight or paused, their dependencies), used by the live loop
//! and by `--dry-run`, which shows the same reasons.
//!
//! Rules, in order:
//! - stories are taken in file order (the order of `sprint-status.yaml`);
//! - a done story is not planned; a status the autopilot does not run is skipped;
//! - a story paused on a question is never started (it waits for `baton epic answer`), nor
//!   one paused on a failure (it waits for `baton epic resume`);
//! - a story waits while a story it depends on is not done: named in its story file (BMAD
//!   writes dependencies in prose: "depends on Story 1.2", "requires Story 1.1", a
//!   `Dependencies` section; see [`dependencies_in`]) or in `[autopilot.parallel] after`;
//! - at most N stories are in flight (paused ones hold no slot), and `--max-stories` bounds
//!   how many more may start.
//!
//! ```toml
//! [autopilot]
//! parallel = 3                      # or, with dependencies:
//!
//! [autopilot.parallel]
//! stories = 3
//! after = { "1-3-search" = ["1-2-index"] }
//! ```

use super::error::{EpicError, Result};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

/// Longest story file text scanned for dependencies.
const SCAN_BYTES: usize = 1 << 20;

/// `[autopilot] parallel = N` or the `[autopilot.parallel]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParallelConfig {
    /// Stories in flight at most (1: one after the other, as without `--parallel`).
    pub stories: u32,
    /// Extra dependencies: a story waits until those named are done.
    pub after: BTreeMap<String, Vec<String>>,
}

impl Default for ParallelConfig {
    fn default() -> Self {
        ParallelConfig {
            stories: 1,
            after: BTreeMap::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParallelTable {
    #[serde(default = "one")]
    stories: u32,
    #[serde(default)]
    after: BTreeMap<String, Vec<String>>,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ParallelToml {
    Count(u32),
    Table(ParallelTable),
}

impl<'de> Deserialize<'de> for ParallelConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let config = match ParallelToml::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "parallel is a number of stories (parallel = 3) or a table with `stories` and `after`",
            )
        })? {
            ParallelToml::Count(stories) => ParallelConfig {
                stories,
                after: BTreeMap::new(),
            },
            ParallelToml::Table(t) => ParallelConfig {
                stories: t.stories,
                after: t.after,
            },
        };
        if config.stories == 0 {
            return Err(serde::de::Error::custom(
                "parallel must be at least 1 story",
            ));
        }
        Ok(config)
    }
}

impl ParallelConfig {
    /// Checks `after` against the story keys of `sprint-status.yaml`: each key and each
    /// dependency must be a story there, not itself.
    pub fn check_after(&self, known: &[&str]) -> Result<()> {
        let invalid = |m: String| {
            EpicError::usage("EPIC_CONFIG_INVALID", m)
                .hint("[autopilot.parallel] after names story keys of sprint-status.yaml: { \"1-3-x\" = [\"1-2-y\"] }")
        };
        for (story, deps) in &self.after {
            if !known.contains(&story.as_str()) {
                return Err(invalid(format!(
                    "baton.toml: [autopilot.parallel] after: {story:?} is not a story of sprint-status.yaml"
                )));
            }
            for d in deps {
                if !known.contains(&d.as_str()) {
                    return Err(invalid(format!(
                        "baton.toml: [autopilot.parallel] after.{story}: {d:?} is not a story of sprint-status.yaml"
                    )));
                }
                if d == story {
                    return Err(invalid(format!(
                        "baton.toml: [autopilot.parallel] after.{story} names the story itself"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// What a story is doing, as the loop knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Not in flight: it may be started.
    Idle,
    /// In flight (a phase run, a verify, or waiting for its turn to merge): holds a slot.
    Running,
    /// Paused on a question nobody has answered.
    Question,
    /// Paused on a failure.
    Failed,
}

/// One story of the epic, as the loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub key: String,
    /// Its status in `sprint-status.yaml`, legacy values mapped.
    pub status: String,
    pub activity: Activity,
    /// Stories its story file depends on ([`dependencies_in`]).
    pub depends_on: Vec<String>,
}

/// Everything [`plan`] looks at.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// The epic's stories in file order.
    pub stories: &'a [Candidate],
    /// Status of every story of `sprint-status.yaml` (other epics' too), legacy values mapped.
    pub statuses: &'a BTreeMap<String, String>,
    /// `[autopilot.parallel] after`
    pub after: &'a BTreeMap<String, Vec<String>>,
    /// Stories in flight at most.
    pub slots: usize,
    /// How many more stories may start (`--max-stories` left), `None`: no bound.
    pub may_start: Option<usize>,
}

/// Why a story does not start now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// These stories it depends on are not done.
    Dependency(Vec<String>),
    /// Its dependencies lead back to it (through these stories).
    Cycle(Vec<String>),
    /// A question waits for an answer.
    Question,
    /// It paused on a failure.
    Failed,
    /// Every slot is taken.
    NoSlot,
    /// `--max-stories` is reached.
    Limit,
    /// Its status is not one the autopilot runs.
    Status(String),
}

impl Why {
    /// The reason, in words, for `--dry-run` and `epic status`.
    pub fn text(&self) -> String {
        match self {
            Why::Dependency(keys) => format!("waits for {} (not done)", keys.join(", ")),
            Why::Cycle(keys) => format!(
                "its dependencies form a cycle ({}); fix the story files or [autopilot.parallel] after",
                keys.join(" → ")
            ),
            Why::Question => "waits for an answer (baton epic answer)".to_string(),
            Why::Failed => "paused on a failure (baton epic resume)".to_string(),
            Why::NoSlot => "waits for a free slot".to_string(),
            Why::Limit => "--max-stories reached".to_string(),
            Why::Status(s) => format!("status {s:?} is not one the autopilot runs"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub key: String,
    pub why: Why,
}

/// What the loop does next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Start these now, in this order.
    pub start: Vec<String>,
    /// In flight, going on.
    pub running: Vec<String>,
    /// In flight, but a story they depend on is not done: let them finish the phase they are
    /// in and start no dev phase until it is (a dependency found once the story file existed).
    pub hold: Vec<Waiting>,
    /// Not started, and why.
    pub waiting: Vec<Waiting>,
}

impl Plan {
    /// Nothing runs and nothing can start.
    pub fn is_stuck(&self) -> bool {
        self.start.is_empty() && self.running.is_empty()
    }

    /// `--dry-run` lines: who starts, who runs, who waits and why.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.start.is_empty() {
            lines.push(format!("start together: {}", self.start.join(", ")));
        }
        if !self.running.is_empty() {
            lines.push(format!("in flight: {}", self.running.join(", ")));
        }
        for w in &self.hold {
            lines.push(format!("{}: holds before dev, {}", w.key, w.why.text()));
        }
        for w in &self.waiting {
            lines.push(format!("{}: {}", w.key, w.why.text()));
        }
        lines
    }
}

fn is_done(statuses: &BTreeMap<String, String>, key: &str) -> bool {
    statuses.get(key).is_some_and(|s| s == "done")
}

/// The stories `key` depends on (story file and `after`), without duplicates or itself.
fn deps_of<'a>(input: &'a PlanInput<'_>, key: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    let from_file = input
        .stories
        .iter()
        .find(|c| c.key == key)
        .map(|c| c.depends_on.as_slice())
        .unwrap_or_default();
    let from_config = input.after.get(key).map(Vec::as_slice).unwrap_or_default();
    for d in from_file.iter().chain(from_config) {
        if d != key && !out.contains(&d.as_str()) {
            out.push(d);
        }
    }
    out
}

/// A cycle through `key` among stories not done, if any (the keys on it, `key` first and
/// last).
fn cycle_through(input: &PlanInput<'_>, key: &str) -> Option<Vec<String>> {
    // Depth-first over not-done dependencies, bounded by the number of stories.
    let mut stack: Vec<(String, Vec<String>)> = vec![(key.to_string(), vec![key.to_string()])];
    let mut seen: BTreeSet<String> = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for d in deps_of(input, &at) {
            if is_done(input.statuses, d) {
                continue;
            }
            if d == key {
                let mut cycle = path.clone();
                cycle.push(key.to_string());
                return Some(cycle);
            }
            if seen.insert(d.to_string()) {
                let mut next = path.clone();
                next.push(d.to_string());
                stack.push((d.to_string(), next));
            }
        }
    }
    None
}

/// What to start now and why the others wait.
pub fn plan(input: &PlanInput<'_>) -> Plan {
    let mut out = Plan::default();
    let unmet = |key: &str| -> Vec<String> {
        deps_of(input, key)
            .into_iter()
            .filter(|d| !is_done(input.statuses, d))
            .map(str::to_string)
            .collect()
    };
    let mut busy = 0usize;
    for c in input.stories {
        if c.status == "done" || c.activity != Activity::Running {
            continue;
        }
        busy += 1;
        out.running.push(c.key.clone());
        let waits = unmet(&c.key);
        if !waits.is_empty() {
            let why = match cycle_through(input, &c.key) {
                Some(cycle) => Why::Cycle(cycle),
                None => Why::Dependency(waits),
            };
            out.hold.push(Waiting {
                key: c.key.clone(),
                why,
            });
        }
    }
    let mut may_start = input.may_start;
    for c in input.stories {
        if c.status == "done" || c.activity == Activity::Running {
            continue;
        }
        let why = match c.activity {
            Activity::Question => Some(Why::Question),
            Activity::Failed => Some(Why::Failed),
            _ if !runnable(&c.status) => Some(Why::Status(c.status.clone())),
            _ => {
                let waits = unmet(&c.key);
                if waits.is_empty() {
                    None
                } else {
                    Some(match cycle_through(input, &c.key) {
                        Some(cycle) => Why::Cycle(cycle),
                        None => Why::Dependency(waits),
                    })
                }
            }
        };
        let why = why.or_else(|| {
            if may_start == Some(0) {
                Some(Why::Limit)
            } else if busy >= input.slots.max(1) {
                Some(Why::NoSlot)
            } else {
                None
            }
        });
        match why {
            Some(why) => out.waiting.push(Waiting {
                key: c.key.clone(),
                why,
            }),
            None => {
                busy += 1;
                may_start = may_start.map(|n| n.saturating_sub(1));
                out.start.push(c.key.clone());
            }
        }
    }
    out
}

/// Statuses a story can be started from (as [`baton_bmad::phase::Phase::start_for`]).
fn runnable(status: &str) -> bool {
    baton_bmad::phase::Phase::start_for(status).is_some()
}

/// `--dry-run`: the stories that would run together, wave after wave, if each wave ended
/// before the next began (stories in flight first). Stories that could never start (a
/// question, a failure, a cycle, a status not run) are left out; [`plan`] says why.
pub fn waves(input: &PlanInput<'_>) -> Vec<Vec<String>> {
    let mut statuses = input.statuses.clone();
    let mut stories: Vec<Candidate> = input.stories.to_vec();
    let mut may_start = input.may_start;
    let mut waves = Vec::new();
    for _ in 0..=stories.len() {
        let p = plan(&PlanInput {
            stories: &stories,
            statuses: &statuses,
            after: input.after,
            slots: input.slots,
            may_start,
        });
        let mut wave = p.running.clone();
        wave.extend(p.start.iter().cloned());
        if wave.is_empty() {
            break;
        }
        may_start = may_start.map(|n| n.saturating_sub(p.start.len()));
        for key in &wave {
            statuses.insert(key.clone(), "done".to_string());
            if let Some(c) = stories.iter_mut().find(|c| &c.key == key) {
                c.status = "done".to_string();
                c.activity = Activity::Idle;
            }
        }
        waves.push(wave);
    }
    waves
}

/// The stories a story file says its story depends on, among `known` (story keys in
/// `sprint-status.yaml` order), only those before `key`: BMAD's rule is that a story depends
/// on earlier stories only, and prose such as "required by Story 1.4" names a later one.
///
/// BMAD writes dependencies in prose (its story template has no field for them): a line that
/// says "depends on", "requires", "prerequisite", "builds on", "blocked by", "after Story …",
/// or any line of a section whose title mentions dependencies or prerequisites, names stories
/// as `Story 1.2` (`Stories 1.1 and 1.2`) or by key (`1-2-user-auth`). A line that says it
/// does *not* depend is skipped. When in doubt a reference counts: a dependency too many only
/// makes two stories run one after the other.
pub fn dependencies_in(key: &str, text: &str, known: &[&str]) -> Vec<String> {
    let Some(me) = known.iter().position(|k| *k == key) else {
        return Vec::new();
    };
    let earlier = &known[..me];
    let mut text = text;
    if text.len() > SCAN_BYTES {
        let mut end = SCAN_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text = &text[..end];
    }
    let mut found: Vec<String> = Vec::new();
    // The level of the heading whose section speaks of dependencies, while inside it.
    let mut section: Option<usize> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let level = trimmed.bytes().take_while(|b| *b == b'#').count();
        if level > 0 && trimmed[level..].starts_with(' ') {
            let title = trimmed[level..].to_lowercase();
            if section.is_some_and(|l| level <= l) {
                section = None;
            }
            if title.contains("depend") || title.contains("prerequisite") {
                section = Some(level);
                continue;
            }
        }
        let lower = line.to_lowercase();
        if !(section.is_some() || says_dependency(&lower)) || says_independent(&lower) {
            continue;
        }
        for r in references(&lower, earlier) {
            if !found.contains(&r) {
                found.push(r);
            }
        }
    }
    found
}

fn says_dependency(lower: &str) -> bool {
    const WORDS: [&str; 12] = [
        "depends on",
        "depend on",
        "dependent on",
        "dependency",
        "dependencies",
        "requires",
        "prerequisite",
        "builds on",
        "built on",
        "blocked by",
        "after story",
        "after stories",
    ];
    WORDS.iter().any(|w| lower.contains(w))
}

fn says_independent(lower: &str) -> bool {
    const WORDS: [&str; 6] = [
        "not depend",
        "n't depend",
        "not require",
        "n't require",
        "independent of",
        "no dependenc",
    ];
    WORDS.iter().any(|w| lower.contains(w))
}

/// Stories a (lower-cased) line names among `earlier`: `story 1.2`, `stories 1.1, 1.2 and
/// 1.3`, or a key.
fn references(lower: &str, earlier: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |k: &str| {
        if !out.iter().any(|o: &String| o == k) {
            out.push(k.to_string());
        }
    };
    for k in earlier {
        if contains_word(lower, &k.to_lowercase()) {
            push(k);
        }
    }
    let mut rest = lower;
    while let Some(i) = rest.find("stor") {
        let after = &rest[i + 4..];
        let list = after
            .strip_prefix("ies")
            .or_else(|| after.strip_prefix('y'))
            .unwrap_or("");
        rest = after;
        if list.is_empty() {
            continue;
        }
        for (epic, story) in numbers_listed(list) {
            let prefix = format!("{epic}-{story}-");
            if let Some(k) = earlier.iter().find(|k| k.starts_with(&prefix)) {
                push(k);
            }
        }
    }
    out
}

/// `needle` in `hay` with no letter, digit or `-` right before or after it.
fn contains_word(hay: &str, needle: &str) -> bool {
    let edge = |c: Option<char>| c.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'));
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        let at = from + i;
        let before = hay[..at].chars().next_back();
        let after = hay[at + needle.len()..].chars().next();
        if edge(before) && edge(after) {
            return true;
        }
        from = at + needle.len();
    }
    false
}

/// The `N.M` (or `N.Ma`) numbers listed at the start of `text`: ` 1.2`, ` 1.1, 1.2 and 1.3`.
fn numbers_listed(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let t = rest.trim_start_matches([' ', '\t', ',', '&', '/', '#']);
        let t = t
            .strip_prefix("and ")
            .or_else(|| t.strip_prefix("or "))
            .unwrap_or(t)
            .trim_start();
        let epic_len = t.bytes().take_while(u8::is_ascii_digit).count();
        if epic_len == 0 {
            break;
        }
        let Some(after_dot) = t[epic_len..].strip_prefix('.') else {
            break;
        };
        let story_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
        if story_len == 0 {
            break;
        }
        let mut story = after_dot[..story_len].to_string();
        let mut consumed = epic_len + 1 + story_len;
        if let Some(c) = after_dot[story_len..].chars().next()
            && c.is_ascii_lowercase()
            && after_dot[story_len + 1..]
                .chars()
                .next()
                .is_none_or(|n| !n.is_ascii_alphanumeric())
        {
            story.push(c);
            consumed += 1;
        }
        out.push((t[..epic_len].to_string(), story));
        rest = &t[consumed..];
        if out.len() >= 50 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(key: &str, status: &str, activity: Activity, deps: &[&str]) -> Candidate {
        Candidate {
            key: key.to_string(),
            status: status.to_string(),
            activity,
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn statuses(stories: &[Candidate]) -> BTreeMap<String, String> {
        stories
            .iter()
            .map(|c| (c.key.clone(), c.status.clone()))
            .collect()
    }

    fn run(stories: &[Candidate], after: &BTreeMap<String, Vec<String>>, slots: usize) -> Plan {
        let st = statuses(stories);
        plan(&PlanInput {
            stories,
            statuses: &st,
            after,
            slots,
            may_start: None,
        })
    }

    #[test]
    fn independent_stories_fill_the_slots_in_file_order() {
        let s = [
            c("1-1-a", "backlog", Activity::Idle, &[]),
            c("1-2-b", "ready-for-dev", Activity::Idle, &[]),
            c("1-3-c", "backlog", Activity::Idle, &[]),
            c("1-4-d", "backlog", Activity::Idle, &[]),
            c("1-5-e", "done", Activity::Idle, &[]),
        ];
        let p = run(&s, &BTreeMap::new(), 3);
        assert_eq!(p.start, ["1-1-a", "1-2-b", "1-3-c"]);
        assert_eq!(
            p.waiting,
            [Waiting {
                key: "1-4-d".into(),
                why: Why::NoSlot
            }]
        );
        // One slot: today's order, one at a time.
        assert_eq!(run(&s, &BTreeMap::new(), 1).start, ["1-1-a"]);
    }

    #[test]
    fn running_stories_hold_their_slots() {
        let s = [
            c("1-1-a", "in-progress", Activity::Running, &[]),
            c("1-2-b", "review", Activity::Running, &[]),
            c("1-3-c", "backlog", Activity::Idle, &[]),
            c("1-4-d", "backlog", Activity::Idle, &[]),
        ];
        let p = run(&s, &BTreeMap::new(), 3);
        assert_eq!(p.running, ["1-1-a", "1-2-b"]);
        assert_eq!(p.start, ["1-3-c"]);
        assert_eq!(p.waiting[0].why, Why::NoSlot);
    }

    #[test]
    fn a_dependency_keeps_a_story_waiting_until_it_is_done() {
        let mut after = BTreeMap::new();
        after.insert("1-3-c".to_string(), vec!["1-1-a".to_string()]);
        let s = [
            c("1-1-a", "in-progress", Activity::Running, &[]),
            c("1-2-b", "backlog", Activity::Idle, &["1-1-a"]),
            c("1-3-c", "backlog", Activity::Idle, &[]),
            c("1-4-d", "backlog", Activity::Idle, &[]),
        ];
        let p = run(&s, &after, 3);
        assert_eq!(p.start, ["1-4-d"]);
        assert_eq!(
            p.waiting,
            [
                Waiting {
                    key: "1-2-b".into(),
                    why: Why::Dependency(vec!["1-1-a".into()])
                },
                Waiting {
                    key: "1-3-c".into(),
                    why: Why::Dependency(vec!["1-1-a".into()])
                },
            ]
        );
        assert_eq!(p.waiting[0].why.text(), "waits for 1-1-a (not done)");
        // Once it is done, both start.
        let mut s2 = s.clone();
        s2[0] = c("1-1-a", "done", Activity::Idle, &[]);
        let p = run(&s2, &after, 3);
        assert_eq!(p.start, ["1-2-b", "1-3-c", "1-4-d"]);
        assert!(p.waiting.is_empty());
    }

    #[test]
    fn a_dependency_in_another_epic_counts_by_its_status() {
        let s = [c("2-1-a", "backlog", Activity::Idle, &["1-4-x"])];
        let mut st = statuses(&s);
        st.insert("1-4-x".into(), "review".into());
        let after = BTreeMap::new();
        let go = |st: &BTreeMap<String, String>| {
            plan(&PlanInput {
                stories: &s,
                statuses: st,
                after: &after,
                slots: 2,
                may_start: None,
            })
        };
        assert_eq!(
            go(&st).waiting[0].why,
            Why::Dependency(vec!["1-4-x".into()])
        );
        st.insert("1-4-x".into(), "done".into());
        assert_eq!(go(&st).start, ["2-1-a"]);
    }

    #[test]
    fn questions_and_failures_are_never_started_and_hold_no_slot() {
        let s = [
            c("1-1-a", "in-progress", Activity::Question, &[]),
            c("1-2-b", "review", Activity::Failed, &[]),
            c("1-3-c", "backlog", Activity::Idle, &[]),
            c("1-4-d", "blocked", Activity::Idle, &[]),
        ];
        let p = run(&s, &BTreeMap::new(), 1);
        assert_eq!(p.start, ["1-3-c"]);
        assert_eq!(p.waiting[0].why, Why::Question);
        assert_eq!(p.waiting[1].why, Why::Failed);
        assert_eq!(p.waiting[2].why, Why::Status("blocked".into()));
        // A question alone: nothing runs, nothing can start.
        let p = run(&s[..1], &BTreeMap::new(), 3);
        assert!(p.is_stuck());
        assert!(
            p.describe()[0].contains("baton epic answer"),
            "{:?}",
            p.describe()
        );
    }

    #[test]
    fn a_dependency_cycle_is_named() {
        let mut after = BTreeMap::new();
        after.insert("1-1-a".to_string(), vec!["1-2-b".to_string()]);
        let s = [
            c("1-1-a", "backlog", Activity::Idle, &[]),
            c("1-2-b", "backlog", Activity::Idle, &["1-1-a"]),
        ];
        let p = run(&s, &after, 2);
        assert!(p.is_stuck());
        assert_eq!(
            p.waiting[0].why,
            Why::Cycle(vec!["1-1-a".into(), "1-2-b".into(), "1-1-a".into()])
        );
        assert!(p.waiting[0].why.text().contains("1-1-a → 1-2-b → 1-1-a"));
    }

    #[test]
    fn a_running_story_with_a_dependency_found_late_holds_before_dev() {
        let s = [
            c("1-1-a", "in-progress", Activity::Running, &[]),
            c("1-2-b", "ready-for-dev", Activity::Running, &["1-1-a"]),
        ];
        let p = run(&s, &BTreeMap::new(), 2);
        assert_eq!(p.running, ["1-1-a", "1-2-b"]);
        assert_eq!(
            p.hold,
            [Waiting {
                key: "1-2-b".into(),
                why: Why::Dependency(vec!["1-1-a".into()])
            }]
        );
    }

    #[test]
    fn max_stories_bounds_the_starts() {
        let s = [
            c("1-1-a", "backlog", Activity::Idle, &[]),
            c("1-2-b", "backlog", Activity::Idle, &[]),
        ];
        let st = statuses(&s);
        let after = BTreeMap::new();
        let p = plan(&PlanInput {
            stories: &s,
            statuses: &st,
            after: &after,
            slots: 3,
            may_start: Some(1),
        });
        assert_eq!(p.start, ["1-1-a"]);
        assert_eq!(p.waiting[0].why, Why::Limit);
    }

    #[test]
    fn waves_show_what_runs_together() {
        let s = [
            c("1-1-a", "backlog", Activity::Idle, &[]),
            c("1-2-b", "backlog", Activity::Idle, &["1-1-a"]),
            c("1-3-c", "backlog", Activity::Idle, &[]),
            c("1-4-d", "backlog", Activity::Idle, &[]),
            c("1-5-e", "backlog", Activity::Question, &[]),
        ];
        let st = statuses(&s);
        let after = BTreeMap::new();
        let w = waves(&PlanInput {
            stories: &s,
            statuses: &st,
            after: &after,
            slots: 2,
            may_start: None,
        });
        assert_eq!(
            w,
            [
                vec!["1-1-a".to_string(), "1-3-c".to_string()],
                vec!["1-2-b".to_string(), "1-4-d".to_string()],
            ]
        );
    }

    #[test]
    fn bmad_prose_dependencies_are_read() {
        let known = [
            "1-1-scaffold",
            "1-2-user-auth",
            "1-3-profile",
            "1-4-search",
            "1-10-admin",
            "2-1-billing",
        ];
        let story = "# Story 1.4: Search\n\nStatus: backlog\n\n## Story\n\nAs a user...\n\n## Dev Notes\n\n- This story depends on Story 1.2 (login) and uses React 18.2.\n- Requires the API from 1-3-profile.\n- Story 1.10 is required by nobody here.\n- Will be required by Story 2.1.\n";
        assert_eq!(
            dependencies_in("1-4-search", story, &known),
            ["1-2-user-auth", "1-3-profile"]
        );
        // A dependencies section: every story it names; a list of stories.
        let story = "# Story 2.1\n\n### Cross-Story Dependencies\n\n- Stories 1.1, 1.3 and 1.10\n\n## Tasks\n\n- Story 1.2 mentioned, no dependency\n";
        assert_eq!(
            dependencies_in("2-1-billing", story, &known),
            ["1-1-scaffold", "1-3-profile", "1-10-admin"]
        );
        // Said not to depend; a later story; itself; an unknown story.
        let story = "This story does not depend on Story 1.1.\nDepends on Story 1.4 and Story 1.3 and Story 9.9.\n";
        assert_eq!(
            dependencies_in("1-3-profile", story, &known),
            Vec::<String>::new()
        );
        assert!(dependencies_in("9-9-unknown", story, &known).is_empty());
        // A key inside a longer word is not a reference.
        let story = "Requires 1-1-scaffolding-v2 only.\n";
        assert!(dependencies_in("1-4-search", story, &known).is_empty());
    }

    #[test]
    fn the_config_reads_a_number_or_a_table() {
        #[derive(Deserialize)]
        struct T {
            parallel: ParallelConfig,
        }
        let t: T = toml::from_str("parallel = 3\n").unwrap();
        assert_eq!(t.parallel.stories, 3);
        let t: T = toml::from_str("[parallel]\nstories = 2\nafter = { \"1-3-x\" = [\"1-2-y\"] }\n")
            .unwrap();
        assert_eq!(t.parallel.stories, 2);
        assert_eq!(t.parallel.after["1-3-x"], ["1-2-y"]);
        let t: T = toml::from_str("[parallel]\nafter = {}\n").unwrap();
        assert_eq!(t.parallel.stories, 1);
        assert!(toml::from_str::<T>("parallel = 0\n").is_err());
        assert!(toml::from_str::<T>("[parallel]\nslots = 2\n").is_err());
        let known = ["1-2-y", "1-3-x"];
        let mut cfg = ParallelConfig::default();
        cfg.after.insert("1-3-x".into(), vec!["1-2-y".into()]);
        assert!(cfg.check_after(&known).is_ok());
        cfg.after.insert("1-3-x".into(), vec!["1-9-z".into()]);
        let e = cfg.check_after(&known).unwrap_err();
        assert_eq!(e.code, "EPIC_CONFIG_INVALID");
        assert!(e.message.contains("1-9-z"), "{e}");
    }
}
