//! Whole-package validation: every schema and integrity rule, all problems in one pass.

use crate::diagnostic::{Code, Diagnostic, Diagnostics};
use crate::digest::{self, MANIFEST_PATH};
use crate::files::{self, Limits, PackageFiles};
use crate::frontmatter::{self, SplitError};
use crate::graph::Graph;
use crate::json_lines::line_of_pointer;
use crate::model::{Agent, AgentsDoc, GraphDoc, Manifest, Step, StepFrontmatter};
use crate::package::{Package, Workflow};
use crate::paths;
use crate::schema::{self, SchemaKind};
use crate::sections;
use crate::workflow_ref::{self, WorkflowSlot};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

#[derive(Debug, Clone, Default)]
pub struct ValidateOptions {
    /// Validate (and resolve) only this workflow, as a run would.
    pub workflow: Option<String>,
    pub limits: Limits,
}

/// The outcome of validating a package: all diagnostics, what could be learned about the
/// package, and the loaded package when there was no error.
#[derive(Debug, Clone)]
pub struct Report {
    pub diagnostics: Diagnostics,
    pub manifest: Option<Manifest>,
    pub workflow_ids: Vec<String>,
    pub package: Option<Package>,
}

impl Report {
    pub fn ok(&self) -> bool {
        !self.diagnostics.has_errors()
    }
}

/// Reads and validates the package at `path` (directory or `.bmad`).
pub fn validate_path(path: &Path, options: &ValidateOptions) -> Report {
    let mut diags = Diagnostics::default();
    match files::read_package(path, &options.limits, &mut diags) {
        Some(files) => validate_files(files, options, diags),
        None => Report {
            diagnostics: diags,
            manifest: None,
            workflow_ids: Vec::new(),
            package: None,
        },
    }
}

/// Validates files already read (problems found while reading are passed in `diags`).
pub fn validate_files(
    files: PackageFiles,
    options: &ValidateOptions,
    diags: Diagnostics,
) -> Report {
    let mut v = Validator {
        files: &files,
        diags,
    };
    let outcome = v.run(options);
    let Validator { diags, .. } = v;
    let (manifest, workflow_ids, parts) = match outcome {
        Some(o) => o,
        None => {
            return Report {
                diagnostics: diags,
                manifest: None,
                workflow_ids: Vec::new(),
                package: None,
            };
        }
    };
    let package = match parts {
        Some((agents, workflows)) if !diags.has_errors() => Some(Package::new(
            files.clone(),
            manifest.clone(),
            agents,
            workflows,
            workflow_ids.clone(),
            digest::content_digest(&files),
        )),
        _ => None,
    };
    Report {
        diagnostics: diags,
        manifest: Some(manifest),
        workflow_ids,
        package,
    }
}

type Parts = Option<(Vec<Agent>, Vec<Workflow>)>;

struct Validator<'a> {
    files: &'a PackageFiles,
    diags: Diagnostics,
}

/// A parsed markdown file with frontmatter.
struct Markdown<'t> {
    text: &'t str,
    yaml: &'t str,
    yaml_first_line: u32,
    body: &'t str,
    fields: Map<String, Value>,
}

impl<'a> Validator<'a> {
    fn run(&mut self, options: &ValidateOptions) -> Option<(Manifest, Vec<String>, Parts)> {
        if !self.files.contains(MANIFEST_PATH) {
            self.missing_manifest();
            return None;
        }
        let (manifest, manifest_text) = self.manifest()?;
        let slots = self.workflow_slots(&manifest, manifest_text);
        let ids: Vec<String> = slots.iter().map(|s| s.id.clone()).collect();
        self.integrity(&manifest, manifest_text);
        self.assets(&manifest, manifest_text);
        let agents = self.agents(&manifest, manifest_text);
        let agent_ids: HashSet<&str> = agents
            .as_ref()
            .map(|a| a.iter().map(|a| a.id.as_str()).collect())
            .unwrap_or_default();

        let selected: Vec<&WorkflowSlot> = match &options.workflow {
            Some(wanted) => match workflow_ref::select(&manifest, &slots, Some(wanted)) {
                Ok(slot) => vec![slot],
                Err(d) => {
                    self.diags.push(d.file(MANIFEST_PATH));
                    Vec::new()
                }
            },
            None => slots.iter().collect(),
        };
        let mut workflows = Vec::new();
        for slot in selected {
            if let Some(w) = self.workflow(slot, agents.as_ref().map(|_| &agent_ids)) {
                workflows.push(w);
            }
        }
        let parts = agents.map(|a| (a, workflows));
        Some((manifest, ids, parts))
    }

