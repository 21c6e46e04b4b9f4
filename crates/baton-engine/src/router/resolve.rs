//! The resolution algorithm (crewagent menu contract §5): empty → menu; a number → that
//! visible item, or a question with the valid range; an exact trigger, `cmd`, alias, `[code]`
//! or handler match (a leading `*` ignored); a unique best fuzzy match; otherwise chat.
//! Only the first line is matched; the lines after it are the detail, kept for the agent.

use super::command::{Candidate, Confidence, Kind, ResolvedCommand, RouteError};
use super::menu::{Handler, Menu, MenuItem, Target, bare};
use super::refs::{self, Exec};
use baton_package::Package;
use baton_package::model::Agent;

/// Words that work whatever the menu holds, typed as `/word` or `*word`.
const GLOBALS: &[(&str, Kind)] = &[
    ("menu", Kind::ShowMenu),
    ("help", Kind::ShowMenu),
    ("dismiss", Kind::DismissAgent),
    ("exit", Kind::DismissAgent),
    ("resume", Kind::ResumeRun),
];

/// What `input` means to `agent` (whose menu is `menu`).
pub fn resolve(
    package: &Package,
    agent: &Agent,
    menu: &Menu,
    input: &str,
) -> Result<ResolvedCommand, RouteError> {
    let (first, detail) = match input.split_once('\n') {
        Some((first, rest)) => (first.trim(), Some(rest.trim()).filter(|d| !d.is_empty())),
        None => (input.trim(), None),
    };
    if first.is_empty() && detail.is_none() {
        return Ok(ResolvedCommand::new(Kind::ShowMenu, Confidence::Exact).reason("empty input"));
    }
    // Step 2: a number picks a visible item.
    if !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit()) {
        let n: Option<usize> = first.parse().ok();
        return match n.and_then(|n| menu.item(n)) {
            Some(item) => choose(
                package,
                agent,
                item,
                None,
                Confidence::Exact,
                detail,
                "number",
            ),
            None => Ok(out_of_range(menu, first)),
        };
    }
    // Step 3: exact trigger, cmd, alias, [code] or handler, case-insensitive.
    let key = bare(first).to_lowercase();
    let mut exact: Vec<(&MenuItem, Option<&Handler>)> = Vec::new();
    for item in menu.visible() {
        let names = item
            .trigger
            .iter()
            .chain(item.cmd.iter())
            .chain(item.aliases.iter())
            .chain(item.code.iter());
        if names.map(|n| bare(n).to_lowercase()).any(|n| n == key) {
            exact.push((item, None));
        } else if let Some(h) = item
            .handlers
            .iter()
            .find(|h| bare(&h.matches).to_lowercase() == key)
        {
            exact.push((item, Some(h)));
        }
    }
    match exact.as_slice() {
        [(item, handler)] => {
            return choose(
                package,
                agent,
                item,
                *handler,
                Confidence::Exact,
                detail,
                "exact",
            );
        }
        [_, _, ..] => {
            let items: Vec<&MenuItem> = exact.iter().map(|(i, _)| *i).collect();
            return Ok(clarify(
                &items,
                format!("'{first}' names several menu items"),
            ));
        }
        [] => {}
    }
    if first.starts_with('/') || first.starts_with('*') {
        let word = first.trim_start_matches(['/', '*']).to_lowercase();
        if let Some((_, kind)) = GLOBALS.iter().find(|(w, _)| *w == word) {
            return Ok(ResolvedCommand::new(*kind, Confidence::Exact)
                .reason(format!("global command {first}")));
        }
        if matches!(word.as_str(), "pause" | "stop") {
            return Ok(
                ResolvedCommand::new(Kind::ShowMenu, Confidence::Exact).reason(format!(
                    "{first} applies to a running workflow, and none is running"
                )),
            );
        }
    }
    // Step 4: fuzzy.
    if let Some(found) = fuzzy(menu, &key) {
        return match found {
            Fuzzy::One(item, handler, score) => {
                let confidence = match score {
                    90.. => Confidence::High,
                    70.. => Confidence::Medium,
                    _ => Confidence::Low,
                };
                choose(package, agent, item, handler, confidence, detail, "fuzzy")
            }
            Fuzzy::Tie(items) => Ok(clarify(
                &items,
                format!("'{first}' matches several menu items equally"),
            )),
        };
    }
    // Step 5: chat with the agent.
    let mut chat = ResolvedCommand::new(Kind::Chat, Confidence::Low).reason("no menu item matches");
    chat.input = Some(input.trim().to_string());
    Ok(chat)
}

fn out_of_range(menu: &Menu, typed: &str) -> ResolvedCommand {
    let visible: Vec<&MenuItem> = menu.visible().collect();
    let reason = if visible.is_empty() {
        format!("there is no item {typed}: the menu is empty")
    } else {
        format!(
            "there is no item {typed}: choose a number from 1 to {}",
            visible.len()
        )
    };
    clarify(&visible, reason)
}

