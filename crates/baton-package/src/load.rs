//! Loading a package: validation that yields the package, or the report that says why not.

use crate::package::Package;
use crate::validate::{self, Report, ValidateOptions};
use std::path::Path;

/// Why a package could not be loaded: the validation report with at least one error.
#[derive(Debug, thiserror::Error)]
#[error("package is invalid: {}", first_error(.0))]
pub struct InvalidPackage(pub Box<Report>);

fn first_error(report: &Report) -> String {
    report
        .diagnostics
        .errors()
        .next()
        .map(ToString::to_string)
        .unwrap_or_else(|| "unknown error".into())
}

impl Package {
    /// Loads and validates the whole package at `path`.
    pub fn load(path: &Path) -> Result<Package, InvalidPackage> {
        let report = validate::validate_path(path, &ValidateOptions::default());
        match report.package.clone() {
            Some(p) => Ok(p),
            None => Err(InvalidPackage(Box::new(report))),
        }
    }
}
