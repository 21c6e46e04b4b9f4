//! BMAD's skill sources after 6.12: Jinja2 templates (BMAD PR #2857), rendered here the way
//! BMAD's `render_skill.py` renders them. A template sees `config` (the central configuration
//! layers), `workflow` (the skill's customization layers) and the functions `rendered(name)` /
//! `snapshot(name)` (the rendered copy of another source file of the skill, `@pkg/<name>`) and
//! `halt(message)` (the skill refuses this configuration: rendering stops with its message).
//! Undefined names and syntax errors stop with the file and line; a source that renders empty
//! is left out of the snapshot, and a link to it from a file that stays stops the rendering,
//! as does an empty `workflow.md`. Printed values follow [`super::format`], so `{{ workflow.x }}`
//! gives the text the older `{workflow.x}` token gave; booleans and none print as Python does.
//!
//! Whitespace: blocks trim their line (`trim_blocks`, `lstrip_blocks`) and a file keeps its
//! final newline, so a `{% if %}` on a line of its own leaves no blank line behind.

use super::format::{self, Layer};
use super::render::{PROJECT, SNAPSHOT};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::ValueKind;
use minijinja::{AutoEscape, Environment, Error, ErrorKind, State, UndefinedBehavior, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The file a rendered skill starts from.
pub const ENTRY: &str = "workflow.md";
/// Instructions one source file may take to render: far above what BMAD's skills need, low
/// enough that a looping template stops in well under a second.
const FUEL: u64 = 20_000_000;

/// Whether a skill's Markdown sources are Jinja templates rather than BMAD 6.10–6.12 tokens: a
/// `{% … %}` block, or a `{{ … }}` expression other than the old `{{.key}}` and
/// `{{config.a.b}}` tokens.
pub fn is_jinja(sources: &[(String, String)]) -> bool {
    sources.iter().any(|(_, text)| has_jinja(text))
}

fn has_jinja(text: &str) -> bool {
    if text.contains("{%") {
        return true;
    }
    let mut rest = text;
    while let Some(at) = rest.find("{{") {
        let after = &rest[at + 2..];
        let Some(end) = after.find("}}") else {
            return false;
        };
        let inner = &after[..end];
        let old_short = inner.strip_prefix('.').is_some_and(|k| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        let old_config = inner.strip_prefix("config.").is_some_and(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        });
        if !old_short && !old_config {
            return true;
        }
        rest = &after[end + 2..];
    }
    false
}

/// Whether BMAD's own `render_skill.py` (its text) renders Jinja templates: the project's
/// installed renderer says which template language its skills are written in.
pub fn script_renders_jinja(script: &str) -> bool {
    script.contains("jinja2")
}

/// Why rendering stopped; `at` is `file:line` within the skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The template called `halt(message)`.
    Halted { at: String, message: String },
    /// A syntax error, an undefined name, a link to a file the skill does not have or leaves
    /// out, an empty `workflow.md`.
    Failed { at: String, message: String },
}

/// The rendered sources (in the order given, without those left out) and the ones left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub files: Vec<(String, String)>,
    pub omitted: Vec<String>,
}

/// What the templates see: `config` and `workflow`.
#[derive(Debug, Clone)]
pub struct Values {
    pub config: Value,
    pub workflow: Value,
}

impl Values {
    /// `config` from the central layers (`{project-root}` shown as `@project`), `workflow`
    /// from the customization layers' `[workflow]` table (`{skill-root}` as `@pkg`).
    pub fn new(central: &toml::Table, custom: &toml::Table) -> Values {
        let config = table(central, &|s| s.replace("{project-root}", PROJECT));
        let workflow = match custom.get("workflow") {
            Some(toml::Value::Table(t)) => table(t, &|s| s.replace("{skill-root}", SNAPSHOT)),
            _ => Value::from_pairs(Vec::<(String, Value)>::new()),
        };
        Values { config, workflow }
    }
}

fn table(t: &toml::Table, fix: &dyn Fn(&str) -> String) -> Value {
    Value::from_pairs(t.iter().map(|(k, v)| (k.clone(), value(v, fix))))
}

