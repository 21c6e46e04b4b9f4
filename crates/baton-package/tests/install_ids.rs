//! Install ids of packages whose names are not plain ASCII: readable, safe as one directory
//! name, and the same for the same name.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::{Package, ValidateOptions, validate_path};
use baton_testkit::{copy_dir, example};
use std::fs;

/// create-story-micro renamed to `name`, loaded.
fn named(name: &str) -> Package {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("pkg");
    copy_dir(&example("create-story-micro"), &root);
    let manifest = root.join("bmad.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&manifest).unwrap()).unwrap();
    doc["name"] = name.into();
    fs::write(&manifest, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let report = validate_path(&root, &ValidateOptions::default());
    assert!(report.ok(), "{name}: {:#?}", report.diagnostics.all());
    report.package.unwrap()
}

fn name_part(package: &Package) -> String {
    let id = package.install_id();
    let (name, rest) = id.rsplit_once('@').unwrap();
    assert_eq!(
        rest,
        format!("1.0.0-{}", &package.content_sha256()[..8]),
        "{id}"
    );
    name.to_string()
}

#[test]
fn non_ascii_names_get_readable_safe_ids() {
    for (name, want) in [
        ("Crème brûlée", "Creme-brulee"),
        // The same text with combining accents (NFD) gives the same id.
        ("Cre\u{300}me bru\u{302}le\u{301}e", "Creme-brulee"),
        ("Straße Ærø Łódź", "Strasse-AEro-Lodz"),
        ("故事", "%E6%95%85%E4%BA%8B"),
        ("Über 故事", "Uber-%E6%95%85%E4%BA%8B"),
        ("-rf", "rf"),
        ("--", "package"),
        (".hidden", "hidden"),
        ("../../etc", "etc"),
        ("a/b\\c d\u{a0}e", "a-b-c-d-e"),
        ("\u{202e}evil", "%E2%80%AEevil"),
    ] {
        let id = named(name).install_id();
        assert_eq!(name_part(&named(name)), want, "{name:?} -> {id}");
        assert!(
            !id.starts_with(['-', '.'])
                && !id.contains(['/', '\\', ' ', '\0'])
                && id.is_ascii()
                && id.len() <= 255,
            "{name:?} -> {id}"
        );
        assert_eq!(id, named(name).install_id(), "stable for {name:?}");
    }
}

#[test]
fn ascii_names_keep_their_ids() {
    // Ids of installed packages must not change: ASCII names map exactly as before.
    for (name, want) in [
        ("create-story-micro", "create-story-micro"),
        ("My Pkg", "My-Pkg"),
        ("a.b_c-d", "a.b_c-d"),
        ("x@y:z", "x-y-z"),
    ] {
        assert_eq!(name_part(&named(name)), want, "{name:?}");
    }
}

#[test]
fn very_long_names_still_fit_one_directory_name() {
    let id = named(&"é".repeat(300)).install_id();
    assert!(id.len() <= 255, "{} bytes", id.len());
    assert!(id.starts_with("eeee"), "{id}");
    let id = named(&"故".repeat(300)).install_id();
    assert!(id.len() <= 255, "{} bytes", id.len());
    let (name, _) = id.rsplit_once('@').unwrap();
    assert!(
        name.len() % 9 == 0 && name.starts_with("%E6%95%85"),
        "no percent escape is cut in half: {id}"
    );
}
