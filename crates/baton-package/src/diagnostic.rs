//! Located, actionable validation findings with stable codes.

use serde::Serialize;
use std::fmt;

macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident = $text:literal,)*) => {
        /// Stable diagnostic codes. The spelling is part of baton's interface: scripts match on it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code { $($(#[$doc])* $variant,)* }

        impl Code {
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $text,)* }
            }
        }
    };
}

codes! {
    /// The package path does not exist.
    PackageNotFound = "PACKAGE_NOT_FOUND",
    /// The package could not be read (I/O error).
    PackageReadFailed = "PACKAGE_READ_FAILED",
    /// The package (directory or zip) exceeds a size or entry-count limit.
    PackageTooLarge = "PACKAGE_TOO_LARGE",
    /// A symlink in a package directory points outside the package.
    PackageUnsafeSymlink = "PACKAGE_UNSAFE_SYMLINK",
    /// A path inside a manifest or graph escapes the package or is not a relative POSIX path.
    PackagePathUnsafe = "PACKAGE_PATH_UNSAFE",
    /// A text file is not valid UTF-8.
    FileNotUtf8 = "FILE_NOT_UTF8",
    /// The `.bmad` file is not a readable zip archive.
    ZipInvalid = "ZIP_INVALID",
    /// A zip entry would land outside the package (zip-slip), or is a link or device.
    ZipUnsafePath = "ZIP_UNSAFE_PATH",
    /// A zip entry expands past the size limits (zip bomb).
    ZipTooLarge = "ZIP_TOO_LARGE",
    /// Two zip entries have the same name or the same normalized path.
    ZipDuplicateEntry = "ZIP_DUPLICATE_ENTRY",
    /// A classic BMAD workflow (`workflow.yaml` + `instructions.xml`) is not a v1.1 package.
    NotSupportedClassicWorkflow = "NOT_SUPPORTED_CLASSIC_WORKFLOW",
    /// `bmad.json` is missing.
    ManifestNotFound = "MANIFEST_NOT_FOUND",
    /// `bmad.json` is not valid JSON or does not match the v1.1 manifest schema.
    ManifestInvalid = "MANIFEST_INVALID",
    /// `integrity.sha256` does not match the package content.
    IntegrityMismatch = "INTEGRITY_MISMATCH",
    /// `entry.assetsDir` holds no files but a file refers to `@pkg/<assetsDir>/...` (warning).
    AssetsDirNotFound = "ASSETS_DIR_NOT_FOUND",
    /// A workflow's `workflow.md` is missing.
    WorkflowFileNotFound = "WORKFLOW_FILE_NOT_FOUND",
    /// `workflow.md` has no frontmatter block.
    WorkflowMissingFrontmatter = "WORKFLOW_MISSING_FRONTMATTER",
    /// `workflow.md` frontmatter is not valid YAML or does not match the schema.
    WorkflowFrontmatterInvalid = "WORKFLOW_FRONTMATTER_INVALID",
    /// Two entries of `workflows[]` share an id.
    WorkflowDuplicateId = "WORKFLOW_DUPLICATE_ID",
    /// The package lists several workflows and none was named; the message lists their ids.
    WorkflowRefRequired = "WORKFLOW_REF_REQUIRED",
    /// The named workflow is not in `workflows[]`.
    WorkflowRefUnknown = "WORKFLOW_REF_UNKNOWN",
    /// A single-workflow package was asked for another workflow id.
    WorkflowRefMismatch = "WORKFLOW_REF_MISMATCH",
    /// A workflow's graph file is missing.
    GraphFileNotFound = "GRAPH_FILE_NOT_FOUND",
    /// The graph is not valid JSON.
    GraphJsonInvalid = "GRAPH_JSON_INVALID",
    /// The graph does not match the v1.1 graph schema.
    GraphSchemaInvalid = "GRAPH_SCHEMA_INVALID",
    /// The graph refers to nodes that do not exist, or repeats a node id.
    GraphIntegrityInvalid = "GRAPH_INTEGRITY_INVALID",
    /// No `end` node can be reached from the entry node.
    GraphEndUnreachable = "GRAPH_END_UNREACHABLE",
    /// A node cannot be reached from the entry node (warning).
    GraphNodeUnreachable = "GRAPH_NODE_UNREACHABLE",
    /// A non-end node has no outgoing edge.
    GraphDeadEnd = "GRAPH_DEAD_END",
    /// A decision node has fewer than two branches, or not exactly one default.
    GraphDecisionInvalid = "GRAPH_DECISION_INVALID",
    /// A cycle has no decision node, or no edge that leaves it.
    GraphCycleInvalid = "GRAPH_CYCLE_INVALID",
    /// Branching outside a decision node is ambiguous (warning).
    GraphBranchAmbiguous = "GRAPH_BRANCH_AMBIGUOUS",
    /// A step file named by `node.file` is missing.
    StepFileNotFound = "STEP_FILE_NOT_FOUND",
    /// A step file has no frontmatter block.
    StepMissingFrontmatter = "STEP_MISSING_FRONTMATTER",
    /// A step frontmatter is not valid YAML or does not match the schema.
    StepInvalidFrontmatter = "STEP_INVALID_FRONTMATTER",
    /// A step file's `nodeId` differs from its graph node id.
    StepNodeIdMismatch = "STEP_NODE_ID_MISMATCH",
    /// A step file's `type` differs from its graph node type.
    StepTypeMismatch = "STEP_TYPE_MISMATCH",
    /// A step file lacks a `## Goal` section.
    StepMissingGoal = "STEP_MISSING_GOAL",
    /// A step file lacks a `## Instructions` section.
    StepMissingInstructions = "STEP_MISSING_INSTRUCTIONS",
    /// A step section is empty (warning).
    StepEmptySection = "STEP_EMPTY_SECTION",
    /// A step's `transitions` disagree with the graph edges (warning).
    StepTransitionsMismatch = "STEP_TRANSITIONS_MISMATCH",
    /// `agents.json` is missing.
    AgentsFileNotFound = "AGENTS_FILE_NOT_FOUND",
    /// `agents.json` is not valid JSON or does not match the schema.
    AgentsInvalid = "AGENTS_INVALID",
    /// Two agents share an id.
    AgentDuplicateId = "AGENT_DUPLICATE_ID",
    /// An `agentId` names no agent of `agents.json`.
    AgentNotFound = "AGENT_NOT_FOUND",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One finding, located as precisely as the file allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub code: Code,
    #[serde(skip)]
    pub severity: Severity,
    /// Package-relative POSIX path of the file concerned.
    pub file: Option<String>,
    /// JSON pointer into the file (for JSON files and frontmatter).
    pub pointer: Option<String>,
    /// 1-based line in the file.
    pub line: Option<u32>,
    pub message: String,
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn error(code: Code, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            severity: Severity::Error,
            file: None,
            pointer: None,
            line: None,
            message: message.into(),
            hint: None,
        }
    }

    pub fn warning(code: Code, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, message)
        }
    }

    pub fn file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }

    pub fn pointer(mut self, pointer: impl Into<String>) -> Self {
        self.pointer = Some(pointer.into());
        self
    }

    pub fn line(mut self, line: Option<u32>) -> Self {
        self.line = line;
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `file#pointer:line`, for one-line displays.
    pub fn location(&self) -> String {
        let mut out = self.file.clone().unwrap_or_default();
        if let Some(p) = &self.pointer
            && !p.is_empty()
        {
            out.push('#');
            out.push_str(p);
        }
        if let Some(l) = self.line {
            out.push_str(&format!(":{l}"));
        }
        out
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        let loc = self.location();
        if !loc.is_empty() {
            write!(f, " ({loc})")?;
        }
        Ok(())
    }
}

/// Collects diagnostics in the order they were found.
#[derive(Debug, Default, Clone)]
pub struct Diagnostics(Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    pub fn extend(&mut self, ds: impl IntoIterator<Item = Diagnostic>) {
        self.0.extend(ds);
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }

    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.is_error())
    }

    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| !d.is_error())
    }

    pub fn all(&self) -> &[Diagnostic] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.0
    }
}