fn value(v: &toml::Value, fix: &dyn Fn(&str) -> String) -> Value {
    match v {
        toml::Value::String(s) => Value::from(fix(s)),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => Value::from(*f),
        toml::Value::Boolean(b) => Value::from(*b),
        toml::Value::Datetime(d) => Value::from(d.to_string()),
        toml::Value::Array(items) => items.iter().map(|i| value(i, fix)).collect(),
        toml::Value::Table(t) => table(t, fix),
    }
}

/// What the functions record while templates render.
#[derive(Default)]
struct Seen {
    halted: Mutex<Option<String>>,
    /// `(from file, to file)` for every `rendered()`/`snapshot()` call.
    links: Mutex<Vec<(String, String)>>,
}

fn environment<'a>(
    names: Arc<BTreeSet<String>>,
    omitted: Arc<BTreeSet<String>>,
    seen: Arc<Seen>,
) -> Result<Environment<'a>, Stop> {
    let mut env = Environment::new();
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(true)
        .build()
        .map_err(|e| Stop::Failed {
            at: ENTRY.into(),
            message: e.to_string(),
        })?;
    env.set_syntax(syntax);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_fuel(Some(FUEL));
    // Names the undefined value in the error (release builds too); costs only on an error.
    env.set_debug(true);
    env.set_formatter(|out, _state, v| {
        let text = shown(v)?;
        out.write_str(&text).map_err(Error::from)
    });
    let linked = seen.clone();
    let link = move |state: &State, name: String| -> Result<String, Error> {
        if !names.contains(&name) {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("links to {name}, which the skill does not have"),
            ));
        }
        if omitted.contains(&name) {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("links to {name}, which this configuration leaves out (it renders empty)"),
            ));
        }
        if let Ok(mut links) = linked.links.lock() {
            links.push((state.name().to_string(), name.clone()));
        }
        Ok(format!("{SNAPSHOT}/{name}"))
    };
    env.add_function("rendered", link.clone());
    env.add_function("snapshot", link);
    env.add_function("halt", move |message: String| -> Result<String, Error> {
        if let Ok(mut halted) = seen.halted.lock() {
            *halted = Some(message.clone());
        }
        Err(Error::new(ErrorKind::InvalidOperation, message))
    });
    Ok(env)
}

/// A value as printed into the text.
fn shown(v: &Value) -> Result<String, Error> {
    Ok(match v.kind() {
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        ValueKind::None => "None".into(),
        ValueKind::Bool => if v.is_true() { "True" } else { "False" }.into(),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if !items.is_empty() && items.iter().all(|i| i.kind() == ValueKind::Map) {
                format::review_layers(&items.iter().map(layer).collect::<Vec<_>>())
            } else {
                let texts = items.iter().map(shown).collect::<Result<Vec<_>, _>>()?;
                format::markdown_list(&texts)
            }
        }
        _ => v.to_string(),
    })
}

fn layer(item: &Value) -> Layer {
    let field = |k: &str| {
        item.get_attr(k)
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_none())
            .map(|v| v.to_string())
    };
    let id = field("id").unwrap_or_default();
    Layer {
        name: field("name").unwrap_or_else(|| id.clone()),
        id,
        when: field("when"),
        instruction: field("instruction").unwrap_or_default(),
    }
}

fn stop(e: &Error, file: &str, seen: &Seen) -> Stop {
    let name = e.name().unwrap_or(file);
    let at = match e.line() {
        Some(line) => format!("{name}:{line}"),
        None => name.to_string(),
    };
    if let Some(message) = seen.halted.lock().ok().and_then(|mut h| h.take()) {
        return Stop::Halted { at, message };
    }
    let message = match (e.kind(), e.detail()) {
        (ErrorKind::UndefinedError, Some(d)) => d.to_string(),
        (ErrorKind::UndefinedError, None) => {
            "undefined value (a name that neither `config`, `workflow` nor the template defines)"
                .to_string()
        }
        (kind, Some(d)) => format!("{kind}: {d}"),
        (kind, None) => kind.to_string(),
    };
    Stop::Failed { at, message }
}

fn render_one(
    env: &Environment<'_>,
    name: &str,
    text: &str,
    values: &Values,
    seen: &Seen,
) -> Result<String, Stop> {
    let ctx = Value::from_pairs([
        ("config", values.config.clone()),
        ("workflow", values.workflow.clone()),
    ]);
    env.template_from_named_str(name, text)
        .and_then(|t| t.render(ctx))
        .map_err(|e| stop(&e, name, seen))
}

