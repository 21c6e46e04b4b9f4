//! Whatever state.json and intent a model or a person wrote, the inference answers or refuses
//! with a located error; it never panics.

use super::fixture::Project;
use crate::session::infer::{breadth, infer, intent, state_file};
use proptest::prelude::*;
use serde_json::{Map, Value};
use std::path::Path;

/// Keys the parser looks at, plus noise, so that generated documents reach the deep paths.
const KEYS: &[&str] = &[
    "milestones",
    "artifacts",
    "current_milestone",
    "id",
    "type",
    "status",
    "phase",
    "phases",
    "phase_slugs",
    "path",
    "scope",
    "milestone",
    "created_at",
    "number",
    "slug",
    "name",
    "1",
    "x",
];
const WORDS: &[&str] = &[
    "analyze",
    "plan",
    "execute",
    "verify",
    "review",
    "test",
    "completed",
    "in_progress",
    "pending",
    "failed",
    "M1",
    "macro",
    "phase",
    "1",
    "2-auth",
    "scratch/a",
    "../x",
    "",
];

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..5).prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(WORDS).prop_map(Value::from),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..8).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn any_state_document_parses_or_is_located(doc in json()) {
        if let Err(e) = state_file::parse(Path::new("state.json"), &doc) {
            prop_assert!(!e.code().is_empty());
            prop_assert!(e.to_string().starts_with("state.json"), "{}", e);
        }
    }

    #[test]
    fn any_intent_is_read_without_panic(text in "\\PC{0,80}") {
        let ws = intent::words(&text);
        let _ = intent::explicit_phases(&text);
        let _ = intent::derived_slug(&text);
        let _ = intent::stage_override(&text);
        let _ = intent::artifact_slug(&text);
        let _ = intent::slug_matches(&text, &ws);
        let _ = breadth::classify(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_project_infers_or_refuses(doc in json(), text in "[a-z0-9 ]{1,30}", auto in any::<bool>()) {
        let p = Project::with_state(doc);
        let opts = crate::session::infer::Options { auto, ..Default::default() };
        if let Err(e) = infer(p.root(), &text, &opts) {
            prop_assert!(!e.code().is_empty());
        }
    }
}
