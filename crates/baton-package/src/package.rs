//! A validated, loaded package.

use crate::diagnostic::Diagnostic;
use crate::files::PackageFiles;
use crate::graph::Graph;
use crate::model::{Agent, Manifest, Step};
use crate::workflow_ref;
use std::collections::BTreeMap;

/// One workflow of a package: its state template, graph and step files.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    pub id: String,
    pub display_name: Option<String>,
    /// Package-relative path of `workflow.md` (the run-state template).
    pub workflow_file: String,
    /// Package-relative path of the graph (what `RUN_DIRECTIVE.graph` shows as `@pkg/<path>`).
    pub graph_file: String,
    /// The text of `workflow.md`, copied into a new run's state.
    pub state_template: String,
    pub graph: Graph,
    /// Step files keyed by node id.
    pub steps: BTreeMap<String, Step>,
}

/// A package that passed validation (no errors; warnings may exist).
#[derive(Debug, Clone)]
pub struct Package {
    files: PackageFiles,
    manifest: Manifest,
    agents: Vec<Agent>,
    workflows: Vec<Workflow>,
    /// Every workflow id the manifest declares, also when validation loaded only one.
    workflow_ids: Vec<String>,
    content_sha256: String,
}

impl Package {
    pub(crate) fn new(
        files: PackageFiles,
        manifest: Manifest,
        agents: Vec<Agent>,
        workflows: Vec<Workflow>,
        workflow_ids: Vec<String>,
        content_sha256: String,
    ) -> Package {
        Package {
            files,
            manifest,
            agents,
            workflows,
            workflow_ids,
            content_sha256,
        }
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    pub fn version(&self) -> &str {
        &self.manifest.version
    }

    pub fn files(&self) -> &PackageFiles {
        &self.files
    }

    /// The content digest (see [`crate::digest`]).
    pub fn content_sha256(&self) -> &str {
        &self.content_sha256
    }

    /// `<name>@<version>-<first 8 hex of the digest>`: the install directory name.
    /// See [`crate::install_id`] for how names that are not plain ASCII are spelled.
    pub fn install_id(&self) -> String {
        crate::install_id::install_id(
            &self.manifest.name,
            &self.manifest.version,
            &self.content_sha256,
        )
    }

    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    pub fn agent(&self, id: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.id == id)
    }

    pub fn workflows(&self) -> &[Workflow] {
        &self.workflows
    }

    /// The ids of every workflow of the package, in manifest order. [`Package::workflows`]
    /// holds only the one a run selected when validation was given `--workflow`.
    pub fn workflow_ids(&self) -> &[String] {
        &self.workflow_ids
    }

    pub fn workflow(&self, id: &str) -> Option<&Workflow> {
        self.workflows.iter().find(|w| w.id == id)
    }

    /// Applies the workflowRef rules: `WORKFLOW_REF_REQUIRED`, `WORKFLOW_REF_UNKNOWN`,
    /// `WORKFLOW_REF_MISMATCH`.
    pub fn resolve_workflow(&self, workflow_ref: Option<&str>) -> Result<&Workflow, Diagnostic> {
        let ids: Vec<&str> = self.workflows.iter().map(|w| w.id.as_str()).collect();
        workflow_ref::select_index(&self.manifest, &ids, workflow_ref).map(|i| &self.workflows[i])
    }
}
