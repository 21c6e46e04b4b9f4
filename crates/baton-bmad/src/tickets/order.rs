//! Where each ticket stands and which one is built next, by `tickets.py next`'s rules: epics
//! and entries in build order (table order); an `after` (the entry's or its epic's) is
//! satisfied only by a stored `done`; done, dropped, blocked and built tickets are not built
//! again; an entry without a file has not been pulled. Every `after` must name something in the
//! initiative, and the prerequisites must not loop: both are refused, located.

use super::manifest::After;
use super::{Epic, Initiative, Ticket, Tree};
use crate::error::{BmadError, Result};

/// Where a ticket stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Done,
    Dropped,
    /// Waiting on a person (its reason is in the file).
    Blocked,
    /// Built: its build is over; only a review (the user's, or an orchestrator's) makes it done.
    Built,
    /// Prerequisites not done yet (their keys).
    Waiting(Vec<String>),
    /// No file yet: BMAD's ticketing pulls it first.
    NotPulled,
    /// Can be built now.
    Runnable,
}

impl State {
    pub fn as_str(&self) -> &'static str {
        match self {
            State::Done => "done",
            State::Dropped => "dropped",
            State::Blocked => "blocked",
            State::Built => "built",
            State::Waiting(_) => "waiting",
            State::NotPulled => "not-pulled",
            State::Runnable => "runnable",
        }
    }
}

/// Where the tickets a walk may take are: a whole initiative, or one epic of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub initiative: usize,
    pub epic: Option<usize>,
}

fn unknown(epic: &Epic, t: Option<&Ticket>, after: &After, why: &str) -> BmadError {
    let at = match t {
        Some(t) => format!("{} (line {})", epic.manifest_path(), t.line),
        None => format!("the [[epic]] of {}", epic.folder),
    };
    BmadError::usage(
        "TICKETS_AFTER_UNKNOWN",
        format!("{at}: field after: {:?} {why}", after.to_string()),
    )
    .hint("an `after` names a sibling's id (3), \"<epic id>.<entry id>\" or \"epic-<slug>\" of the same initiative")
}

impl Initiative {
    fn epic_named(&self, name: &str) -> Option<&Epic> {
        self.epics.iter().find(|e| e.name == name)
    }

    /// The keys of the tickets an `after` stands for (`Err`: it names nothing).
    fn resolve(&self, epic: &Epic, t: Option<&Ticket>, after: &After) -> Result<Vec<String>> {
        match after {
            After::Sibling(id) => match epic.tickets.iter().find(|x| x.id == *id) {
                Some(x) => Ok(vec![x.key.clone()]),
                None => Err(unknown(epic, t, after, "is no entry of this epic")),
            },
            After::Entry { epic: e, entry } => {
                let other = self
                    .epics
                    .iter()
                    .find(|x| x.id == Some(*e))
                    .ok_or_else(|| unknown(epic, t, after, "names an epic id no epic has"))?;
                match other.tickets.iter().find(|x| x.id == *entry) {
                    Some(x) => Ok(vec![x.key.clone()]),
                    None => Err(unknown(epic, t, after, "is no entry of that epic")),
                }
            }
            After::Epic(name) => match self.epic_named(name) {
                Some(other) => Ok(other.tickets.iter().map(|x| x.key.clone()).collect()),
                None => Err(unknown(
                    epic,
                    t,
                    after,
                    "is no epic folder of this initiative",
                )),
            },
        }
    }

    /// Every prerequisite of a ticket: its own `after` and its epic's.
    fn prerequisites(&self, epic: &Epic, t: &Ticket) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        for a in &t.after {
            keys.extend(self.resolve(epic, Some(t), a)?);
        }
        for a in &epic.after {
            keys.extend(self.resolve(epic, None, a)?);
        }
        keys.retain(|k| *k != t.key);
        keys.dedup();
        Ok(keys)
    }

    fn ticket(&self, key: &str) -> Option<(&Epic, &Ticket)> {
        self.epics
            .iter()
            .find_map(|e| e.tickets.iter().find(|t| t.key == key).map(|t| (e, t)))
    }

    /// Where a ticket stands.
    pub fn state(&self, epic: &Epic, t: &Ticket) -> State {
        match t.status.as_deref() {
            Some("done") => return State::Done,
            Some("dropped") => return State::Dropped,
            _ if t.is_blocked() => return State::Blocked,
            Some("built") => return State::Built,
            _ => {}
        }
        let waiting: Vec<String> = self
            .prerequisites(epic, t)
            .unwrap_or_default()
            .into_iter()
            .filter(|k| {
                self.ticket(k)
                    .is_none_or(|(_, p)| p.status.as_deref() != Some("done"))
            })
            .collect();
        if !waiting.is_empty() {
            return State::Waiting(waiting);
        }
        if t.file.is_none() {
            return State::NotPulled;
        }
        State::Runnable
    }
}

