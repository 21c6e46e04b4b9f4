//! `.bmad` archives: packing round trips, zip-slip and link entries, zip bombs, garbage input.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::files::read_zip_bytes;
use baton_package::pack::pack;
use baton_package::{Code, Diagnostics, Limits, Package, ValidateOptions, validate_path};
use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/packages")
        .join(name)
}

/// A zip with the given (raw name, content) entries, plus a valid package's files.
fn zip_with(base: Option<&str>, extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    if let Some(name) = base {
        let pkg = Package::load(&example(name)).unwrap();
        for (path, bytes) in pkg.files().iter() {
            w.start_file(path, opts).unwrap();
            w.write_all(bytes).unwrap();
        }
    }
    for (name, bytes) in extra {
        w.start_file(*name, opts).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn validate_bytes(bytes: &[u8]) -> baton_package::Report {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.bmad");
    std::fs::write(&path, bytes).unwrap();
    validate_path(&path, &ValidateOptions::default())
}

fn error_codes(report: &baton_package::Report) -> Vec<Code> {
    report.diagnostics.errors().map(|d| d.code).collect()
}

#[test]
fn packed_examples_validate_with_matching_integrity() {
    for name in ["create-story-micro", "bug-triage", "docs-kit"] {
        let dir_pkg = Package::load(&example(name)).unwrap();
        let packed = pack(dir_pkg.files()).unwrap();
        assert_eq!(packed.sha256, dir_pkg.content_sha256());
        let report = validate_bytes(&packed.bytes);
        assert!(report.ok(), "{name}: {:#?}", report.diagnostics.all());
        let zip_pkg = report.package.unwrap();
        assert_eq!(
            zip_pkg.content_sha256(),
            dir_pkg.content_sha256(),
            "{name}: same digest as a dir and as a zip"
        );
        assert_eq!(zip_pkg.install_id(), dir_pkg.install_id());
        let stamped = zip_pkg
            .manifest()
            .integrity
            .as_ref()
            .and_then(|i| i.sha256.clone());
        assert_eq!(stamped.as_deref(), Some(packed.sha256.as_str()));
        // Packing is reproducible byte for byte.
        assert_eq!(pack(dir_pkg.files()).unwrap().bytes, packed.bytes);
    }
}

#[test]
fn tampering_with_a_packed_file_breaks_integrity() {
    let pkg = Package::load(&example("create-story-micro")).unwrap();
    let mut files = pkg.files().clone();
    let packed = pack(&files).unwrap();
    let mut diags = Diagnostics::default();
    let mut map = read_zip_bytes(&packed.bytes, &Limits::default(), &mut diags).unwrap();
    map.insert("assets/story-template.md".into(), b"# changed\n".to_vec());
    files = baton_package::PackageFiles::from_map(baton_package::Origin::Zip(PathBuf::new()), map);
    let report =
        baton_package::validate_files(files, &ValidateOptions::default(), Diagnostics::default());
    assert_eq!(error_codes(&report), vec![Code::IntegrityMismatch]);
}

#[test]
fn zip_slip_entries_are_refused() {
    for name in [
        "../evil.md",
        "/etc/evil.md",
        "a/../../evil.md",
        "C:\\evil.md",
        "..\\evil.md",
        "a//b.md",
        "./../x.md",
    ] {
        let report = validate_bytes(&zip_with(Some("create-story-micro"), &[(name, b"x")]));
        let errors: Vec<_> = report.diagnostics.errors().collect();
        assert_eq!(errors.len(), 1, "{name}: {errors:#?}");
        assert_eq!(errors[0].code, Code::ZipUnsafePath, "{name}");
        assert!(errors[0].file.is_some() && errors[0].hint.is_some());
    }
}

#[test]
fn nul_in_an_entry_name_is_refused() {
    let mut bytes = zip_with(Some("create-story-micro"), &[("evilXname.md", b"x")]);
    // Patch the name in both the local header and the central directory.
    let needle = b"evilXname.md";
    let mut i = 0;
    while let Some(pos) = bytes[i..].windows(needle.len()).position(|w| w == needle) {
        bytes[i + pos + 4] = 0;
        i += pos + 1;
    }
    let report = validate_bytes(&bytes);
    assert_eq!(error_codes(&report), vec![Code::ZipUnsafePath]);
}

#[test]
fn symlink_entries_are_refused() {
    let pkg = Package::load(&example("create-story-micro")).unwrap();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    for (path, bytes) in pkg.files().iter() {
        w.start_file(path, opts).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.add_symlink("assets/passwd.md", "/etc/passwd", opts)
        .unwrap();
    let report = validate_bytes(&w.finish().unwrap().into_inner());
    let errors: Vec<_> = report.diagnostics.errors().collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].code, Code::ZipUnsafePath);
    assert_eq!(errors[0].file.as_deref(), Some("assets/passwd.md"));
}

#[test]
fn zip_bomb_is_stopped_at_the_limit() {
    // 40 MiB of zeros deflates to about 40 KiB: far past the 16 MiB per-file limit.
    let zeros = vec![0u8; 40 * 1024 * 1024];
    let bomb = zip_with(Some("create-story-micro"), &[("assets/zeros.md", &zeros)]);
    assert!(
        bomb.len() < 200 * 1024,
        "compressed bomb is small: {}",
        bomb.len()
    );
    let report = validate_bytes(&bomb);
    assert_eq!(error_codes(&report), vec![Code::ZipTooLarge]);
    // Many medium entries hit the total limit instead.
    let limits = Limits {
        max_total_bytes: 1024 * 1024,
        ..Limits::default()
    };
    let chunk = vec![b'a'; 300 * 1024];
    let many = zip_with(
        None,
        &[
            ("a.md", &chunk),
            ("b.md", &chunk),
            ("c.md", &chunk),
            ("d.md", &chunk),
        ],
    );
    let mut diags = Diagnostics::default();
    assert!(read_zip_bytes(&many, &limits, &mut diags).is_none());
    assert_eq!(diags.errors().next().unwrap().code, Code::ZipTooLarge);
}

#[test]
fn non_zip_and_truncated_archives_are_invalid() {
    let report = validate_bytes(b"this is not a zip file at all");
    assert_eq!(error_codes(&report), vec![Code::ZipInvalid]);
    let empty = validate_bytes(b"");
    assert_eq!(error_codes(&empty), vec![Code::ZipInvalid]);
    let good = pack(Package::load(&example("bug-triage")).unwrap().files())
        .unwrap()
        .bytes;
    for cut in [good.len() / 4, good.len() / 2, good.len() - 10] {
        let report = validate_bytes(&good[..cut]);
        assert!(!report.ok(), "cut at {cut}");
        assert!(
            error_codes(&report)
                .iter()
                .all(|c| matches!(c, Code::ZipInvalid | Code::ManifestNotFound)),
            "{:?}",
            error_codes(&report)
        );
    }
}

#[test]
fn classic_workflow_zip_is_refused() {
    let classic = zip_with(
        None,
        &[
            ("create-story/workflow.yaml", b"name: x\n"),
            ("create-story/instructions.xml", b"<x/>"),
        ],
    );
    let report = validate_bytes(&classic);
    assert_eq!(
        error_codes(&report),
        vec![Code::NotSupportedClassicWorkflow]
    );
}

/// Renames every occurrence of `from` in the archive's name bytes (local headers and central
/// directory) to `to`. The names must have the same length, so no offset moves.
fn rename_entry(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let mut found = 0;
    let mut i = 0;
    while let Some(pos) = bytes[i..].windows(from.len()).position(|w| w == from) {
        bytes[i + pos..i + pos + to.len()].copy_from_slice(to);
        found += 1;
        i += pos + 1;
    }
    assert_eq!(found, 2, "one local header and one central directory name");
}

#[test]
fn duplicate_entry_names_are_refused() {
    // The zip writer refuses duplicate names, so write a second entry under a name of the same
    // length and patch its name bytes to equal the first one's.
    let pkg = Package::load(&example("create-story-micro")).unwrap();
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default();
    for (path, bytes) in pkg.files().iter() {
        w.start_file(path, opts).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.start_file("assets/story-templatX.md", opts).unwrap();
    w.write_all(b"# the second copy\n").unwrap();
    let mut bytes = w.finish().unwrap().into_inner();
    rename_entry(
        &mut bytes,
        b"assets/story-templatX.md",
        b"assets/story-template.md",
    );

    let report = validate_bytes(&bytes);
    assert_eq!(error_codes(&report), vec![Code::ZipDuplicateEntry]);
    assert!(report.package.is_none(), "neither copy is installed");
    let d = report.diagnostics.errors().next().unwrap();
    assert_eq!(d.file.as_deref(), Some("assets/story-template.md"));
    assert!(d.message.contains("assets/story-template.md"), "{d:?}");
    assert!(d.hint.is_some());

    // Names that only normalize to the same path are duplicates as well.
    let twice = zip_with(None, &[("a/b.md", b"1"), ("./a/b.md", b"2")]);
    let mut diags = Diagnostics::default();
    read_zip_bytes(&twice, &Limits::default(), &mut diags);
    let codes: Vec<Code> = diags.errors().map(|d| d.code).collect();
    assert_eq!(codes, vec![Code::ZipDuplicateEntry]);
}
