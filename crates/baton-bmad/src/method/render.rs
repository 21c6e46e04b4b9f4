//! An installed skill or workflow turned into the text a phase run starts from, with
//! project-relative paths only (`@project/…` for the project, `@pkg/…` for the skill's rendered
//! files, which baton places in the run's read-only package folder).
//!
//! - A rendered skill (BMAD 6.10+): BMAD's `_bmad/scripts/render_skill.py`, run with `uv` in
//!   the sandbox, when `uv` is on PATH; otherwise baton does what that script does: every
//!   Markdown file of the skill but SKILL.md, with `{{.key}}` and `{{config.path}}` from the
//!   central configuration layers, `{workflow.path}` from the customization layers and
//!   `[[bmad-snapshot:file.md]]` pointing at the rendered copy.
//! - A plain skill (SKILL.md is the workflow): its Markdown files with the customization
//!   resolved the same way (the skill would otherwise resolve it with `uv` when it starts).
//! - A classic workflow: `workflow.yaml`'s variables resolved (`{project-root}`,
//!   `{config_source}:key`, references between them), then its instructions with those values.
//!
//! The result says which of these happened.

use super::files::{self, Reader};
use super::format::{self, Layer};
use super::jinja;
use super::layers::{self, Layers};
use super::{Installed, Kind};
use crate::error::{BmadError, Result};
use serde_json::Value;
use std::path::Path;

/// How the project is named in a rendered text.
pub const PROJECT: &str = "@project";
/// How the skill's rendered files are named in a rendered text.
pub const SNAPSHOT: &str = "@pkg";
/// BMAD's renderer, relative to the project.
pub const RENDER_SCRIPT: &str = "_bmad/scripts/render_skill.py";

/// A skill or workflow ready to be a phase run's prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The entry text (`workflow.md`, SKILL.md's body, or a classic workflow's variables and
    /// instructions).
    pub text: String,
    /// Files to place under `@pkg/` (path in the snapshot, bytes).
    pub snapshot: Vec<(String, Vec<u8>)>,
    /// How it was rendered, in words.
    pub how: String,
    /// The configuration and customization files that were applied.
    pub applied: Vec<String>,
}

/// Who renders a skill that BMAD renders with `render_skill.py`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renderer {
    /// BMAD's script, with `uv`, in the sandbox.
    Uv,
    /// baton itself, and why.
    Baton(String),
}

/// The renderer for `render` (`[autopilot] render`: auto, uv, baton), given the PATH and
/// whether the project has BMAD's script.
pub fn renderer(
    render: Option<&str>,
    path: Option<&std::ffi::OsStr>,
    has_script: bool,
) -> Renderer {
    match render {
        Some("baton") => Renderer::Baton("render = \"baton\" in baton.toml".into()),
        Some("uv") => Renderer::Uv,
        _ if !has_script => Renderer::Baton(format!("{RENDER_SCRIPT} is missing")),
        _ if on_path("uv", path) => Renderer::Uv,
        _ => Renderer::Baton("uv is not on PATH".into()),
    }
}