impl Tree {
    /// Every `after` names something, and no ticket waits on itself through them.
    pub(super) fn check_after(&self) -> Result<()> {
        for init in &self.initiatives {
            let mut graph: Vec<(&Epic, &Ticket, Vec<String>)> = Vec::new();
            for epic in &init.epics {
                for t in &epic.tickets {
                    graph.push((epic, t, init.prerequisites(epic, t)?));
                }
            }
            // Depth-first, three colours: a grey ticket met again closes a cycle.
            let index = |k: &str| graph.iter().position(|(_, t, _)| t.key == k);
            let mut colour = vec![0u8; graph.len()];
            for start in 0..graph.len() {
                if colour[start] != 0 {
                    continue;
                }
                let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
                colour[start] = 1;
                while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                    let deps = &graph[node].2;
                    if *next >= deps.len() {
                        colour[node] = 2;
                        stack.pop();
                        continue;
                    }
                    let dep = &deps[*next];
                    *next += 1;
                    let Some(d) = index(dep) else { continue };
                    match colour[d] {
                        0 => {
                            colour[d] = 1;
                            stack.push((d, 0));
                        }
                        1 => {
                            let from = stack.iter().position(|(n, _)| *n == d).unwrap_or(0);
                            let mut path: Vec<&str> = stack[from..]
                                .iter()
                                .map(|(n, _)| graph[*n].1.key.as_str())
                                .collect();
                            path.push(graph[d].1.key.as_str());
                            let (epic, t, _) = &graph[d];
                            return Err(BmadError::usage(
                                "TICKETS_AFTER_CYCLE",
                                format!(
                                    "{} (line {}): the prerequisites loop: {}; no ticket of the loop can ever start",
                                    epic.manifest_path(),
                                    t.line,
                                    path.join(" → ")
                                ),
                            )
                            .hint("remove one `after` of the loop (an `after` lists real prerequisites only)"));
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// The ticket built next in `scope`: the first runnable one in build order.
    pub fn next(&self, scope: &Scope) -> Option<&Ticket> {
        let init = self.initiatives.get(scope.initiative)?;
        init.epics
            .iter()
            .enumerate()
            .filter(|(i, _)| scope.epic.is_none_or(|e| e == *i))
            .flat_map(|(_, e)| e.tickets.iter().map(move |t| (e, t)))
            .find(|(e, t)| init.state(e, t) == State::Runnable)
            .map(|(_, t)| t)
    }

    /// Where the ticket of `key` stands.
    pub fn state_of(&self, key: &str) -> Option<State> {
        self.initiatives
            .iter()
            .find_map(|i| i.ticket(key).map(|(e, t)| i.state(e, t)))
    }

    /// The scope a name stands for: an initiative's folder name (`initiative-<slug>`), an
    /// epic's (`epic-<slug>`, or its slug), an epic id (`3`, `epic-3`), or a project-relative
    /// folder as recorded in an epic id. `None`: nothing of the tree.
    pub fn scope(&self, name: &str) -> Option<Scope> {
        let name = name.trim().trim_end_matches('/');
        // An epic id as the loop records it (`tickets:<folder>`), e.g. from a printed hint.
        let name = super::scope_of(name).unwrap_or(name);
        for (i, init) in self.initiatives.iter().enumerate() {
            if init.name == name || init.folder == name {
                return Some(Scope {
                    initiative: i,
                    epic: None,
                });
            }
        }
        let id = name
            .strip_prefix("epic-")
            .unwrap_or(name)
            .parse::<u64>()
            .ok();
        let mut found = None;
        for (i, init) in self.initiatives.iter().enumerate() {
            for (j, e) in init.epics.iter().enumerate() {
                let hit = e.name == name
                    || e.folder == name
                    || e.name == format!("epic-{name}")
                    || (id.is_some() && e.id == id);
                if hit {
                    if found.is_some() {
                        // Two initiatives have an epic of that name: only a folder says which.
                        return None;
                    }
                    found = Some(Scope {
                        initiative: i,
                        epic: Some(j),
                    });
                }
            }
        }
        found
    }

    /// The project-relative folder of a scope (what an epic id records).
    pub fn scope_folder(&self, scope: &Scope) -> Option<String> {
        let init = self.initiatives.get(scope.initiative)?;
        match scope.epic {
            None => Some(init.folder.clone()),
            Some(e) => init.epics.get(e).map(|e| e.folder.clone()),
        }
    }

    /// The tickets of a scope, in build order, with their state.
    pub fn walk(&self, scope: &Scope) -> Vec<(&Epic, &Ticket, State)> {
        let Some(init) = self.initiatives.get(scope.initiative) else {
            return Vec::new();
        };
        init.epics
            .iter()
            .enumerate()
            .filter(|(i, _)| scope.epic.is_none_or(|e| e == *i))
            .flat_map(|(_, e)| e.tickets.iter().map(move |t| (e, t, init.state(e, t))))
            .collect()
    }
}
