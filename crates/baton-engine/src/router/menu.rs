//! An agent's menu as the router sees it: items parsed from `agents.json` (where items may
//! carry any extra keys), their targets, and which are visible — and numbered — on a surface.

use baton_package::model::Agent;
use serde_json::Value;

/// Where the menu is shown. `web-only` items are hidden in a terminal, `ide-only` items on
/// the web; hidden items are not numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Terminal,
    Web,
}

/// What choosing an item does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Workflow(String),
    Exec(String),
    Action(String),
    /// An item with nothing to run: its description is said to the agent.
    None,
}

/// A `triggers[{type: "handler", match, workflow|exec|action, data?}]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handler {
    pub matches: String,
    pub target: Target,
    pub data: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MenuItem {
    /// 1-based number among the visible items; `None` when hidden.
    pub index: Option<usize>,
    pub description: String,
    pub trigger: Option<String>,
    /// BMAD's older `cmd` (often written `*name`).
    pub cmd: Option<String>,
    pub aliases: Vec<String>,
    /// A short code written as `[CS]` in the description.
    pub code: Option<String>,
    pub handlers: Vec<Handler>,
    pub target: Target,
    pub data: Option<String>,
    pub validate_workflow: Option<String>,
    /// Why the item is not shown, when it is not.
    pub hidden: Option<&'static str>,
}

impl MenuItem {
    /// The id a resolved command names the item by.
    pub fn id(&self) -> String {
        self.trigger
            .clone()
            .or_else(|| self.cmd.clone())
            .unwrap_or_else(|| self.description.clone())
    }
}

/// The menu of one agent on one surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Menu {
    pub items: Vec<MenuItem>,
    /// Items that were left out, and why.
    pub warnings: Vec<String>,
}

fn text(item: &Value, key: &str) -> Option<String> {
    item.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn flag(item: &Value, key: &str) -> bool {
    item.get(key).and_then(Value::as_bool) == Some(true)
}

fn target(item: &Value) -> Target {
    if let Some(w) = text(item, "workflow") {
        Target::Workflow(w)
    } else if let Some(e) = text(item, "exec") {
        Target::Exec(e)
    } else if let Some(a) = text(item, "action") {
        Target::Action(a)
    } else {
        Target::None
    }
}

/// `CS` from a description such as `[CS] Create Story`.
fn code(description: &str) -> Option<String> {
    let rest = description.trim_start().strip_prefix('[')?;
    let end = rest.find(']')?;
    let code = &rest[..end];
    (1..=4)
        .contains(&code.len())
        .then_some(code)
        .filter(|c| c.chars().all(|ch| ch.is_ascii_alphanumeric()))
        .map(str::to_owned)
}

/// A trigger as typed: a leading `*` is not part of it.
pub fn bare(trigger: &str) -> &str {
    trigger.trim().trim_start_matches('*')
}

impl Menu {
    pub fn of(agent: &Agent, surface: Surface) -> Menu {
        let mut items = Vec::new();
        let mut warnings = Vec::new();
        let mut shown = 0;
        for (at, raw) in agent.menu.iter().enumerate() {
            let Some(description) = text(raw, "description") else {
                warnings.push(format!(
                    "menu item {} has no description and is left out",
                    at + 1
                ));
                continue;
            };
            let mut aliases = Vec::new();
            let mut handlers = Vec::new();
            for t in raw
                .get("triggers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(matches) = text(t, "match") else {
                    continue;
                };
                match t.get("type").and_then(Value::as_str) {
                    Some("alias") => aliases.push(matches),
                    Some("handler") => handlers.push(Handler {
                        matches,
                        target: target(t),
                        data: text(t, "data"),
                    }),
                    _ => {}
                }
            }
            let (ide, web) = (flag(raw, "ide-only"), flag(raw, "web-only"));
            let hidden = match (ide, web, surface) {
                (true, true, _) => {
                    warnings.push(format!(
                        "menu item '{description}' is both ide-only and web-only and is left out"
                    ));
                    Some("both ide-only and web-only")
                }
                (_, true, Surface::Terminal) => Some("web-only"),
                (true, _, Surface::Web) => Some("ide-only"),
                _ => None,
            };
            let index = hidden.is_none().then(|| {
                shown += 1;
                shown
            });
            items.push(MenuItem {
                index,
                code: code(&description),
                trigger: text(raw, "trigger").map(|t| bare(&t).to_string()),
                cmd: text(raw, "cmd").map(|t| bare(&t).to_string()),
                aliases,
                handlers,
                target: target(raw),
                data: text(raw, "data"),
                validate_workflow: text(raw, "validate-workflow"),
                hidden,
                description,
            });
        }
        Menu { items, warnings }
    }

    /// The items shown, in their numbered order.
    pub fn visible(&self) -> impl Iterator<Item = &MenuItem> {
        self.items.iter().filter(|i| i.index.is_some())
    }

    pub fn item(&self, index: usize) -> Option<&MenuItem> {
        self.visible().find(|i| i.index == Some(index))
    }

    pub fn len(&self) -> usize {
        self.visible().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