/// Whether an executable `name` is in one of `path`'s folders.
pub fn on_path(name: &str, path: Option<&std::ffi::OsStr>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = path else {
        return false;
    };
    std::env::split_paths(path).any(|dir| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn failed(inst: &Installed, problem: impl std::fmt::Display) -> BmadError {
    BmadError::usage(
        "EPIC_SKILL_RENDER_FAILED",
        format!("{} ({}): {problem}", inst.name, inst.rel),
    )
    .hint("BMAD's own renderer stops on the same problem; fix the skill or its configuration, or pick another method for the phase in baton.toml")
}

/// Renders `inst` with baton's own resolution (`why`: why not BMAD's script, for a rendered
/// skill).
pub fn render(reader: &Reader, inst: &Installed, why: &str) -> Result<Rendered> {
    match &inst.kind {
        Kind::Rendered => render_skill(reader, inst, "workflow.md", true, why),
        Kind::Plain => render_skill(reader, inst, "SKILL.md", false, why),
        Kind::Steps => render_skill(reader, inst, "workflow.md", false, why),
        Kind::Classic { instructions } => render_classic(reader, inst, instructions),
    }
}

/// A token of BMAD's rendering.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token<'a> {
    /// `{{.key}}`
    Short(&'a str),
    /// `{{config.a.b}}`
    Config(&'a str),
    /// `{workflow.a.b}`
    Custom(&'a str),
    /// `[[bmad-snapshot:file.md]]`
    Snapshot(&'a str),
}

fn is_key(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_path(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// The token at the start of `s`, and its length.
fn token_at(s: &str) -> Option<(Token<'_>, usize)> {
    let grab = |prefix: &str, end: &str, ok: fn(char) -> bool| -> Option<(&str, usize)> {
        let rest = s.strip_prefix(prefix)?;
        let stop = rest.find(end)?;
        let inner = &rest[..stop];
        (!inner.is_empty() && inner.chars().all(ok))
            .then_some((inner, prefix.len() + stop + end.len()))
    };
    if let Some((k, n)) = grab("{{.", "}}", is_key) {
        return Some((Token::Short(k), n));
    }
    if let Some((p, n)) = grab("{{config.", "}}", is_path) {
        return Some((Token::Config(p), n));
    }
    if let Some((p, n)) = grab("{workflow.", "}", is_path) {
        return Some((Token::Custom(p), n));
    }
    if let Some((p, n)) = grab("[[bmad-snapshot:", "]]", |c| is_path(c) || c == '/')
        && p.ends_with(".md")
    {
        return Some((Token::Snapshot(p), n));
    }
    None
}

/// `text` with every token replaced by `f` (`None`: kept as written). Replaced values are not
/// scanned again.
fn substitute(
    text: &str,
    mut f: impl FnMut(&Token<'_>) -> Result<Option<String>>,
) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['{', '[']) {
        out.push_str(&rest[..at]);
        let here = &rest[at..];
        match token_at(here) {
            Some((token, n)) => {
                match f(&token)? {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&here[..n]),
                }
                rest = &here[n..];
            }
            None => {
                let c = here.chars().next().map_or(1, char::len_utf8);
                out.push_str(&here[..c]);
                rest = &here[c..];
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A configuration value as the model sees it: `{project-root}` is `@project`.
fn project_relative(value: &str) -> String {
    value.replace("{project-root}", PROJECT)
}

/// A customization value as text (lists as Markdown lists, review layers as sections), as
/// BMAD prints it.
fn format_custom(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(items)
            if items.iter().all(toml::Value::is_table) && !items.is_empty() =>
        {
            let text = |item: &toml::Value, k: &str| {
                item.get(k).and_then(toml::Value::as_str).map(str::to_owned)
            };
            let layers: Vec<Layer> = items
                .iter()
                .map(|item| {
                    let id = text(item, "id").unwrap_or_default();
                    Layer {
                        name: text(item, "name").unwrap_or_else(|| id.clone()),
                        id,
                        when: text(item, "when"),
                        instruction: text(item, "instruction").unwrap_or_default(),
                    }
                })
                .collect();
            format::review_layers(&layers)
        }
        toml::Value::Array(items) => {
            let texts: Vec<String> = items
                .iter()
                .map(|i| match i {
                    toml::Value::String(s) => s.clone(),
                    other => layers::scalar_text(other).unwrap_or_default(),
                })
                .collect();
            format::markdown_list(&texts)
        }
        other => layers::scalar_text(other).unwrap_or_default(),
    }
}

/// Renders a skill (or a step-file workflow) from `entry`; `strict` as BMAD's renderer: a
/// value that cannot be found stops the rendering.
fn render_skill(
    reader: &Reader,
    inst: &Installed,
    entry: &str,
    strict: bool,
    why: &str,
) -> Result<Rendered> {
    let listed = reader.files(&inst.rel);
    if !listed.iter().any(|f| f == entry) {
        return Err(failed(inst, format!("{entry} is missing")));
    }
    let mut sources: Vec<(String, String)> = Vec::new();
    let mut others: Vec<(String, Vec<u8>)> = Vec::new();
    let mut total = 0u64;
    for name in &listed {
        let rel = files::join(&inst.rel, name);
        let Some(bytes) = reader.bytes(&rel, files::MAX_FILE)? else {
            continue;
        };
        total += bytes.len() as u64;
        if total > files::MAX_TOTAL {
            return Err(failed(
                inst,
                format!("its files are over {} bytes", files::MAX_TOTAL),
            ));
        }
        if name.ends_with(".md") && (name != "SKILL.md" || entry == "SKILL.md") {
            sources.push((name.clone(), String::from_utf8_lossy(&bytes).into_owned()));
        } else if name != "SKILL.md" {
            others.push((name.clone(), bytes));
        }
    }
    if inst.kind == Kind::Rendered && renders_jinja(reader, &sources) {
        return render_jinja(reader, inst, &sources, others, why);
    }
    let central = layers::central(reader)?;
    let uses_custom = sources.iter().any(|(_, t)| t.contains("{workflow."));
    let has_defaults = reader.is_file(&format!("{}/customize.toml", inst.rel));
    if strict && uses_custom && !has_defaults {
        return Err(failed(
            inst,
            "it uses {workflow.…} values but has no customize.toml",
        ));
    }
    let custom = if uses_custom && has_defaults {
        layers::customization(reader, &inst.rel, &inst.name)?
    } else {
        Layers::default()
    };
    let names: Vec<String> = sources.iter().map(|(n, _)| n.clone()).collect();
    let mut used_config = false;
    let mut rendered: Vec<(String, String)> = Vec::new();
    for (name, text) in &sources {
        let text = if name == "SKILL.md" {
            super::frontmatter(text).1
        } else {
            text.as_str()
        };
        let out = substitute(text, |token| {
            Ok(match token {
                Token::Short(key) => {
                    let found = layers::find_scalars(&central.table, key);
                    match found.as_slice() {
                        [(_, v)] => {
                            used_config = true;
                            layers::scalar_text(v).map(|s| project_relative(&s))
                        }
                        [] if strict => {
                            return Err(failed(
                                inst,
                                format!(
                                    "{name}: no configuration value `{key}` (looked in {})",
                                    shown_files(&central)
                                ),
                            ));
                        }
                        [] => None,
                        many => {
                            let paths: Vec<&str> = many.iter().map(|(p, _)| p.as_str()).collect();
                            return Err(failed(
                                inst,
                                format!(
                                    "{name}: configuration value `{key}` is ambiguous: {}",
                                    paths.join(", ")
                                ),
                            ));
                        }
                    }
                }
                Token::Config(path) => {
                    match layers::lookup(&central.table, path).and_then(layers::scalar_text) {
                        Some(v) => {
                            used_config = true;
                            Some(project_relative(&v))
                        }
                        None if strict => {
                            return Err(failed(
                                inst,
                                format!("{name}: no configuration value `{path}`"),
                            ));
                        }
                        None => None,
                    }
                }
                Token::Custom(path) => {
                    match layers::lookup(&custom.table, &format!("workflow.{path}")) {
                        Some(v) => Some(format_custom(v).replace("{skill-root}", SNAPSHOT)),
                        None if strict => {
                            return Err(failed(
                                inst,
                                format!("{name}: customize.toml has no `workflow.{path}`"),
                            ));
                        }
                        None => None,
                    }
                }
                Token::Snapshot(target) => {
                    if !names.iter().any(|n| n == target) {
                        return Err(failed(
                            inst,
                            format!("{name}: refers to {target}, which the skill does not have"),
                        ));
                    }
                    Some(format!("{SNAPSHOT}/{target}"))
                }
            })
        })?;
        let out = out
            .replace("{project-root}", PROJECT)
            .replace("{skill-root}", SNAPSHOT)
            .replace("{skill-name}", &inst.name);
        rendered.push((name.clone(), out));
    }
    let text = rendered
        .iter()
        .find(|(n, _)| n == entry)
        .map(|(_, t)| t.clone())
        .unwrap_or_default();
    let mut applied = Vec::new();
    if used_config {
        applied.extend(central.files.iter().cloned());
    }
    applied.extend(custom.files.iter().cloned());
    let steps = rendered.len().saturating_sub(1);
    let mut how = match &inst.kind {
        Kind::Rendered => format!(
            "resolved by baton's token renderer ({why}): {entry} and {steps} more Markdown files"
        ),
        _ => format!("resolved by baton: {entry} and {steps} more Markdown files"),
    };
    if !custom.files.is_empty() {
        how.push_str(&format!("; customization {}", custom.files.join(" < ")));
    }
    let mut snapshot: Vec<(String, Vec<u8>)> = rendered
        .into_iter()
        .map(|(n, t)| (n, t.into_bytes()))
        .collect();
    snapshot.extend(others);
    Ok(Rendered {
        text,
        snapshot,
        how,
        applied,
    })
}

/// Whether a rendered skill's sources are Jinja templates: BMAD's installed renderer says so
/// when the project has it (it renders Jinja from BMAD's post-6.12 versions on), else the
/// sources' own syntax.
fn renders_jinja(reader: &Reader, sources: &[(String, String)]) -> bool {
    match reader.text(RENDER_SCRIPT).ok().flatten() {
        Some(script) => jinja::script_renders_jinja(&script),
        None => jinja::is_jinja(sources),
    }
}

/// A rendered skill whose sources are Jinja templates (BMAD after 6.12).
fn render_jinja(
    reader: &Reader,
    inst: &Installed,
    sources: &[(String, String)],
    others: Vec<(String, Vec<u8>)>,
    why: &str,
) -> Result<Rendered> {
    let central = layers::central(reader)?;
    let custom = if reader.is_file(&format!("{}/customize.toml", inst.rel)) {
        layers::customization(reader, &inst.rel, &inst.name)?
    } else {
        Layers::default()
    };
    let values = jinja::Values::new(&central.table, &custom.table);
    let out = jinja::render(sources, &values).map_err(|stop| match stop {
        jinja::Stop::Halted { at, message } => BmadError::usage(
            "EPIC_SKILL_HALTED",
            format!("{} halted at {}/{at}: {message}", inst.name, inst.rel),
        )
        .hint(format!(
            "the skill refuses this configuration, as BMAD's renderer would; change the value it names (its customization: {}/customize.toml < _bmad/custom/{name}.toml < _bmad/custom/{name}.user.toml), or pick another method for the phase in baton.toml",
            inst.rel,
            name = inst.name
        )),
        jinja::Stop::Failed { at, message } => failed(inst, format!("{}/{at}: {message}", inst.rel)),
    })?;
    let total: usize = out.files.iter().map(|(_, t)| t.len()).sum();
    if total as u64 > files::MAX_TOTAL {
        return Err(failed(
            inst,
            format!("its rendering is over {} bytes", files::MAX_TOTAL),
        ));
    }
    let rendered: Vec<(String, String)> = out
        .files
        .into_iter()
        .map(|(n, t)| {
            let t = t
                .replace("{project-root}", PROJECT)
                .replace("{skill-root}", SNAPSHOT)
                .replace("{skill-name}", &inst.name);
            (n, t)
        })
        .collect();
    let text = rendered
        .iter()
        .find(|(n, _)| n == jinja::ENTRY)
        .map(|(_, t)| t.clone())
        .unwrap_or_default();
    let steps = rendered.len().saturating_sub(1);
    let mut how = format!(
        "rendered by baton's Jinja renderer ({why}): {} and {steps} more Markdown files",
        jinja::ENTRY
    );
    if !out.omitted.is_empty() {
        how.push_str(&format!(
            "; left out by this configuration: {}",
            out.omitted.join(", ")
        ));
    }
    if !custom.files.is_empty() {
        how.push_str(&format!("; customization {}", custom.files.join(" < ")));
    }
    let mut applied = central.files.clone();
    applied.extend(custom.files.iter().cloned());
    let mut snapshot: Vec<(String, Vec<u8>)> = rendered
        .into_iter()
        .map(|(n, t)| (n, t.into_bytes()))
        .collect();
    snapshot.extend(others);
    Ok(Rendered {
        text,
        snapshot,
        how,
        applied,
    })
}

fn shown_files(l: &Layers) -> String {
    if l.files.is_empty() {
        "no configuration file".into()
    } else {
        l.files.join(", ")
    }
}

/// A classic workflow: its variables resolved, then its instructions.
fn render_classic(reader: &Reader, inst: &Installed, instructions: &str) -> Result<Rendered> {
    let yaml_rel = ["workflow.yaml", "workflow.yml"]
        .into_iter()
        .map(|n| files::join(&inst.rel, n))
        .find(|p| reader.is_file(p))
        .ok_or_else(|| failed(inst, "workflow.yaml is missing"))?;
    let text = reader.text(&yaml_rel)?.unwrap_or_default();
    let doc = super::yaml(&text).map_err(|e| failed(inst, format!("{yaml_rel}: {e}")))?;
    let Value::Object(map) = doc else {
        return Err(failed(inst, format!("{yaml_rel} is not a mapping")));
    };
    // The configuration file the workflow reads (`config_source`).
    let mut applied = vec![yaml_rel.clone()];
    let config_rel = map
        .get("config_source")
        .and_then(Value::as_str)
        .map(|s| {
            s.replace("{project-root}/", "")
                .replace("{project-root}", "")
        })
        .filter(|s| !s.starts_with('/') && !s.split('/').any(|p| p == ".."));
    let config: serde_json::Map<String, Value> = match &config_rel {
        Some(rel) => match reader.text(rel)? {
            Some(t) => {
                applied.push(rel.clone());
                match super::yaml(&t) {
                    Ok(Value::Object(m)) => m,
                    _ => return Err(failed(inst, format!("{rel} is not a YAML mapping"))),
                }
            }
            None => serde_json::Map::new(),
        },
        None => serde_json::Map::new(),
    };
    let today = today();
    // Scalars only; lists and tables (input_file_patterns) are shown as YAML.
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut structured: Vec<(String, Value)> = Vec::new();
    for (k, v) in &map {
        match v {
            Value::String(s) => {
                let resolved = if let Some(key) = s.strip_prefix("{config_source}:") {
                    config
                        .get(key.trim())
                        .and_then(|c| match c {
                            Value::String(s) => Some(s.clone()),
                            Value::Number(n) => Some(n.to_string()),
                            Value::Bool(b) => Some(b.to_string()),
                            _ => None,
                        })
                        .unwrap_or_else(|| {
                            format!(
                                "(not set in {})",
                                config_rel.as_deref().unwrap_or("the config")
                            )
                        })
                } else if s == "system-generated" && k == "date" {
                    today.clone()
                } else {
                    s.clone()
                };
                vars.push((k.clone(), project_relative(&resolved)));
            }
            Value::Number(_) | Value::Bool(_) => vars.push((k.clone(), v.to_string())),
            Value::Null => vars.push((k.clone(), String::new())),
            other => structured.push((k.clone(), other.clone())),
        }
    }
    // References between variables (`{installed_path}/instructions.xml`), a few rounds deep.
    for _ in 0..4 {
        let snapshot = vars.clone();
        for (_, value) in vars.iter_mut() {
            for (name, v) in &snapshot {
                if !v.contains(&format!("{{{name}}}")) {
                    *value = replace_single(value, name, v);
                }
            }
        }
    }
    let resolve_text = |text: &str| {
        let mut out = project_relative(text);
        for (name, v) in &vars {
            if name == "config_source" {
                continue;
            }
            out = replace_single(&out, name, v);
        }
        out
    };
    let instructions_rel = files::join(&inst.rel, instructions);
    let body = reader
        .text(&instructions_rel)?
        .ok_or_else(|| failed(inst, format!("{instructions} is missing")))?;
    let body = resolve_text(&body);
    let mut text = String::new();
    text.push_str(&format!(
        "### Its configuration ({}), resolved\n\n",
        yaml_rel.rsplit('/').next().unwrap_or("workflow.yaml")
    ));
    for (k, v) in &vars {
        text.push_str(&format!("- {k}: {v}\n"));
    }
    for (k, v) in &structured {
        let shown = serde_saphyr::to_string(v).unwrap_or_default();
        text.push_str(&format!("- {k}:\n"));
        for line in resolve_text(&shown).lines() {
            text.push_str(&format!("    {line}\n"));
        }
    }
    let fence = if instructions.ends_with(".xml") {
        "xml"
    } else {
        "markdown"
    };
    text.push_str(&format!(
        "\n### Its instructions ({instructions})\n\n```{fence}\n{}\n```\n",
        body.trim_end()
    ));
    let others: Vec<String> = reader
        .files(&inst.rel)
        .into_iter()
        .filter(|f| !f.starts_with("workflow.y") && f != instructions)
        .collect();
    if !others.is_empty() {
        text.push_str("\nIts other files, to read when the instructions name them:\n");
        for f in others {
            text.push_str(&format!("- {PROJECT}/{}\n", files::join(&inst.rel, &f)));
        }
    }
    let source = config_rel
        .filter(|r| applied.iter().any(|a| a == r))
        .map(|r| format!(" from {r}"))
        .unwrap_or_default();
    Ok(Rendered {
        text,
        snapshot: Vec::new(),
        how: format!("resolved by baton: workflow.yaml variables{source}, then {instructions}"),
        applied,
    })
}

/// `text` with every `{name}` replaced by `value`, but not `{{name}}` (a value the workflow's
/// engine fills in while it runs).
fn replace_single(text: &str, name: &str, value: &str) -> String {
    let token = format!("{{{name}}}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&token) {
        let before = out.chars().last().or_else(|| rest[..at].chars().last());
        let doubled = rest[..at].ends_with('{')
            || (at == 0 && before == Some('{'))
            || rest[at + token.len()..].starts_with('}');
        out.push_str(&rest[..at]);
        out.push_str(if doubled { &token } else { value });
        rest = &rest[at + token.len()..];
    }
    out.push_str(rest);
    out
}

/// Today's date, `YYYY-MM-DD` (UTC).
fn today() -> String {
    baton_store::time::now_rfc3339()
        .get(..10)
        .unwrap_or("")
        .to_string()
}

/// The output of BMAD's `render_skill.py` (run with `uv` in `project`): the rendered
/// `workflow.md` it names, read beneath the project, with every absolute path made
/// project-relative. `Err` says why it cannot be used (the caller falls back to baton's own).
pub fn from_script_output(
    reader: &Reader,
    project: &Path,
    inst: &Installed,
    stdout: &str,
) -> std::result::Result<Rendered, String> {
    let line = stdout
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("read and follow ") || l.starts_with("HALT"))
        .ok_or_else(|| "render_skill.py printed no workflow to follow".to_string())?;
    let Some(path) = line.strip_prefix("read and follow ") else {
        return Err(line.to_string());
    };
    let root = project.display().to_string();
    let rel = path
        .trim()
        .strip_prefix(&format!("{root}/"))
        .filter(|r| r.starts_with("_bmad/render/") && !r.split('/').any(|p| p == ".."))
        .ok_or_else(|| {
            "render_skill.py named a file outside the project's _bmad/render/".to_string()
        })?
        .to_string();
    let text = reader
        .text(&rel)
        .map_err(|e| e.message)?
        .ok_or_else(|| format!("{rel} does not exist"))?;
    let text = text
        .replace(&format!("{root}/"), &format!("{PROJECT}/"))
        .replace(&root, PROJECT)
        .replace("{project-root}", PROJECT);
    let _ = inst;
    Ok(Rendered {
        text,
        snapshot: Vec::new(),
        how: format!(
            "rendered by BMAD's render_skill.py (uv, in the sandbox) into {}",
            rel.rsplit_once('/').map_or(rel.as_str(), |(d, _)| d)
        ),
        applied: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use baton_testkit::write_file as write;

    fn skill_project(root: &Path) {
        write(
            root,
            "_bmad/config.toml",
            "[core]\ncommunication_language = \"English\"\n[modules.bmm]\nimplementation_artifacts = \"{project-root}/out/impl\"\n",
        );
        write(
            root,
            "_bmad/custom/config.toml",
            "[modules.bmm]\nimplementation_artifacts = \"{project-root}/delivery/impl\"\n",
        );
        write(
            root,
            ".claude/skills/bmad-build-auto/SKILL.md",
            "---\nname: bmad-build-auto\n---\nRun uv run render_skill.py, then follow what it prints.\n",
        );
        write(
            root,
            ".claude/skills/bmad-build-auto/workflow.md",
            "# Build\nSpeak {{.communication_language}}. Specs go to {{.implementation_artifacts}}.\nFacts:\n{workflow.persistent_facts}\nDone: {workflow.on_complete}\nNext: [[bmad-snapshot:step-01.md]] at {project-root}\n",
        );
        write(
            root,
            ".claude/skills/bmad-build-auto/step-01.md",
            "Write {{.implementation_artifacts}}/spec.md; a {literal} brace stays.\n",
        );
        write(
            root,
            ".claude/skills/bmad-build-auto/customize.toml",
            "[workflow]\non_complete = \"\"\npersistent_facts = [\"SKILL-FACT\"]\n",
        );
        write(
            root,
            "_bmad/custom/bmad-build-auto.toml",
            "[workflow]\npersistent_facts = [\"TEAM-FACT\"]\n",
        );
    }

    #[test]
    fn a_rendered_skill_resolved_by_baton_as_bmad_would() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        skill_project(root);
        let r = Reader::open(root).unwrap();
        let inst = super::super::find(&r, "bmad-build-auto").unwrap().unwrap();
        let out = render(&r, &inst, "uv is not on PATH").unwrap();
        assert!(out.text.contains("Speak English."), "{}", out.text);
        assert!(
            out.text.contains("Specs go to @project/delivery/impl."),
            "{}",
            out.text
        );
        assert!(
            out.text.contains("- SKILL-FACT\n- TEAM-FACT"),
            "{}",
            out.text
        );
        assert!(
            out.text.contains("Next: @pkg/step-01.md at @project"),
            "{}",
            out.text
        );
        assert!(!out.text.contains(&root.display().to_string()));
        let step = out
            .snapshot
            .iter()
            .find(|(n, _)| n == "step-01.md")
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
            .unwrap();
        assert_eq!(
            step,
            "Write @project/delivery/impl/spec.md; a {literal} brace stays.\n"
        );
        assert!(out.snapshot.iter().any(|(n, _)| n == "customize.toml"));
        assert!(!out.snapshot.iter().any(|(n, _)| n == "SKILL.md"));
        assert!(out.how.contains("uv is not on PATH"), "{}", out.how);
        assert!(
            out.how.contains("_bmad/custom/bmad-build-auto.toml"),
            "{}",
            out.how
        );
        assert!(
            out.applied
                .contains(&"_bmad/custom/config.toml".to_string())
        );

        // A value the configuration lacks stops the rendering, as BMAD's renderer does.
        write(
            root,
            ".claude/skills/bmad-build-auto/step-02.md",
            "{{.nowhere}}\n",
        );
        let e = render(&r, &inst, "x").unwrap_err();
        assert_eq!(e.code, "EPIC_SKILL_RENDER_FAILED");
        assert!(e.message.contains("nowhere"), "{e}");
        std::fs::remove_file(root.join(".claude/skills/bmad-build-auto/step-02.md")).unwrap();
        write(
            root,
            ".claude/skills/bmad-build-auto/step-02.md",
            "[[bmad-snapshot:gone.md]]\n",
        );
        assert!(
            render(&r, &inst, "x")
                .unwrap_err()
                .message
                .contains("gone.md")
        );
    }

    #[test]
    fn a_plain_skill_keeps_what_it_cannot_resolve() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(
            root,
            ".claude/skills/bmad-code-review/SKILL.md",
            "---\nname: bmad-code-review\n---\n# Review\nFacts: {workflow.persistent_facts}\nConfig: {communication_language}\nRead ./steps/step-01.md and {skill-root}/customize.toml\n",
        );
        write(
            root,
            ".claude/skills/bmad-code-review/steps/step-01.md",
            "Layers:\n{workflow.review_layers}\n",
        );
        write(
            root,
            ".claude/skills/bmad-code-review/customize.toml",
            "[workflow]\npersistent_facts = []\n[[workflow.review_layers]]\nid = \"blind\"\nname = \"Blind\"\ninstruction = \"Look at {skill-root}/x.md\"\n[[workflow.review_layers]]\nid = \"off\"\ninstruction = \"\"\n",
        );
        let r = Reader::open(root).unwrap();
        let inst = super::super::find(&r, "bmad-code-review").unwrap().unwrap();
        assert_eq!(inst.kind, Kind::Plain);
        let out = render(&r, &inst, "").unwrap();
        assert!(
            out.text
                .starts_with("# Review\nFacts: _None._\nConfig: {communication_language}\n"),
            "{}",
            out.text
        );
        assert!(out.text.contains("@pkg/customize.toml"), "{}", out.text);
        let step = out
            .snapshot
            .iter()
            .find(|(n, _)| n == "steps/step-01.md")
            .unwrap();
        let step = String::from_utf8_lossy(&step.1);
        assert!(
            step.contains("#### Blind (`blind`)\n\nLook at @pkg/x.md"),
            "{step}"
        );
        assert!(!step.contains("off"), "{step}");
    }

    #[test]
    fn a_classic_workflow_with_its_variables_resolved() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(
            root,
            "_bmad/bmm/config.yaml",
            "implementation_artifacts: \"{project-root}/_bmad-output/impl\"\nuser_name: Ada\n",
        );
        let wf = "_bmad/bmm/workflows/4-implementation/dev-story";
        write(
            root,
            &format!("{wf}/workflow.yaml"),
            "name: dev-story\nconfig_source: \"{project-root}/_bmad/bmm/config.yaml\"\nuser_name: \"{config_source}:user_name\"\nimplementation_artifacts: \"{config_source}:implementation_artifacts\"\nsprint_status: \"{implementation_artifacts}/sprint-status.yaml\"\ninstalled_path: \"{project-root}/_bmad/bmm/workflows/4-implementation/dev-story\"\ninstructions: \"{installed_path}/instructions.xml\"\nvalidation: \"{installed_path}/checklist.md\"\ndate: system-generated\nstory_file: \"\"\n",
        );
        write(
            root,
            &format!("{wf}/instructions.xml"),
            "<workflow><critical>engine: {project-root}/_bmad/core/tasks/workflow.xml</critical><step n=\"1\" goal=\"load {sprint_status} for {user_name}\">{{story_key}}</step></workflow>\n",
        );
        write(root, &format!("{wf}/checklist.md"), "- [ ] done\n");
        let r = Reader::open(root).unwrap();
        let inst = super::super::find(&r, "dev-story").unwrap().unwrap();
        let out = render(&r, &inst, "").unwrap();
        assert!(
            out.text
                .contains("- sprint_status: @project/_bmad-output/impl/sprint-status.yaml\n"),
            "{}",
            out.text
        );
        assert!(out.text.contains("- validation: @project/_bmad/bmm/workflows/4-implementation/dev-story/checklist.md\n"), "{}", out.text);
        assert!(
            out.text
                .contains("goal=\"load @project/_bmad-output/impl/sprint-status.yaml for Ada\""),
            "{}",
            out.text
        );
        assert!(out.text.contains("{{story_key}}"), "{}", out.text);
        assert_eq!(replace_single("{a} {{a}} x{a}}", "a", "V"), "V {{a}} x{a}}");
        assert!(
            out.text
                .contains("engine: @project/_bmad/core/tasks/workflow.xml"),
            "{}",
            out.text
        );
        assert!(out.how.contains("_bmad/bmm/config.yaml"), "{}", out.how);
        assert!(!out.text.contains(&root.display().to_string()));
    }

    #[test]
    fn uv_only_when_asked_or_found() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("uv");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let with = Some(tmp.path().as_os_str());
        assert_eq!(renderer(None, with, true), Renderer::Uv);
        assert_eq!(
            renderer(None, None, true),
            Renderer::Baton("uv is not on PATH".into())
        );
        assert!(
            matches!(renderer(None, with, false), Renderer::Baton(w) if w.contains(RENDER_SCRIPT))
        );
        assert!(matches!(
            renderer(Some("baton"), with, true),
            Renderer::Baton(_)
        ));
        assert_eq!(renderer(Some("uv"), None, true), Renderer::Uv);
    }

    #[test]
    fn the_scripts_output_made_project_relative() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        skill_project(root);
        let out_rel = "_bmad/render/bmad-build-auto/p-1/g1";
        write(
            root,
            &format!("{out_rel}/workflow.md"),
            &format!(
                "Next: {}/{out_rel}/step-01.md in {}\n",
                root.display(),
                root.display()
            ),
        );
        let r = Reader::open(root).unwrap();
        let inst = super::super::find(&r, "bmad-build-auto").unwrap().unwrap();
        let printed = format!("read and follow {}/{out_rel}/workflow.md\n", root.display());
        let out = from_script_output(&r, root, &inst, &printed).unwrap();
        assert_eq!(
            out.text,
            format!("Next: @project/{out_rel}/step-01.md in @project\n")
        );
        assert!(
            from_script_output(&r, root, &inst, "HALT: missing config value `x`\n")
                .unwrap_err()
                .contains("HALT")
        );
        assert!(from_script_output(&r, root, &inst, "read and follow /etc/passwd\n").is_err());
    }
}
