//! BMAD workflow packages, spec v1.1 ("micro-file + graph"): the typed model, safe loading from a
//! directory or a `.bmad` zip, validation with located and actionable diagnostics, workflow
//! selection, graph analysis, packing and rendering.
//!
//! This crate reads packages and nothing else: it never writes to disk (`template` makes the
//! files of a new package; its caller writes them).

pub mod diagnostic;
pub mod digest;
pub mod files;
pub mod frontmatter;
pub mod graph;
pub mod install_id;
mod json_lines;
mod load;
pub mod model;
pub mod pack;
mod package;
pub mod paths;
pub mod render;
pub mod schema;
pub mod sections;
pub mod template;
pub mod validate;
pub mod workflow_ref;
mod zip_names;

pub use diagnostic::{Code, Diagnostic, Diagnostics, Severity};
pub use files::{Limits, Origin, PackageFiles};
pub use graph::{Graph, Successor};
pub use load::InvalidPackage;
pub use package::{Package, Workflow};
pub use validate::{Report, ValidateOptions, validate_files, validate_path};
