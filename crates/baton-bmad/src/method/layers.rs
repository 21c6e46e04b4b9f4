//! BMAD's TOML layers, merged the way its installer documents them: the central configuration
//! (`_bmad/config.toml` < `config.user.toml` < `custom/config.toml` < `custom/config.user.toml`)
//! and a skill's customization (`customize.toml` in the skill < `_bmad/custom/<skill>.toml` <
//! `_bmad/custom/<skill>.user.toml`). Tables merge key by key, arrays of tables that all carry a
//! `code` (or else an `id`) merge by that key, other arrays append, anything else is replaced.
//! Projects installed before the TOML layers keep their configuration in
//! `_bmad/bmm/config.yaml` and `_bmad/core/config.yaml`; those are read as one flat table.

use super::files::Reader;
use crate::error::{BmadError, Result};
use toml::{Table, Value};

pub const CENTRAL: [&str; 4] = [
    "_bmad/config.toml",
    "_bmad/config.user.toml",
    "_bmad/custom/config.toml",
    "_bmad/custom/config.user.toml",
];
pub const FLAT: [&str; 2] = ["_bmad/core/config.yaml", "_bmad/bmm/config.yaml"];

/// A merged set of layers and the files it came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layers {
    pub table: Table,
    /// Project-relative files that were present and merged, in order.
    pub files: Vec<String>,
}

fn invalid(file: &str, problem: impl std::fmt::Display) -> BmadError {
    BmadError::usage("EPIC_SKILL_CONFIG_INVALID", format!("{file}: {problem}"))
        .hint("fix the file (BMAD's own renderer would refuse it as well)")
}

fn load_toml(reader: &Reader, rel: &str) -> Result<Option<Table>> {
    let Some(text) = reader.text(rel)? else {
        return Ok(None);
    };
    toml::from_str::<Table>(&text)
        .map(Some)
        .map_err(|e| invalid(rel, e.to_string().trim()))
}

/// Merges `files` (project-relative) that exist, in order.
pub fn load(reader: &Reader, files: &[String]) -> Result<Layers> {
    let mut out = Layers::default();
    for rel in files {
        if let Some(table) = load_toml(reader, rel)? {
            out.table = merge_tables(std::mem::take(&mut out.table), table);
            out.files.push(rel.clone());
        }
    }
    Ok(out)
}

/// The project's central configuration: the TOML layers when `_bmad/config.toml` exists, else
/// the flat YAML files of older installs. Empty when there is neither.
pub fn central(reader: &Reader) -> Result<Layers> {
    if reader.is_file(CENTRAL[0]) {
        let files: Vec<String> = CENTRAL.iter().map(|s| s.to_string()).collect();
        return load(reader, &files);
    }
    let mut out = Layers::default();
    for rel in FLAT {
        let Some(text) = reader.text(rel)? else {
            continue;
        };
        let value: serde_json::Value = crate::method::yaml(&text).map_err(|e| invalid(rel, e))?;
        if let serde_json::Value::Object(map) = value {
            for (k, v) in map {
                if let Some(v) = json_to_toml(&v) {
                    out.table.insert(k, v);
                }
            }
        }
        out.files.push(rel.to_string());
    }
    Ok(out)
}

/// A skill's customization layers (`skill_rel` is the skill's folder).
pub fn customization(reader: &Reader, skill_rel: &str, name: &str) -> Result<Layers> {
    let files = vec![
        format!("{skill_rel}/customize.toml"),
        format!("_bmad/custom/{name}.toml"),
        format!("_bmad/custom/{name}.user.toml"),
    ];
    load(reader, &files)
}

fn json_to_toml(v: &serde_json::Value) -> Option<Value> {
    Some(match v {
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Float(n.as_f64()?),
        },
        serde_json::Value::Array(a) => Value::Array(a.iter().filter_map(json_to_toml).collect()),
        serde_json::Value::Object(m) => Value::Table(
            m.iter()
                .filter_map(|(k, v)| json_to_toml(v).map(|v| (k.clone(), v)))
                .collect(),
        ),
        serde_json::Value::Null => return None,
    })
}

fn merge_tables(mut base: Table, over: Table) -> Table {
    for (k, v) in over {
        let merged = match base.remove(&k) {
            Some(b) => merge(b, v),
            None => v,
        };
        base.insert(k, merged);
    }
    base
}

/// One value over another.
pub fn merge(base: Value, over: Value) -> Value {
    match (base, over) {
        (Value::Table(b), Value::Table(o)) => Value::Table(merge_tables(b, o)),
        (Value::Array(b), Value::Array(o)) => Value::Array(merge_arrays(b, o)),
        (_, o) => o,
    }
}