    fn missing_manifest(&mut self) {
        let classic = self.files.paths().find(|p| {
            let name = p.rsplit('/').next().unwrap_or(p);
            matches!(
                name,
                "workflow.yaml" | "workflow.yml" | "instructions.xml" | "workflow.xml"
            )
        });
        match classic {
            Some(path) => self.diags.push(
                Diagnostic::error(
                    Code::NotSupportedClassicWorkflow,
                    "this is a classic BMAD workflow (workflow.yaml + instructions.xml), not a v1.1 package",
                )
                .file(path)
                .hint("baton runs v1.1 micro-file packages: bmad.json, workflow.md, workflow.graph.json and steps/*.md; convert the workflow with the BMAD builder"),
            ),
            None => self.diags.push(
                Diagnostic::error(Code::ManifestNotFound, "bmad.json is missing")
                    .file(MANIFEST_PATH)
                    .hint("a package has bmad.json at its root; is this the package directory?"),
            ),
        }
    }

    /// UTF-8 text of a file without a BOM, reporting non-UTF-8 content.
    fn text(&mut self, path: &str) -> Option<&'a str> {
        let bytes = self.files.get(path)?;
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        match std::str::from_utf8(bytes) {
            Ok(t) => Some(t),
            Err(e) => {
                let line = bytes[..e.valid_up_to()]
                    .iter()
                    .filter(|b| **b == b'\n')
                    .count()
                    + 1;
                self.diags.push(
                    Diagnostic::error(Code::FileNotUtf8, format!("{path} is not valid UTF-8"))
                        .file(path)
                        .line(u32::try_from(line).ok())
                        .hint("save the file as UTF-8"),
                );
                None
            }
        }
    }

    fn json(&mut self, path: &str, code: Code) -> Option<(Value, &'a str)> {
        let text = self.text(path)?;
        match serde_json::from_str::<Value>(text) {
            Ok(v) => Some((v, text)),
            Err(e) => {
                self.diags.push(
                    Diagnostic::error(code, format!("{path} is not valid JSON: {e}"))
                        .file(path)
                        .line(u32::try_from(e.line()).ok().filter(|l| *l > 0))
                        .hint(
                            "fix the JSON syntax (a trailing comma or a missing quote is typical)",
                        ),
                );
                None
            }
        }
    }

    fn schema_errors(
        &mut self,
        kind: SchemaKind,
        code: Code,
        path: &str,
        text: &str,
        value: &Value,
    ) -> bool {
        let issues = schema::validate(kind, value);
        let any = !issues.is_empty();
        for issue in issues {
            let line = line_of_pointer(text, &issue.pointer);
            self.diags.push(
                Diagnostic::error(code, issue.message)
                    .file(path)
                    .pointer(issue.pointer)
                    .line(line)
                    .hint(issue.hint),
            );
        }
        any
    }

    /// A diagnostic located at `pointer` of a JSON file.
    fn at(&self, d: Diagnostic, path: &str, text: &str, pointer: &str) -> Diagnostic {
        d.file(path)
            .pointer(pointer)
            .line(line_of_pointer(text, pointer))
    }

    fn manifest(&mut self) -> Option<(Manifest, &'a str)> {
        let (value, text) = self.json(MANIFEST_PATH, Code::ManifestInvalid)?;
        self.schema_errors(
            SchemaKind::Manifest,
            Code::ManifestInvalid,
            MANIFEST_PATH,
            text,
            &value,
        );
        // Keep going after schema errors when the shape is still usable (unknown keys, bad
        // formats), so the rest of the package is checked in the same pass.
        let manifest: Manifest = serde_json::from_value(value).ok()?;
        if let Some(wf) = [&manifest.entry.workflow]
            .into_iter()
            .chain(manifest.workflows.iter().map(|w| &w.workflow))
            .find(|p| p.ends_with(".yaml") || p.ends_with(".yml") || p.ends_with(".xml"))
        {
            self.diags.push(
                Diagnostic::error(
                    Code::NotSupportedClassicWorkflow,
                    format!("workflow '{wf}' is a classic BMAD workflow file"),
                )
                .file(MANIFEST_PATH)
                .hint("v1.1 workflows are workflow.md files with a workflow.graph.json"),
            );
        }
        Some((manifest, text))
    }

    /// Normalizes a path named in a JSON document, reporting unsafe ones.
    fn package_path(&mut self, raw: &str, file: &str, text: &str, pointer: &str) -> Option<String> {
        match paths::normalize(raw) {
            Ok(p) => Some(p),
            Err(problem) => {
                let d = Diagnostic::error(
                    Code::PackagePathUnsafe,
                    format!("path '{raw}' is not allowed: {}", problem.describe()),
                )
                .hint("use a path relative to the package root, without '..'");
                let d = self.at(d, file, text, pointer);
                self.diags.push(d);
                None
            }
        }
    }

    fn workflow_slots(&mut self, manifest: &Manifest, text: &str) -> Vec<WorkflowSlot> {
        let mut slots = Vec::new();
        if manifest.workflows.is_empty() {
            let workflow = self.package_path(
                &manifest.entry.workflow,
                MANIFEST_PATH,
                text,
                "/entry/workflow",
            );
            let graph =
                self.package_path(&manifest.entry.graph, MANIFEST_PATH, text, "/entry/graph");
            if let (Some(workflow), Some(graph)) = (workflow, graph) {
                slots.push(WorkflowSlot {
                    id: workflow_ref::derived_entry_id(manifest),
                    display_name: None,
                    workflow,
                    graph,
                    pointer: "/entry".into(),
                });
            }
            return slots;
        }
        let mut seen = HashSet::new();
        for (i, w) in manifest.workflows.iter().enumerate() {
            if !seen.insert(w.id.clone()) {
                let d = Diagnostic::error(
                    Code::WorkflowDuplicateId,
                    format!("workflow id '{}' is listed twice", w.id),
                )
                .hint("give every entry of workflows[] a unique id");
                let d = self.at(d, MANIFEST_PATH, text, &format!("/workflows/{i}/id"));
                self.diags.push(d);
                continue;
            }
            let workflow = self.package_path(
                &w.workflow,
                MANIFEST_PATH,
                text,
                &format!("/workflows/{i}/workflow"),
            );
            let graph = self.package_path(
                &w.graph,
                MANIFEST_PATH,
                text,
                &format!("/workflows/{i}/graph"),
            );
            if let (Some(workflow), Some(graph)) = (workflow, graph) {
                slots.push(WorkflowSlot {
                    id: w.id.clone(),
                    display_name: w.display_name.clone(),
                    workflow,
                    graph,
                    pointer: format!("/workflows/{i}"),
                });
            }
        }
        self.listed_entry_files(manifest, text);
        slots
    }

    /// With `workflows[]` the entry files are not what a run uses, but they are still paths of
    /// the package (the Builder points them at the default workflow) and must name its files.
    fn listed_entry_files(&mut self, manifest: &Manifest, text: &str) {
        let Some(default) = manifest.workflows.first() else {
            return;
        };
        for (raw, field, code, example) in [
            (
                &manifest.entry.workflow,
                "workflow",
                Code::WorkflowFileNotFound,
                &default.workflow,
            ),
            (
                &manifest.entry.graph,
                "graph",
                Code::GraphFileNotFound,
                &default.graph,
            ),
        ] {
            let pointer = format!("/entry/{field}");
            let Some(path) = self.package_path(raw, MANIFEST_PATH, text, &pointer) else {
                continue;
            };
            if !self.files.contains(&path) {
                let d = Diagnostic::error(
                    code,
                    format!("entry.{field} names {path}, which is not in the package"),
                )
                .hint(format!(
                    "point entry.{field} at the default workflow's file, e.g. \"{example}\""
                ));
                let d = self.at(d, MANIFEST_PATH, text, &pointer);
                self.diags.push(d);
            }
        }
    }

    fn integrity(&mut self, manifest: &Manifest, text: &str) {
        let Some(expected) = manifest
            .integrity
            .as_ref()
            .and_then(|i| i.sha256.as_deref())
        else {
            return;
        };
        let actual = digest::content_digest(self.files);
        if !expected.eq_ignore_ascii_case(&actual) {
            let d = Diagnostic::error(
                Code::IntegrityMismatch,
                format!("integrity.sha256 is {expected} but the package content hashes to {actual}"),
            )
            .hint("the package was changed after it was packed; re-pack it with `baton package pack`, or remove integrity from a source directory");
            let d = self.at(d, MANIFEST_PATH, text, "/integrity/sha256");
            self.diags.push(d);
        }
    }

    fn assets(&mut self, manifest: &Manifest, text: &str) {
        let Some(dir) = manifest.entry.assets_dir.as_deref() else {
            return;
        };
        let Some(dir) = self.package_path(dir, MANIFEST_PATH, text, "/entry/assetsDir") else {
            return;
        };
        if self.files.has_dir(&dir) {
            return;
        }
        // Builders write `assetsDir: "assets/"` whether or not there are assets; an empty
        // directory only matters when some file reads from it.
        let Some(reference) = find_reference(self.files, &format!("@pkg/{dir}/")) else {
            return;
        };
        let d = Diagnostic::warning(
            Code::AssetsDirNotFound,
            format!(
                "entry.assetsDir '{dir}/' holds no files, but {}:{} refers to {}",
                reference.file, reference.line, reference.text
            ),
        )
        .hint(format!(
            "add {} to the package, or fix the reference",
            reference.text.trim_start_matches("@pkg/")
        ));
        let d = self.at(d, MANIFEST_PATH, text, "/entry/assetsDir");
        self.diags.push(d);
    }

    fn agents(&mut self, manifest: &Manifest, manifest_text: &str) -> Option<Vec<Agent>> {
        let path = self.package_path(
            &manifest.entry.agents,
            MANIFEST_PATH,
            manifest_text,
            "/entry/agents",
        )?;
        if !self.files.contains(&path) {
            let d = Diagnostic::error(
                Code::AgentsFileNotFound,
                format!("agents file '{path}' is missing"),
            )
            .hint("add agents.json at the package root, or fix entry.agents");
            let d = self.at(d, MANIFEST_PATH, manifest_text, "/entry/agents");
            self.diags.push(d);
            return None;
        }
        let (value, text) = self.json(&path, Code::AgentsInvalid)?;
        if self.schema_errors(SchemaKind::Agents, Code::AgentsInvalid, &path, text, &value) {
            return None;
        }
        let doc: AgentsDoc = match serde_json::from_value(value) {
            Ok(d) => d,
            Err(e) => {
                self.diags.push(
                    Diagnostic::error(Code::AgentsInvalid, format!("{path}: {e}"))
                        .file(path.clone()),
                );
                return None;
            }
        };
        let mut seen = HashSet::new();
        for (i, agent) in doc.agents.iter().enumerate() {
            if !seen.insert(agent.id.as_str()) {
                let d = Diagnostic::error(
                    Code::AgentDuplicateId,
                    format!("agent id '{}' is defined twice", agent.id),
                )
                .hint("give every agent a unique id");
                let d = self.at(d, &path, text, &format!("/agents/{i}/id"));
                self.diags.push(d);
            }
        }
        Some(doc.agents)
    }

    fn markdown(&mut self, path: &str, missing: Code, invalid: Code) -> Option<Markdown<'a>> {
        let text = self.text(path)?;
        let split = match frontmatter::split(text) {
            Ok(s) => s,
            Err(e) => {
                let line = match e {
                    SplitError::Unclosed | SplitError::Missing => Some(1),
                    SplitError::LeadingWhitespace => Some(1),
                };
                self.diags.push(
                    Diagnostic::error(missing, format!("{path}: {}", e.message()))
                        .file(path)
                        .line(line)
                        .hint(e.hint()),
                );
                return None;
            }
        };
        match frontmatter::parse_yaml_mapping(split.yaml) {
            Ok(fields) => Some(Markdown {
                text,
                yaml: split.yaml,
                yaml_first_line: split.yaml_first_line,
                body: split.body,
                fields,
            }),
            Err(e) => {
                self.diags.push(
                    Diagnostic::error(invalid, format!("{path}: invalid YAML frontmatter: {}", e.message))
                        .file(path)
                        .line(e.line.map(|l| l + split.yaml_first_line - 1))
                        .hint("fix the YAML between the '---' lines (quote values that contain ':' or '#')"),
                );
                None
            }
        }
    }

    /// Schema-checks a frontmatter mapping, locating issues at the line of the top-level key.
    fn frontmatter_schema(
        &mut self,
        kind: SchemaKind,
        code: Code,
        path: &str,
        md: &Markdown<'_>,
        value: &Value,
    ) -> bool {
        let issues = schema::validate(kind, value);
        let any = !issues.is_empty();
        for issue in issues {
            let line = self.frontmatter_line(md, &issue.pointer);
            self.diags.push(
                Diagnostic::error(code, format!("{path}: {}", issue.message))
                    .file(path)
                    .pointer(issue.pointer)
                    .line(line)
                    .hint(issue.hint),
            );
        }
        any
    }

    fn frontmatter_line(&self, md: &Markdown<'_>, pointer: &str) -> Option<u32> {
        let key = pointer
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
        frontmatter::top_level_key_line(md.yaml, key)
            .map(|l| l + md.yaml_first_line - 1)
            .or(Some(1))
    }

    fn workflow(
        &mut self,
        slot: &WorkflowSlot,
        agent_ids: Option<&HashSet<&str>>,
    ) -> Option<Workflow> {
        let manifest_text = self.text(MANIFEST_PATH).unwrap_or("");
        let wf_pointer = format!("{}/workflow", slot.pointer);
        let graph_pointer = format!("{}/graph", slot.pointer);

        let state = if self.files.contains(&slot.workflow) {
            self.workflow_md(&slot.workflow)
        } else {
            let d = Diagnostic::error(
                Code::WorkflowFileNotFound,
                format!(
                    "workflow '{}' names {}, which is not in the package",
                    slot.id, slot.workflow
                ),
            )
            .hint("add the workflow.md file or fix the path");
            let d = self.at(d, MANIFEST_PATH, manifest_text, &wf_pointer);
            self.diags.push(d);
            None
        };

        if !self.files.contains(&slot.graph) {
            let d = Diagnostic::error(
                Code::GraphFileNotFound,
                format!(
                    "workflow '{}' names graph {}, which is not in the package",
                    slot.id, slot.graph
                ),
            )
            .hint("add workflow.graph.json or fix the path");
            let d = self.at(d, MANIFEST_PATH, manifest_text, &graph_pointer);
            self.diags.push(d);
            return None;
        }
        let (value, graph_text) = self.json(&slot.graph, Code::GraphJsonInvalid)?;
        if self.schema_errors(
            SchemaKind::Graph,
            Code::GraphSchemaInvalid,
            &slot.graph,
            graph_text,
            &value,
        ) {
            return None;
        }
        let doc: GraphDoc = match serde_json::from_value(value) {
            Ok(d) => d,
            Err(e) => {
                self.diags.push(
                    Diagnostic::error(Code::GraphSchemaInvalid, format!("{}: {e}", slot.graph))
                        .file(slot.graph.clone()),
                );
                return None;
            }
        };
        let graph = Graph::new(doc);
        for d in graph.check() {
            let pointer = d.pointer.clone().unwrap_or_default();
            let d = self.at(d, &slot.graph, graph_text, &pointer);
            self.diags.push(d);
        }

        let mut steps = BTreeMap::new();
        for (i, node) in graph.nodes().iter().enumerate() {
            if let (Some(agent), Some(known)) = (&node.agent_id, agent_ids)
                && !known.contains(agent.as_str())
            {
                let d = unknown_agent(agent, known);
                let d = self.at(d, &slot.graph, graph_text, &format!("/nodes/{i}/agentId"));
                self.diags.push(d);
            }
            let pointer = format!("/nodes/{i}/file");
            let Some(file) = self.package_path(&node.file, &slot.graph, graph_text, &pointer)
            else {
                continue;
            };
            if !self.files.contains(&file) {
                let alt = paths::join(paths::parent(&slot.graph), &file);
                let hint = if self.files.contains(&alt) {
                    format!("node.file is relative to the package root: use \"{alt}\"")
                } else {
                    "add the step file or fix node.file (relative to the package root)".to_string()
                };
                let d = Diagnostic::error(
                    Code::StepFileNotFound,
                    format!(
                        "step file {file} of node '{}' is not in the package",
                        node.id
                    ),
                )
                .hint(hint);
                let d = self.at(d, &slot.graph, graph_text, &pointer);
                self.diags.push(d);
                continue;
            }
            if let Some(step) = self.step(&file, &graph, i, agent_ids) {
                steps.insert(node.id.clone(), step);
            }
        }

        let (state_template, state_fields) = state?;
        if let Some(current) = state_fields.get("currentNodeId").and_then(Value::as_str)
            && !current.is_empty()
            && graph.node(current).is_none()
        {
            let line = frontmatter::top_level_key_line(
                frontmatter::split(state_template)
                    .map(|s| s.yaml)
                    .unwrap_or(""),
                "currentNodeId",
            )
            .map(|l| l + 1);
            self.diags.push(
                Diagnostic::error(
                    Code::WorkflowFrontmatterInvalid,
                    format!("currentNodeId '{current}' is not a node of {}", slot.graph),
                )
                .file(slot.workflow.clone())
                .pointer("/currentNodeId")
                .line(line)
                .hint(format!(
                    "use \"\" or the entry node '{}'",
                    graph.entry_node_id()
                )),
            );
        }
        Some(Workflow {
            id: slot.id.clone(),
            display_name: slot.display_name.clone(),
            workflow_file: slot.workflow.clone(),
            graph_file: slot.graph.clone(),
            state_template: state_template.to_string(),
            graph,
            steps,
        })
    }

    fn workflow_md(&mut self, path: &str) -> Option<(&'a str, Map<String, Value>)> {
        let md = self.markdown(
            path,
            Code::WorkflowMissingFrontmatter,
            Code::WorkflowFrontmatterInvalid,
        )?;
        let value = Value::Object(md.fields.clone());
        if self.frontmatter_schema(
            SchemaKind::WorkflowFrontmatter,
            Code::WorkflowFrontmatterInvalid,
            path,
            &md,
            &value,
        ) {
            return None;
        }
        Some((md.text, md.fields))
    }

    fn step(
        &mut self,
        path: &str,
        graph: &Graph,
        node_index: usize,
        agent_ids: Option<&HashSet<&str>>,
    ) -> Option<Step> {
        let node = &graph.nodes()[node_index];
        let md = self.markdown(
            path,
            Code::StepMissingFrontmatter,
            Code::StepInvalidFrontmatter,
        )?;
        let value = Value::Object(md.fields.clone());
        if self.frontmatter_schema(
            SchemaKind::StepFrontmatter,
            Code::StepInvalidFrontmatter,
            path,
            &md,
            &value,
        ) {
            return None;
        }
        let fm: StepFrontmatter = match serde_json::from_value(value) {
            Ok(f) => f,
            Err(e) => {
                self.diags.push(
                    Diagnostic::error(Code::StepInvalidFrontmatter, format!("{path}: {e}"))
                        .file(path),
                );
                return None;
            }
        };
        let mut ok = true;
        if fm.node_id != node.id {
            ok = false;
            let line = self.frontmatter_line(&md, "/nodeId");
            self.diags.push(
                Diagnostic::error(
                    Code::StepNodeIdMismatch,
                    format!(
                        "{path} declares nodeId '{}' but graph node is '{}'",
                        fm.node_id, node.id
                    ),
                )
                .file(path)
                .pointer("/nodeId")
                .line(line)
                .hint(format!(
                    "set nodeId: {} (or point the node at the right file)",
                    node.id
                )),
            );
        }
        if fm.node_type != node.node_type {
            ok = false;
            let line = self.frontmatter_line(&md, "/type");
            self.diags.push(
                Diagnostic::error(
                    Code::StepTypeMismatch,
                    format!(
                        "{path} declares type '{}' but graph node '{}' is '{}'",
                        fm.node_type.as_str(),
                        node.id,
                        node.node_type.as_str()
                    ),
                )
                .file(path)
                .pointer("/type")
                .line(line)
                .hint("make the step type and the graph node type agree"),
            );
        }
        if let (Some(agent), Some(known)) =
            (fm.agent_id.as_deref().filter(|a| !a.is_empty()), agent_ids)
            && !known.contains(agent)
        {
            ok = false;
            let line = self.frontmatter_line(&md, "/agentId");
            self.diags.push(
                unknown_agent(agent, known)
                    .file(path)
                    .pointer("/agentId")
                    .line(line),
            );
        }
        for t in &fm.transitions {
            if !graph.has_edge(&node.id, &t.to) {
                let line = self.frontmatter_line(&md, "/transitions");
                self.diags.push(
                    Diagnostic::warning(
                        Code::StepTransitionsMismatch,
                        format!(
                            "{path} lists a transition to '{}', but the graph has no edge {} → {}",
                            t.to, node.id, t.to
                        ),
                    )
                    .file(path)
                    .pointer("/transitions")
                    .line(line)
                    .hint(
                        "the graph decides transitions; update the step's transitions to match it",
                    ),
                );
            }
        }

        let body_offset = md.text.len() - md.body.len();
        let body_first_line = md.text[..body_offset].lines().count() + 1;
        let s = sections::parse(md.body);
        let line_of = |section: &sections::Section| {
            u32::try_from(body_first_line + section.heading_line).ok()
        };
        for (section, name, code) in [
            (&s.goal, "Goal", Code::StepMissingGoal),
            (
                &s.instructions,
                "Instructions",
                Code::StepMissingInstructions,
            ),
        ] {
            match section {
                None => {
                    ok = false;
                    self.diags.push(
                        Diagnostic::error(code, format!("{path} has no '## {name}' section"))
                            .file(path)
                            .hint(format!("add a '## {name}' heading followed by its text")),
                    );
                }
                Some(sec) if sec.text.is_empty() => self.diags.push(
                    Diagnostic::warning(
                        Code::StepEmptySection,
                        format!("{path}: '## {name}' is empty"),
                    )
                    .file(path)
                    .line(line_of(sec))
                    .hint(format!(
                        "write the step's {} under the heading",
                        name.to_lowercase()
                    )),
                ),
                Some(_) => {}
            }
        }
        if !ok {
            return None;
        }
        Some(Step {
            file: path.to_string(),
            frontmatter: fm,
            goal: s.goal.map(|x| x.text).unwrap_or_default(),
            instructions: s.instructions.map(|x| x.text).unwrap_or_default(),
            completion: s.completion.map(|x| x.text),
            raw: md.text.to_string(),
        })
    }
}