fn clarify(items: &[&MenuItem], reason: String) -> ResolvedCommand {
    let mut c = ResolvedCommand::new(Kind::ClarifyChoice, Confidence::Low).reason(reason);
    let mut seen = Vec::new();
    for item in items {
        if let Some(index) = item.index
            && !seen.contains(&index)
        {
            seen.push(index);
            c.candidates.push(Candidate {
                index,
                label: format!("{index}. {}", item.description),
            });
        }
    }
    c.candidates.sort_by_key(|c| c.index);
    c
}

enum Fuzzy<'m> {
    One(&'m MenuItem, Option<&'m Handler>, u32),
    Tie(Vec<&'m MenuItem>),
}

/// Lowercase words: `-`, `_` and punctuation are spaces.
fn words(s: &str) -> String {
    s.to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whole words 10 more than a substring.
fn score(field: &str, query: &str, base: u32) -> Option<u32> {
    let field = words(field);
    if field.is_empty() {
        return None;
    }
    if format!(" {field} ").contains(&format!(" {query} ")) {
        Some(base + 10)
    } else if field.contains(query) {
        Some(base)
    } else {
        None
    }
}

/// Trigger, cmd and alias (90/100) beat a handler's match (70/80), which beats the
/// description (50/60). A unique top score wins; a tie asks.
fn fuzzy<'m>(menu: &'m Menu, key: &str) -> Option<Fuzzy<'m>> {
    let query = words(key);
    // One letter matches nearly everything.
    if query.chars().count() < 2 {
        return None;
    }
    let mut best: Vec<(&MenuItem, Option<&Handler>, u32)> = Vec::new();
    for item in menu.visible() {
        let mut top: Option<(Option<&Handler>, u32)> = None;
        let mut consider = |handler: Option<&'m Handler>, s: Option<u32>| {
            if let Some(s) = s
                && top.is_none_or(|(_, t)| s > t)
            {
                top = Some((handler, s));
            }
        };
        for name in item
            .trigger
            .iter()
            .chain(item.cmd.iter())
            .chain(item.aliases.iter())
        {
            consider(None, score(name, &query, 90));
        }
        for h in &item.handlers {
            consider(Some(h), score(&h.matches, &query, 70));
        }
        consider(None, score(&item.description, &query, 50));
        if let Some((handler, s)) = top {
            best.push((item, handler, s));
        }
    }
    let max = best.iter().map(|(_, _, s)| *s).max()?;
    let top: Vec<_> = best.into_iter().filter(|(_, _, s)| *s == max).collect();
    match top.as_slice() {
        [(item, handler, s)] => Some(Fuzzy::One(item, *handler, *s)),
        _ => Some(Fuzzy::Tie(top.iter().map(|(i, _, _)| *i).collect())),
    }
}

/// The command a chosen item (or one of its handlers) gives.
fn choose(
    package: &Package,
    agent: &Agent,
    item: &MenuItem,
    handler: Option<&Handler>,
    confidence: Confidence,
    detail: Option<&str>,
    how: &str,
) -> Result<ResolvedCommand, RouteError> {
    let (target, data) = match handler {
        Some(h) => (&h.target, h.data.as_ref().or(item.data.as_ref())),
        None => (&item.target, item.data.as_ref()),
    };
    refs::validate(package, item)?;
    let mut c = match target {
        Target::Workflow(raw) => {
            let mut c = ResolvedCommand::new(Kind::StartWorkflow, confidence);
            c.workflow_ref = Some(refs::workflow(package, raw)?);
            c
        }
        Target::Exec(raw) => match refs::exec(package, raw)? {
            Exec::Workflow(w) => {
                let mut c = ResolvedCommand::new(Kind::StartWorkflow, confidence);
                c.workflow_ref = Some(w);
                c
            }
            Exec::Script(e) => {
                let mut c = ResolvedCommand::new(Kind::ExecScript, confidence);
                c.exec_ref = Some(e);
                c
            }
        },
        Target::Action(raw) => {
            let (builtin, action) = refs::action(agent, raw)?;
            let mut c = ResolvedCommand::new(builtin.unwrap_or(Kind::RunAction), confidence);
            c.action_ref = Some(action);
            c
        }
        Target::None => {
            let mut c = ResolvedCommand::new(Kind::Chat, confidence);
            c.input = Some(item.description.clone());
            c
        }
    };
    c.reason = Some(format!(
        "{how} match of menu item {}",
        item.index.unwrap_or(0)
    ));
    c.matched_menu_item_index = item.index;
    c.matched_menu_item_id = Some(item.id());
    c.data_ref = data.map(|d| refs::data(d));
    if let Some(d) = detail {
        c.input = Some(match c.input.take() {
            Some(text) => format!("{text}\n{d}"),
            None => d.to_string(),
        });
    }
    Ok(c)
}
