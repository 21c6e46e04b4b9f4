//! docs/packages.md names every field the v1.1 schemas require, so a person writing a
//! package by hand learns them before `baton validate` does (a schema that gains a required
//! field fails this test until the page says so).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::schema::SchemaKind;
use serde_json::Value;

/// The required fields of `node` as dotted paths (`agents[].metadata.icon`), following
/// `$ref`s into `$defs`, `properties`, `items` and `oneOf`/`anyOf`/`allOf`.
fn required(
    root: &Value,
    node: &Value,
    prefix: &str,
    seen: &mut Vec<String>,
    out: &mut Vec<String>,
) {
    if let Some(reference) = node.get("$ref").and_then(Value::as_str)
        && let Some(name) = reference.strip_prefix("#/$defs/")
        && !seen.iter().any(|s| s == reference)
    {
        seen.push(reference.to_string());
        required(root, &root["$defs"][name], prefix, seen, out);
        seen.pop();
    }
    for field in node["required"].as_array().into_iter().flatten() {
        out.push(format!("{prefix}{}", field.as_str().unwrap()));
    }
    for (key, sub) in node["properties"].as_object().into_iter().flatten() {
        required(root, sub, &format!("{prefix}{key}."), seen, out);
    }
    if let Some(items) = node.get("items") {
        let list = format!("{}[].", prefix.trim_end_matches('.'));
        required(root, items, &list, seen, out);
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        for sub in node[key].as_array().into_iter().flatten() {
            required(root, sub, prefix, seen, out);
        }
    }
}

#[test]
fn every_required_field_is_in_the_package_guide() {
    let guide = std::fs::read_to_string(baton_testkit::repo().join("docs/packages.md")).unwrap();
    let mut missing = Vec::new();
    let mut seen_fields = 0;
    for kind in SchemaKind::ALL {
        let schema: Value = serde_json::from_str(kind.source()).unwrap();
        let mut fields = Vec::new();
        required(&schema, &schema, "", &mut Vec::new(), &mut fields);
        seen_fields += fields.len();
        for field in fields {
            if !guide.contains(&format!("`{field}`")) {
                missing.push(format!("{}: {field}", kind.file_name()));
            }
        }
    }
    assert!(seen_fields > 40, "only {seen_fields} required fields found");
    assert!(
        missing.is_empty(),
        "not in docs/packages.md:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_guide_starts_with_baton_new() {
    let guide = std::fs::read_to_string(baton_testkit::repo().join("docs/packages.md")).unwrap();
    let first_section = guide.split("\n## ").nth(1).unwrap();
    assert!(
        first_section.starts_with("Your first package"),
        "{first_section}"
    );
    assert!(first_section.contains("baton new hello"));
}