/// Renders every source (`(name within the skill, text)`); stops at the first problem.
pub fn render(sources: &[(String, String)], values: &Values) -> Result<Output, Stop> {
    let names: Arc<BTreeSet<String>> = Arc::new(sources.iter().map(|(n, _)| n.clone()).collect());
    let seen = Arc::new(Seen::default());
    let env = environment(names.clone(), Arc::default(), seen.clone())?;
    let mut files = Vec::with_capacity(sources.len());
    for (name, text) in sources {
        files.push((name.clone(), render_one(&env, name, text, values, &seen)?));
    }
    let entry_empty = files
        .iter()
        .find(|(n, _)| n == ENTRY)
        .is_none_or(|(_, t)| t.trim().is_empty());
    if entry_empty {
        return Err(Stop::Failed {
            at: format!("{ENTRY}:1"),
            message: format!("{ENTRY} renders empty: the skill has nothing to follow"),
        });
    }
    let omitted: BTreeSet<String> = files
        .iter()
        .filter(|(_, t)| t.trim().is_empty())
        .map(|(n, _)| n.clone())
        .collect();
    let links = seen.links.lock().map(|l| l.clone()).unwrap_or_default();
    if let Some((from, to)) = links
        .iter()
        .find(|(from, to)| omitted.contains(to) && !omitted.contains(from))
    {
        // Rendered again with the left-out files known, the link stops at its own line.
        let strict = environment(names, Arc::new(omitted.clone()), seen.clone())?;
        let text = sources
            .iter()
            .find(|(n, _)| n == from)
            .map(|(_, t)| t.as_str())
            .unwrap_or_default();
        render_one(&strict, from, text, values, &seen)?;
        return Err(Stop::Failed {
            at: from.clone(),
            message: format!(
                "links to {to}, which this configuration leaves out (it renders empty)"
            ),
        });
    }
    files.retain(|(n, _)| !omitted.contains(n));
    Ok(Output {
        files,
        omitted: omitted.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::files::Reader;
    use crate::method::{Installed, render};
    use baton_testkit::write_file as write;
    use std::path::Path;

    const SKILL: &str = ".claude/skills/bmad-build-auto";

    /// A post-6.12 install: Jinja sources, a team layer over the skill's defaults.
    fn project(root: &Path) {
        write(
            root,
            "_bmad/config.toml",
            "[core]\ncommunication_language = \"Français\"\n[modules.bmm]\nimplementation_artifacts = \"{project-root}/out/impl\"\n",
        );
        write(
            root,
            &format!("{SKILL}/SKILL.md"),
            "---\nname: bmad-build-auto\n---\nRun `uv run render_skill.py`, then follow what it prints.\n",
        );
        write(
            root,
            &format!("{SKILL}/customize.toml"),
            "[workflow]\nroute = \"auto\"\ncommit = \"auto\"\nstage_first = false\npersistent_facts = [\"SKILL-FACT\"]\n[[workflow.review_layers]]\nid = \"blind\"\nname = \"Blind Hunter\"\ninstruction = \"Read {skill-root}/review-prompts/blind.md\"\n",
        );
        write(
            root,
            "_bmad/custom/bmad-build-auto.toml",
            "[workflow]\nroute = \"oneshot\"\nstage_first = true\npersistent_facts = [\"TEAM-FACT\"]\n",
        );
        write(
            root,
            &format!("{SKILL}/workflow.md"),
            "# Build ({{ workflow.route }})\n\
             Speak {{ config.core.communication_language }}; specs in {{ config.modules.bmm.implementation_artifacts }}.\n\
             {% if workflow.route not in [\"oneshot\", \"full\", \"auto\"] %}\n\
             {{ halt(\"unknown route `\" ~ workflow.route ~ \"`: use oneshot, full or auto\") }}\n\
             {% endif %}\n\
             {% if workflow.stage_first %}\n\
             Stage before committing.\n\
             {% endif %}\n\
             Facts:\n\
             {{ workflow.persistent_facts }}\n\
             {% for f in workflow.persistent_facts %}\n\
             * fact {{ loop.index }}: {{ f }}\n\
             {% endfor %}\n\
             {% raw %}\n\
             Leave {{ spec_file }} and {% this %} to the agent.\n\
             {% endraw %}\n\
             Next: {{ rendered(\"step-01-clarify.md\") }}\n",
        );
        write(
            root,
            &format!("{SKILL}/step-01-clarify.md"),
            "Layers:\n{{ workflow.review_layers }}\n{% if workflow.route == \"full\" %}\nThen {{ snapshot(\"step-02-full.md\") }}\n{% endif %}\n",
        );
        write(
            root,
            &format!("{SKILL}/step-02-full.md"),
            "{% if workflow.route == \"full\" %}\nThe full route.\n{% endif %}\n",
        );
    }

    fn installed(r: &Reader) -> Installed {
        crate::method::find(r, "bmad-build-auto").unwrap().unwrap()
    }

    fn step(out: &render::Rendered, name: &str) -> Option<String> {
        out.snapshot
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
    }

    #[test]
    fn jinja_sources_are_told_from_bmad_tokens() {
        let s = |t: &str| vec![("workflow.md".to_string(), t.to_string())];
        assert!(!is_jinja(&s(
            "{{.user_name}} {{config.core.x}} {workflow.a} [[bmad-snapshot:a.md]] {x}"
        )));
        assert!(is_jinja(&s("{{ config.core.x }}")));
        assert!(is_jinja(&s("{% if a %}{% endif %}")));
        assert!(is_jinja(&s("{{rendered('a.md')}}")));
        assert!(script_renders_jinja("import jinja2\n"));
        assert!(!script_renders_jinja("_CONFIG_TOKEN = re.compile(...)\n"));
    }

    #[test]
    fn a_jinja_skill_rendered_with_its_layers() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        project(root);
        let r = Reader::open(root).unwrap();
        let out = render::render(&r, &installed(&r), "uv is not on PATH").unwrap();
        // The team layer wins over the skill's default.
        assert!(out.text.starts_with("# Build (oneshot)\n"), "{}", out.text);
        assert!(
            out.text
                .contains("Speak Français; specs in @project/out/impl.\n"),
            "{}",
            out.text
        );
        // `{% if %}` on lines of their own leave none behind.
        assert!(
            out.text
                .contains("impl.\nStage before committing.\nFacts:\n"),
            "{}",
            out.text
        );
        // A list printed directly is the Markdown list BMAD's token printed; `{% for %}` walks it.
        assert!(
            out.text.contains(
                "Facts:\n- SKILL-FACT\n- TEAM-FACT\n* fact 1: SKILL-FACT\n* fact 2: TEAM-FACT\n"
            ),
            "{}",
            out.text
        );
        assert!(
            out.text
                .contains("\nLeave {{ spec_file }} and {% this %} to the agent.\nNext: "),
            "{}",
            out.text
        );
        assert!(
            out.text.ends_with("Next: @pkg/step-01-clarify.md\n"),
            "{}",
            out.text
        );
        // Nothing of the template language is left but what `{% raw %}` kept.
        let outside_raw = out.text.replace("{{ spec_file }} and {% this %}", "");
        assert!(
            !outside_raw.contains("{%") && !outside_raw.contains("{{"),
            "{}",
            out.text
        );
        let first = step(&out, "step-01-clarify.md").unwrap();
        assert_eq!(
            first,
            "Layers:\n#### Blind Hunter (`blind`)\n\nRead @pkg/review-prompts/blind.md\n"
        );
        // Rendered empty under this route: left out, and said so.
        assert_eq!(step(&out, "step-02-full.md"), None);
        assert!(out.how.contains("baton's Jinja renderer"), "{}", out.how);
        assert!(out.how.contains("uv is not on PATH"), "{}", out.how);
        assert!(
            out.how
                .contains("left out by this configuration: step-02-full.md"),
            "{}",
            out.how
        );
        assert!(
            out.how.contains("_bmad/custom/bmad-build-auto.toml"),
            "{}",
            out.how
        );
        assert!(out.applied.contains(&"_bmad/config.toml".to_string()));
        assert!(step(&out, "customize.toml").is_some());
        assert!(step(&out, "SKILL.md").is_none());

        // The full route keeps step 02 and links it.
        write(
            root,
            "_bmad/custom/bmad-build-auto.user.toml",
            "[workflow]\nroute = \"full\"\n",
        );
        let out = render::render(&r, &installed(&r), "x").unwrap();
        assert!(
            step(&out, "step-01-clarify.md")
                .unwrap()
                .ends_with("Then @pkg/step-02-full.md\n")
        );
        assert_eq!(step(&out, "step-02-full.md").unwrap(), "The full route.\n");
    }

    #[test]
    fn a_halt_stops_the_rendering_with_bmads_message() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        project(root);
        write(
            root,
            "_bmad/custom/bmad-build-auto.user.toml",
            "[workflow]\nroute = \"sideways\"\n",
        );
        let r = Reader::open(root).unwrap();
        let e = render::render(&r, &installed(&r), "x").unwrap_err();
        assert_eq!(e.code, "EPIC_SKILL_HALTED");
        assert!(e.message.contains(&format!("{SKILL}/workflow.md:4")), "{e}");
        assert!(
            e.message
                .contains("unknown route `sideways`: use oneshot, full or auto"),
            "{e}"
        );
        assert!(
            e.hint
                .unwrap()
                .contains("_bmad/custom/bmad-build-auto.toml"),
            "hint"
        );
    }

    #[test]
    fn undefined_names_missing_files_and_left_out_links_stop_with_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        project(root);
        let r = Reader::open(root).unwrap();
        let file = format!("{SKILL}/step-03-x.md");

        write(root, &file, "ok\n\nUse {{ workflow.no_such_setting }}.\n");
        let e = render::render(&r, &installed(&r), "x").unwrap_err();
        assert_eq!(e.code, "EPIC_SKILL_RENDER_FAILED");
        assert!(e.message.contains(&format!("{file}:3")), "{e}");
        assert!(
            e.message
                .contains("`workflow.no_such_setting` is undefined"),
            "{e}"
        );

        write(root, &file, "Read {{ rendered(\"step-09-gone.md\") }}\n");
        let e = render::render(&r, &installed(&r), "x").unwrap_err();
        assert_eq!(e.code, "EPIC_SKILL_RENDER_FAILED");
        assert!(e.message.contains(&format!("{file}:1")), "{e}");
        assert!(
            e.message
                .contains("step-09-gone.md, which the skill does not have"),
            "{e}"
        );

        write(root, &file, "x\n{% if %}\n");
        let e = render::render(&r, &installed(&r), "x").unwrap_err();
        assert!(e.message.contains(&format!("{file}:2")), "{e}");
        assert!(e.message.contains("syntax error"), "{e}");

        // A link to a file this configuration leaves out (it renders empty).
        write(
            root,
            &file,
            "a\nb\nThen {{ snapshot(\"step-02-full.md\") }}\n",
        );
        let e = render::render(&r, &installed(&r), "x").unwrap_err();
        assert!(e.message.contains(&format!("{file}:3")), "{e}");
        assert!(e.message.contains("leaves out"), "{e}");

        std::fs::remove_file(root.join(&file)).unwrap();
        write(
            root,
            &format!("{SKILL}/workflow.md"),
            "{% if false %}\nx\n{% endif %}\n",
        );
        let e = render::render(&r, &installed(&r), "x").unwrap_err();
        assert!(e.message.contains("workflow.md renders empty"), "{e}");
    }

    #[test]
    fn the_installed_renderer_decides_the_template_language() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        project(root);
        // BMAD 6.12's renderer (tokens only) would leave these sources as they are.
        write(root, render::RENDER_SCRIPT, "_SNAPSHOT_TOKEN = 1\n");
        let r = Reader::open(root).unwrap();
        let out = render::render(&r, &installed(&r), "x").unwrap();
        assert!(out.how.contains("token renderer"), "{}", out.how);
        assert!(out.text.contains("{{ workflow.route }}"), "{}", out.text);
        write(root, render::RENDER_SCRIPT, "import jinja2\n");
        let out = render::render(&r, &installed(&r), "x").unwrap();
        assert!(out.how.contains("Jinja renderer"), "{}", out.how);
    }

    #[test]
    fn a_looping_template_runs_out_of_fuel() {
        let sources = vec![(
            ENTRY.to_string(),
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}x\n"
                .to_string(),
        )];
        let values = Values::new(&toml::Table::new(), &toml::Table::new());
        let Err(Stop::Failed { message, .. }) = render(&sources, &values) else {
            panic!("it should stop");
        };
        assert!(message.contains("fuel"), "{message}");
    }
}