/// The key an array of tables merges by: `code` when every item has one, else `id`.
fn keyed_field(items: &[&Value]) -> Option<&'static str> {
    if items.is_empty() || !items.iter().all(|i| i.is_table()) {
        return None;
    }
    ["code", "id"].into_iter().find(|field| {
        items.iter().all(|i| {
            i.get(field)
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
        })
    })
}

fn merge_arrays(base: Vec<Value>, over: Vec<Value>) -> Vec<Value> {
    let all: Vec<&Value> = base.iter().chain(over.iter()).collect();
    let Some(field) = keyed_field(&all) else {
        return base.into_iter().chain(over).collect();
    };
    let key = |v: &Value| {
        v.get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut out = base;
    for item in over {
        match out.iter().position(|b| key(b) == key(&item)) {
            Some(i) => out[i] = item,
            None => out.push(item),
        }
    }
    out
}

/// A scalar value by a dotted path (`modules.bmm.implementation_artifacts`).
pub fn lookup<'a>(table: &'a Table, dotted: &str) -> Option<&'a Value> {
    let mut parts = dotted.split('.');
    let mut current = table.get(parts.next()?)?;
    for part in parts {
        current = current.as_table()?.get(part)?;
    }
    Some(current)
}

/// Every scalar named `key` anywhere in `table`, with its dotted path (BMAD's `{{.key}}`).
pub fn find_scalars<'a>(table: &'a Table, key: &str) -> Vec<(String, &'a Value)> {
    let mut out = Vec::new();
    fn walk<'a>(t: &'a Table, key: &str, prefix: &str, out: &mut Vec<(String, &'a Value)>) {
        for (name, v) in t {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            match v {
                Value::Table(sub) => walk(sub, key, &path, out),
                Value::Array(_) => {}
                _ if name == key => out.push((path, v)),
                _ => {}
            }
        }
    }
    walk(table, key, "", &mut out);
    out
}

/// A scalar as text.
pub fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        Value::Datetime(d) => Some(d.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn tables_deep_merge_keyed_arrays_replace_by_id_other_arrays_append() {
        let base = t(r#"
[workflow]
on_complete = ""
persistent_facts = ["a"]
[[workflow.review_layers]]
id = "one"
instruction = "first"
[[workflow.review_layers]]
id = "two"
instruction = "second"
"#);
        let over = t(r#"
[workflow]
on_complete = "ring the bell"
persistent_facts = ["b"]
[[workflow.review_layers]]
id = "two"
instruction = ""
[[workflow.review_layers]]
id = "three"
instruction = "third"
"#);
        let merged = merge_tables(base, over);
        let wf = merged["workflow"].as_table().unwrap();
        assert_eq!(wf["on_complete"].as_str(), Some("ring the bell"));
        let facts: Vec<&str> = wf["persistent_facts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(facts, ["a", "b"]);
        let layers = wf["review_layers"].as_array().unwrap();
        let ids: Vec<&str> = layers.iter().filter_map(|l| l["id"].as_str()).collect();
        assert_eq!(ids, ["one", "two", "three"]);
        assert_eq!(layers[1]["instruction"].as_str(), Some(""));
    }

    #[test]
    fn central_layers_in_order_and_flat_yaml_without_them() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("_bmad/custom")).unwrap();
        std::fs::create_dir_all(root.join("_bmad/bmm")).unwrap();
        std::fs::write(
            root.join("_bmad/bmm/config.yaml"),
            "implementation_artifacts: old\nuser_name: Yaml\n",
        )
        .unwrap();
        let r = Reader::open(root).unwrap();
        let flat = central(&r).unwrap();
        assert_eq!(flat.table["user_name"].as_str(), Some("Yaml"));
        assert_eq!(flat.files, ["_bmad/bmm/config.yaml"]);
        std::fs::write(
            root.join("_bmad/config.toml"),
            "[modules.bmm]\nimplementation_artifacts = \"{project-root}/a\"\n",
        )
        .unwrap();
        std::fs::write(
            root.join("_bmad/custom/config.toml"),
            "[modules.bmm]\nimplementation_artifacts = \"{project-root}/b\"\n",
        )
        .unwrap();
        let c = central(&r).unwrap();
        assert_eq!(
            lookup(&c.table, "modules.bmm.implementation_artifacts").and_then(Value::as_str),
            Some("{project-root}/b")
        );
        assert_eq!(c.files, ["_bmad/config.toml", "_bmad/custom/config.toml"]);
        assert_eq!(find_scalars(&c.table, "implementation_artifacts").len(), 1);
        std::fs::write(root.join("_bmad/custom/config.user.toml"), "x = [").unwrap();
        let e = central(&r).unwrap_err();
        assert_eq!(e.code, "EPIC_SKILL_CONFIG_INVALID");
        assert!(e.message.contains("_bmad/custom/config.user.toml"), "{e}");
    }
}
