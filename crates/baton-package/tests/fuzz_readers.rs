//! Property tests: random input never panics the frontmatter or zip readers, or validation.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::files::read_zip_bytes;
use baton_package::frontmatter::{parse_yaml_mapping, split};
use baton_package::{
    Diagnostics, Limits, Origin, Package, PackageFiles, ValidateOptions, validate_files,
};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn packed_example() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/packages/create-story-micro");
        baton_package::pack::pack(Package::load(&dir).unwrap().files())
            .unwrap()
            .bytes
    })
}

fn validate_zip(bytes: &[u8]) {
    let mut diags = Diagnostics::default();
    if let Some(files) = read_zip_bytes(bytes, &Limits::default(), &mut diags) {
        let files = PackageFiles::from_map(Origin::Zip(PathBuf::new()), files);
        let _ = validate_files(files, &ValidateOptions::default(), diags);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn frontmatter_reader_never_panics(text in "(---\r?\n)?[\\PC\r\n]{0,300}(\r?\n---\r?\n)?[\\PC\n]{0,40}") {
        if let Ok(s) = split(&text) {
            let _ = parse_yaml_mapping(s.yaml);
            prop_assert!(text.len() >= s.yaml.len() + s.body.len());
        }
    }

    #[test]
    fn yaml_parser_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_yaml_mapping(&text);
    }

    #[test]
    fn zip_reader_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        validate_zip(&bytes);
        let mut with_magic = b"PK\x03\x04".to_vec();
        with_magic.extend_from_slice(&bytes);
        validate_zip(&with_magic);
    }

    #[test]
    fn zip_reader_never_panics_on_corrupted_packages(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16)
    ) {
        let mut bytes = packed_example().to_vec();
        for (index, value) in flips {
            let i = index.index(bytes.len());
            bytes[i] = value;
        }
        validate_zip(&bytes);
    }
}