/// Where a file of the package mentions a path.
struct Reference<'f> {
    file: &'f str,
    line: usize,
    /// The mentioned path, up to the first character that cannot be part of it.
    text: String,
}

/// The first mention of `prefix` in the package's files (in path order).
fn find_reference<'f>(files: &'f PackageFiles, prefix: &str) -> Option<Reference<'f>> {
    let needle = prefix.as_bytes();
    files.iter().find_map(|(file, bytes)| {
        let at = bytes.windows(needle.len()).position(|w| w == needle)?;
        let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
        let rest = String::from_utf8_lossy(&bytes[at..bytes.len().min(at + 256)]).into_owned();
        let end = rest
            .find(|c: char| c.is_whitespace() || "`'\"()[]<>,;".contains(c))
            .unwrap_or(rest.len());
        Some(Reference {
            file,
            line,
            text: rest[..end].to_string(),
        })
    })
}

fn unknown_agent(agent: &str, known: &HashSet<&str>) -> Diagnostic {
    let mut ids: Vec<&str> = known.iter().copied().collect();
    ids.sort_unstable();
    Diagnostic::error(
        Code::AgentNotFound,
        format!("agent '{agent}' is not defined in agents.json"),
    )
    .hint(format!("use one of: {}", ids.join(", ")))
}
