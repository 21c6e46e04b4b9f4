//! One defect per package, each reported with its code and location, never a panic.
//!
//! Every case copies a valid example package into a temp directory, breaks exactly one thing,
//! and checks the errors baton reports: their codes, files, pointers and lines.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::{Code, Diagnostic, Report, ValidateOptions, validate_path};
use baton_testkit::{copy_dir, example};
use std::fs;
use std::path::{Path, PathBuf};

struct Broken {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Broken {
    fn from(name: &str) -> Broken {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join(name);
        copy_dir(&example(name), &root);
        Broken { _tmp: tmp, root }
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel)).unwrap()
    }

    fn write(&self, rel: &str, text: &str) -> &Self {
        fs::write(self.root.join(rel), text).unwrap();
        self
    }

    /// Replaces exactly one occurrence of `from` in `rel`.
    fn replace(&self, rel: &str, from: &str, to: &str) -> &Self {
        let text = self.read(rel);
        assert_eq!(
            text.matches(from).count(),
            1,
            "{from:?} must occur once in {rel}"
        );
        self.write(rel, &text.replacen(from, to, 1))
    }

    fn remove(&self, rel: &str) -> &Self {
        fs::remove_file(self.root.join(rel)).unwrap();
        self
    }

    fn validate(&self) -> Report {
        validate_path(&self.root, &ValidateOptions::default())
    }

    /// 1-based line of the first line containing `needle` in `rel`.
    fn line_of(&self, rel: &str, needle: &str) -> u32 {
        let text = self.read(rel);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        text.lines()
            .position(|l| l.contains(needle))
            .map(|i| i as u32 + 1)
            .unwrap_or_else(|| panic!("{needle:?} not in {rel}"))
    }
}

/// Asserts the set of error codes and returns the error with `code`.
fn expect_errors(report: &Report, codes: &[Code], code: Code) -> Diagnostic {
    let mut got: Vec<Code> = report.diagnostics.errors().map(|d| d.code).collect();
    got.sort();
    got.dedup();
    let mut want = codes.to_vec();
    want.sort();
    assert_eq!(got, want, "diagnostics: {:#?}", report.diagnostics.all());
    assert!(report.package.is_none());
    report
        .diagnostics
        .errors()
        .find(|d| d.code == code)
        .cloned()
        .unwrap()
}

fn expect_one(report: &Report, code: Code) -> Diagnostic {
    expect_errors(report, &[code], code)
}

fn located(d: &Diagnostic, file: &str, pointer: Option<&str>, line: Option<u32>) {
    assert_eq!(d.file.as_deref(), Some(file), "{d:?}");
    if let Some(p) = pointer {
        assert_eq!(d.pointer.as_deref(), Some(p), "{d:?}");
    }
    if let Some(l) = line {
        assert_eq!(d.line, Some(l), "{d:?}");
    }
    assert!(
        d.hint.as_deref().is_some_and(|h| !h.is_empty()),
        "every error has a hint: {d:?}"
    );
}

const CS: &str = "create-story-micro";
const GRAPH: &str = "workflow.graph.json";

#[test]
fn examples_are_valid() {
    for name in [CS, "bug-triage", "docs-kit"] {
        let report = validate_path(&example(name), &ValidateOptions::default());
        assert!(report.ok(), "{name}: {:#?}", report.diagnostics.all());
        assert_eq!(
            report.diagnostics.all(),
            &[],
            "{name} has no warnings either"
        );
    }
}

#[test]
fn manifest_unknown_key() {
    let b = Broken::from(CS);
    b.replace(
        "bmad.json",
        "\"author\"",
        "\"authors\": [\"x\"],\n  \"author\"",
    );
    let d = expect_one(&b.validate(), Code::ManifestInvalid);
    located(&d, "bmad.json", Some(""), Some(1));
    assert!(d.hint.unwrap().contains("'authors'"));
}

#[test]
fn manifest_bad_version() {
    let b = Broken::from(CS);
    b.replace(
        "bmad.json",
        "\"version\": \"1.0.0\"",
        "\"version\": \"1.0\"",
    );
    let d = expect_one(&b.validate(), Code::ManifestInvalid);
    located(
        &d,
        "bmad.json",
        Some("/version"),
        Some(b.line_of("bmad.json", "\"version\"")),
    );
}

#[test]
fn manifest_invalid_json() {
    let b = Broken::from(CS);
    b.replace(
        "bmad.json",
        "\"assetsDir\": \"assets/\"",
        "\"assetsDir\": \"assets/\",",
    );
    let d = expect_one(&b.validate(), Code::ManifestInvalid);
    located(
        &d,
        "bmad.json",
        None,
        Some(b.line_of("bmad.json", "\"assetsDir\"") + 1),
    );
}

#[test]
fn manifest_missing() {
    let b = Broken::from(CS);
    b.remove("bmad.json");
    let d = expect_one(&b.validate(), Code::ManifestNotFound);
    located(&d, "bmad.json", None, None);
}

#[test]
fn classic_workflow_is_refused() {
    let b = Broken::from(CS);
    b.remove("bmad.json");
    b.write(
        "workflow.yaml",
        "name: create-story\ninstructions: instructions.xml\n",
    );
    b.write("instructions.xml", "<workflow></workflow>\n");
    let d = expect_one(&b.validate(), Code::NotSupportedClassicWorkflow);
    assert!(
        d.file
            .as_deref()
            .is_some_and(|f| f == "instructions.xml" || f == "workflow.yaml")
    );
}

#[test]
fn graph_schema_violation() {
    let b = Broken::from(CS);
    b.replace(GRAPH, "\"type\": \"end\"", "\"type\": \"finish\"");
    let d = expect_one(&b.validate(), Code::GraphSchemaInvalid);
    located(
        &d,
        GRAPH,
        Some("/nodes/5/type"),
        Some(b.line_of(GRAPH, "\"finish\"")),
    );
}

#[test]
fn graph_invalid_json() {
    let b = Broken::from(CS);
    b.replace(
        GRAPH,
        "\"entryNodeId\": \"step-01-select-story\",",
        "\"entryNodeId\": \"step-01-select-story\"",
    );
    let d = expect_one(&b.validate(), Code::GraphJsonInvalid);
    located(&d, GRAPH, None, Some(b.line_of(GRAPH, "\"nodes\"")));
}

#[test]
fn edge_to_unknown_node() {
    let b = Broken::from(CS);
    b.replace(GRAPH, "\"to\": \"end-99\"", "\"to\": \"end-100\"");
    let report = b.validate();
    // The end node is now unreachable and step-05 still has its edge: only the dangling
    // reference and its consequence for reachability are errors.
    let d = expect_errors(
        &report,
        &[Code::GraphIntegrityInvalid, Code::GraphEndUnreachable],
        Code::GraphIntegrityInvalid,
    );
    located(
        &d,
        GRAPH,
        Some("/edges/4/to"),
        Some(b.line_of(GRAPH, "end-100")),
    );
}

#[test]
fn entry_node_unknown() {
    let b = Broken::from(CS);
    b.replace(
        GRAPH,
        "\"entryNodeId\": \"step-01-select-story\"",
        "\"entryNodeId\": \"step-00\"",
    );
    let d = expect_one(&b.validate(), Code::GraphIntegrityInvalid);
    located(
        &d,
        GRAPH,
        Some("/entryNodeId"),
        Some(b.line_of(GRAPH, "step-00")),
    );
}

#[test]
fn duplicate_node_id() {
    let b = Broken::from(CS);
    b.replace(
        GRAPH,
        "  ],\n  \"edges\"",
        ",\n    { \"id\": \"end-99\", \"type\": \"end\", \"file\": \"steps/end-99.md\" }\n  ],\n  \"edges\"",
    );
    let d = expect_one(&b.validate(), Code::GraphIntegrityInvalid);
    located(&d, GRAPH, Some("/nodes/6/id"), None);
}

#[test]
fn unreachable_end() {
    let b = Broken::from(CS);
    b.replace(
        GRAPH,
        ",\n    { \"from\": \"step-05-update-sprint-status\", \"to\": \"end-99\", \"label\": \"next\" }",
        "",
    );
    let report = b.validate();
    let d = expect_errors(
        &report,
        &[Code::GraphEndUnreachable, Code::GraphDeadEnd],
        Code::GraphEndUnreachable,
    );
    located(&d, GRAPH, Some("/nodes"), None);
    let dead = report
        .diagnostics
        .errors()
        .find(|d| d.code == Code::GraphDeadEnd)
        .unwrap();
    assert_eq!(dead.pointer.as_deref(), Some("/nodes/4"));
}

#[test]
fn decision_without_default() {
    let b = Broken::from("bug-triage");
    b.replace(GRAPH, "\"isDefault\": true,", "");
    let d = expect_one(&b.validate(), Code::GraphDecisionInvalid);
    located(&d, GRAPH, Some("/nodes/1"), None);
    assert!(d.message.contains("0 default"));
}

#[test]
fn decision_with_a_single_branch() {
    let b = Broken::from("bug-triage");
    let graph = b.read(GRAPH);
    let mut doc: serde_json::Value = serde_json::from_str(&graph).unwrap();
    let edges = doc["edges"].as_array_mut().unwrap();
    edges.retain(|e| !(e["from"] == "decide-02-severity" && e["isDefault"] != true));
    b.write(GRAPH, &serde_json::to_string_pretty(&doc).unwrap());
    let d = expect_one(&b.validate(), Code::GraphDecisionInvalid);
    assert!(d.message.contains("1 outgoing edge"));
}

#[test]
fn cycle_without_decision() {
    let b = Broken::from(CS);
    b.replace(
        GRAPH,
        "\"label\": \"next\" },\n    { \"from\": \"step-03-extract-context\"",
        "\"label\": \"next\" },\n    { \"from\": \"step-03-extract-context\", \"to\": \"step-02-discover-inputs\", \"label\": \"again\" },\n    { \"from\": \"step-03-extract-context\"",
    );
    let d = expect_one(&b.validate(), Code::GraphCycleInvalid);
    assert!(d.message.contains("no decision"), "{d:?}");
    assert!(
        d.message.contains("step-02-discover-inputs")
            && d.message.contains("step-03-extract-context")
    );
}

#[test]
fn cycle_without_exit() {
    let b = Broken::from("bug-triage");
    let mut doc: serde_json::Value = serde_json::from_str(&b.read(GRAPH)).unwrap();
    for edge in doc["edges"].as_array_mut().unwrap() {
        if edge["from"] == "decide-02-severity" {
            edge["to"] = "step-01-collect-facts".into();
        }
    }
    b.write(GRAPH, &serde_json::to_string_pretty(&doc).unwrap());
    let report = b.validate();
    let d = expect_errors(
        &report,
        &[Code::GraphCycleInvalid, Code::GraphEndUnreachable],
        Code::GraphCycleInvalid,
    );
    assert!(d.message.contains("no edge leaving"), "{d:?}");
}

#[test]
fn step_file_missing() {
    let b = Broken::from(CS);
    b.remove("steps/step-03-extract-context.md");
    let d = expect_one(&b.validate(), Code::StepFileNotFound);
    located(
        &d,
        GRAPH,
        Some("/nodes/2/file"),
        Some(b.line_of(GRAPH, "steps/step-03-extract-context.md")),
    );
}

#[test]
fn step_path_escapes_the_package() {
    let b = Broken::from(CS);
    b.replace(
        GRAPH,
        "\"file\": \"steps/end-99.md\"",
        "\"file\": \"../outside/end-99.md\"",
    );
    let d = expect_one(&b.validate(), Code::PackagePathUnsafe);
    located(
        &d,
        GRAPH,
        Some("/nodes/5/file"),
        Some(b.line_of(GRAPH, "../outside")),
    );
}

#[test]
fn step_without_frontmatter() {
    let b = Broken::from(CS);
    let text = b.read("steps/step-02-discover-inputs.md");
    let body = text.splitn(3, "---\n").nth(2).unwrap();
    b.write("steps/step-02-discover-inputs.md", body);
    let d = expect_one(&b.validate(), Code::StepMissingFrontmatter);
    located(&d, "steps/step-02-discover-inputs.md", None, Some(1));
}

#[test]
fn step_frontmatter_after_a_blank_line() {
    let b = Broken::from(CS);
    let text = b.read("steps/step-02-discover-inputs.md");
    b.write("steps/step-02-discover-inputs.md", &format!("\n{text}"));
    let d = expect_one(&b.validate(), Code::StepMissingFrontmatter);
    assert!(d.hint.unwrap().contains("blank lines"));
}

#[test]
fn step_invalid_yaml() {
    let b = Broken::from(CS);
    b.replace(
        "steps/step-03-extract-context.md",
        "title: \"Extract the story context\"",
        "title: \"Extract the story context",
    );
    let d = expect_one(&b.validate(), Code::StepInvalidFrontmatter);
    assert_eq!(d.file.as_deref(), Some("steps/step-03-extract-context.md"));
    let line = d.line.expect("a YAML error has a line");
    assert!((2..=25).contains(&line), "{d:?}");
}

#[test]
fn step_schema_violation() {
    let b = Broken::from(CS);
    b.replace("steps/step-04-generate-story.md", "type: \"step\"\n", "");
    let d = expect_one(&b.validate(), Code::StepInvalidFrontmatter);
    assert!(d.message.contains("type"), "{d:?}");
    located(&d, "steps/step-04-generate-story.md", Some(""), Some(1));
}

#[test]
fn step_schema_version_unquoted() {
    let b = Broken::from(CS);
    b.replace(
        "steps/step-04-generate-story.md",
        "schemaVersion: \"1.1\"",
        "schemaVersion: 1.1",
    );
    let d = expect_one(&b.validate(), Code::StepInvalidFrontmatter);
    located(
        &d,
        "steps/step-04-generate-story.md",
        Some("/schemaVersion"),
        Some(2),
    );
    assert!(d.hint.unwrap().contains("quote"));
}

#[test]
fn step_node_id_mismatch() {
    let b = Broken::from(CS);
    b.replace(
        "steps/step-05-update-sprint-status.md",
        "nodeId: \"step-05-update-sprint-status\"",
        "nodeId: \"step-05\"",
    );
    let d = expect_one(&b.validate(), Code::StepNodeIdMismatch);
    located(
        &d,
        "steps/step-05-update-sprint-status.md",
        Some("/nodeId"),
        Some(3),
    );
}

#[test]
fn step_type_mismatch() {
    let b = Broken::from(CS);
    b.replace("steps/end-99.md", "type: \"end\"", "type: \"step\"");
    let d = expect_one(&b.validate(), Code::StepTypeMismatch);
    located(&d, "steps/end-99.md", Some("/type"), Some(4));
}

#[test]
fn step_missing_goal_and_instructions() {
    let b = Broken::from(CS);
    b.replace("steps/step-02-discover-inputs.md", "## Goal", "## Aim");
    let d = expect_one(&b.validate(), Code::StepMissingGoal);
    located(&d, "steps/step-02-discover-inputs.md", None, None);
    let b = Broken::from(CS);
    b.replace(
        "steps/step-02-discover-inputs.md",
        "## Instructions",
        "Instructions:",
    );
    expect_one(&b.validate(), Code::StepMissingInstructions);
}

#[test]
fn empty_section_is_a_warning() {
    let b = Broken::from(CS);
    let text = b.read("steps/end-99.md");
    let start = text.find("## Completion").unwrap();
    b.write(
        "steps/end-99.md",
        &format!("{}## Completion\n", &text[..start]),
    );
    let report = b.validate();
    assert!(report.ok());
    let w: Vec<_> = report.diagnostics.warnings().collect();
    assert_eq!(w.len(), 0, "Completion is optional and may be empty: {w:?}");
    b.replace("steps/end-99.md", "Close the workflow with a short summary of what was produced and what the team should do next.", "");
    let report = b.validate();
    assert!(report.ok());
    let w: Vec<_> = report.diagnostics.warnings().collect();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].code, Code::StepEmptySection);
    assert_eq!(w[0].line, Some(b.line_of("steps/end-99.md", "## Goal")));
}

#[test]
fn unknown_agent() {
    let b = Broken::from(CS);
    b.replace(
        GRAPH,
        "\"agentId\": \"summarizer\"",
        "\"agentId\": \"ghost\"",
    );
    let d = expect_one(&b.validate(), Code::AgentNotFound);
    located(
        &d,
        GRAPH,
        Some("/nodes/5/agentId"),
        Some(b.line_of(GRAPH, "ghost")),
    );
    assert!(d.hint.unwrap().contains("sm, summarizer"));
}

#[test]
fn unknown_agent_in_step() {
    let b = Broken::from(CS);
    b.replace(
        "steps/end-99.md",
        "agentId: \"summarizer\"",
        "agentId: \"ghost\"",
    );
    let d = expect_one(&b.validate(), Code::AgentNotFound);
    located(&d, "steps/end-99.md", Some("/agentId"), Some(6));
}

#[test]
fn duplicate_agent_ids() {
    let b = Broken::from(CS);
    b.replace("agents.json", "\"id\": \"summarizer\"", "\"id\": \"sm\"");
    let report = b.validate();
    let d = expect_errors(
        &report,
        &[Code::AgentDuplicateId, Code::AgentNotFound],
        Code::AgentDuplicateId,
    );
    let second = b
        .read("agents.json")
        .lines()
        .collect::<Vec<_>>()
        .iter()
        .rposition(|l| l.contains("\"id\": \"sm\""))
        .unwrap() as u32
        + 1;
    located(&d, "agents.json", Some("/agents/1/id"), Some(second));
}

#[test]
fn agents_schema_violation() {
    let b = Broken::from(CS);
    b.replace("agents.json", "\"title\": \"Summarizer\",", "");
    let d = expect_one(&b.validate(), Code::AgentsInvalid);
    located(&d, "agents.json", Some("/agents/1/metadata"), None);
}

#[test]
fn agents_file_missing() {
    let b = Broken::from(CS);
    b.remove("agents.json");
    let d = expect_one(&b.validate(), Code::AgentsFileNotFound);
    assert_eq!(d.pointer.as_deref(), Some("/entry/agents"));
}

#[test]
fn terminal_tool_policy_is_understood() {
    let b = Broken::from(CS);
    b.replace("agents.json", "\"mcp\": { \"enabled\": false, \"allowedServers\": [] }\n      }\n    },\n    {", "\"mcp\": { \"enabled\": false, \"allowedServers\": [] },\n        \"terminal\": { \"enabled\": true, \"allowedCommands\": [\"python3\"], \"timeoutMs\": 1000, \"network\": false }\n      }\n    },\n    {");
    let report = b.validate();
    assert!(report.ok(), "{:#?}", report.diagnostics.all());
    assert_eq!(
        report.diagnostics.warnings().count(),
        0,
        "no warning: the key is understood"
    );
    let package = report.package.expect("package");
    let terminal = package.agents()[0]
        .tools
        .as_ref()
        .and_then(|t| t.terminal.clone())
        .expect("terminal policy");
    assert!(terminal.enabled);
    assert_eq!(terminal.allowed_commands, Some(vec!["python3".to_string()]));
    assert_eq!(terminal.timeout_ms, Some(1000));
    assert_eq!(terminal.network, Some(false));
}

#[test]
fn terminal_tool_policy_with_an_unknown_key_is_an_error() {
    let b = Broken::from(CS);
    b.replace("agents.json", "\"mcp\": { \"enabled\": false, \"allowedServers\": [] }\n      }\n    },\n    {", "\"mcp\": { \"enabled\": false, \"allowedServers\": [] },\n        \"terminal\": { \"enabled\": true, \"sudo\": true }\n      }\n    },\n    {");
    let d = expect_one(&b.validate(), Code::AgentsInvalid);
    assert!(
        d.pointer
            .as_deref()
            .is_some_and(|p| p.starts_with("/agents/0/tools/terminal")),
        "{d:?}"
    );
}

#[test]
fn workflow_md_missing() {
    let b = Broken::from(CS);
    b.remove("workflow.md");
    let d = expect_one(&b.validate(), Code::WorkflowFileNotFound);
    located(
        &d,
        "bmad.json",
        Some("/entry/workflow"),
        Some(b.line_of("bmad.json", "\"workflow\"")),
    );
}

#[test]
fn workflow_md_schema_violation() {
    let b = Broken::from(CS);
    b.replace("workflow.md", "stepsCompleted: []", "stepsCompleted: {}");
    let d = expect_one(&b.validate(), Code::WorkflowFrontmatterInvalid);
    located(
        &d,
        "workflow.md",
        Some("/stepsCompleted"),
        Some(b.line_of("workflow.md", "stepsCompleted")),
    );
}

#[test]
fn workflow_md_current_node_unknown() {
    let b = Broken::from(CS);
    b.replace(
        "workflow.md",
        "currentNodeId: \"step-01-select-story\"",
        "currentNodeId: \"step-1\"",
    );
    let d = expect_one(&b.validate(), Code::WorkflowFrontmatterInvalid);
    located(
        &d,
        "workflow.md",
        Some("/currentNodeId"),
        Some(b.line_of("workflow.md", "currentNodeId")),
    );
}

#[test]
fn duplicate_workflow_ids() {
    let b = Broken::from("docs-kit");
    b.replace(
        "bmad.json",
        "\"id\": \"write-adr\"",
        "\"id\": \"write-readme\"",
    );
    let d = expect_one(&b.validate(), Code::WorkflowDuplicateId);
    located(
        &d,
        "bmad.json",
        Some("/workflows/1/id"),
        Some(b.line_of("bmad.json", "\"displayName\": \"Write an ADR\"") - 1),
    );
}

#[test]
fn multi_workflow_node_file_relative_to_workflow_dir_gets_a_hint() {
    let b = Broken::from("docs-kit");
    let graph = "workflows/write-adr/workflow.graph.json";
    b.replace(
        graph,
        "\"file\": \"workflows/write-adr/steps/step-01-frame.md\"",
        "\"file\": \"steps/step-01-frame.md\"",
    );
    let d = expect_one(&b.validate(), Code::StepFileNotFound);
    assert_eq!(d.file.as_deref(), Some(graph));
    assert!(
        d.hint
            .unwrap()
            .contains("workflows/write-adr/steps/step-01-frame.md")
    );
}

#[test]
fn workflow_ref_rules() {
    let multi = example("docs-kit");
    let pick = |path: &Path, w: &str| {
        validate_path(
            path,
            &ValidateOptions {
                workflow: Some(w.into()),
                ..Default::default()
            },
        )
    };
    let report = pick(&multi, "write-adr");
    assert!(report.ok());
    assert_eq!(
        report.package.unwrap().workflows().len(),
        1,
        "only the selected workflow is loaded"
    );
    expect_one(&pick(&multi, "write-novel"), Code::WorkflowRefUnknown);
    expect_one(&pick(&example(CS), "other"), Code::WorkflowRefMismatch);
    assert!(pick(&example(CS), CS).ok());
    let package = baton_package::Package::load(&multi).unwrap();
    assert_eq!(
        package.resolve_workflow(None).unwrap_err().code,
        Code::WorkflowRefRequired
    );
    assert_eq!(
        package
            .resolve_workflow(Some("write-readme"))
            .unwrap()
            .graph_file,
        "workflows/write-readme/workflow.graph.json"
    );
}

#[test]
fn integrity_mismatch() {
    let b = Broken::from(CS);
    b.replace(
        "bmad.json",
        "\"entry\": {",
        &format!(
            "\"integrity\": {{ \"sha256\": \"{}\" }},\n  \"entry\": {{",
            "0".repeat(64)
        ),
    );
    let d = expect_one(&b.validate(), Code::IntegrityMismatch);
    located(
        &d,
        "bmad.json",
        Some("/integrity/sha256"),
        Some(b.line_of("bmad.json", "\"integrity\"")),
    );
}

#[test]
fn non_utf8_step_file() {
    let b = Broken::from(CS);
    let mut bytes = fs::read(b.root.join("steps/step-01-select-story.md")).unwrap();
    bytes.extend_from_slice(b"\nbad byte: \xff\n");
    fs::write(b.root.join("steps/step-01-select-story.md"), bytes).unwrap();
    let d = expect_one(&b.validate(), Code::FileNotUtf8);
    assert_eq!(d.file.as_deref(), Some("steps/step-01-select-story.md"));
    assert!(d.line.is_some());
}

#[test]
fn bom_and_crlf_are_accepted() {
    let b = Broken::from(CS);
    for rel in [
        "bmad.json",
        "agents.json",
        GRAPH,
        "workflow.md",
        "steps/step-01-select-story.md",
        "steps/end-99.md",
    ] {
        let text = b.read(rel).replace('\n', "\r\n");
        b.write(rel, &format!("\u{feff}{text}"));
    }
    let report = b.validate();
    assert!(report.ok(), "{:#?}", report.diagnostics.all());
    let pkg = report.package.unwrap();
    let step = &pkg.workflows()[0].steps["step-01-select-story"];
    assert!(step.goal.starts_with("Decide which story"));
    // Line numbers still count correctly with CRLF.
    b.replace(
        "steps/end-99.md",
        "nodeId: \"end-99\"",
        "nodeId: \"end-98\"",
    );
    let d = expect_one(&b.validate(), Code::StepNodeIdMismatch);
    assert_eq!(d.line, Some(3));
}

#[test]
fn symlink_out_of_a_directory_package() {
    let b = Broken::from(CS);
    let outside = b.root.parent().unwrap().join("secret.md");
    fs::write(&outside, "secret").unwrap();
    std::os::unix::fs::symlink(&outside, b.root.join("assets/leak.md")).unwrap();
    let d = expect_one(&b.validate(), Code::PackageUnsafeSymlink);
    assert_eq!(d.file.as_deref(), Some("assets/leak.md"));
    // A link that stays inside the package is just another name for the file.
    fs::remove_file(b.root.join("assets/leak.md")).unwrap();
    std::os::unix::fs::symlink(
        b.root.join("assets/story-template.md"),
        b.root.join("assets/alias.md"),
    )
    .unwrap();
    assert!(b.validate().ok());
}

#[test]
fn all_problems_are_reported_in_one_pass() {
    let b = Broken::from(CS);
    b.replace(
        "bmad.json",
        "\"version\": \"1.0.0\"",
        "\"version\": \"one\"",
    );
    b.replace(
        GRAPH,
        "\"agentId\": \"summarizer\"",
        "\"agentId\": \"ghost\"",
    );
    b.replace(
        "steps/step-05-update-sprint-status.md",
        "nodeId: \"step-05-update-sprint-status\"",
        "nodeId: \"step-05\"",
    );
    b.remove("steps/step-02-discover-inputs.md");
    let report = b.validate();
    let mut codes: Vec<Code> = report.diagnostics.errors().map(|d| d.code).collect();
    codes.sort();
    assert_eq!(
        codes,
        vec![
            Code::ManifestInvalid,
            Code::StepFileNotFound,
            Code::StepNodeIdMismatch,
            Code::AgentNotFound
        ]
    );
}

#[test]
fn missing_package_path() {
    let report = validate_path(
        Path::new("/definitely/not/here"),
        &ValidateOptions::default(),
    );
    assert_eq!(
        report.diagnostics.errors().next().unwrap().code,
        Code::PackageNotFound
    );
}

#[test]
fn every_code_is_documented() {
    let docs =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/packages.md"))
            .unwrap();
    for code in Code::ALL {
        assert!(
            docs.contains(&format!("| `{}` |", code.as_str())),
            "{code} is missing from docs/packages.md"
        );
    }
}

/// docs-kit with one field of `entry` (not of `workflows[]`) set to `value`.
fn docs_kit_entry(field: &str, value: &str) -> Broken {
    let b = Broken::from("docs-kit");
    let old = match field {
        "workflow" => "\"workflow\": \"workflows/write-readme/workflow.md\",\n    \"graph\"",
        "graph" => "\"graph\": \"workflows/write-readme/workflow.graph.json\",\n    \"agents\"",
        other => panic!("no entry field {other}"),
    };
    let next = old.rsplit(' ').next().unwrap();
    b.replace(
        "bmad.json",
        old,
        &format!("\"{field}\": \"{value}\",\n    {next}"),
    );
    b
}

#[test]
fn entry_paths_are_checked_when_workflows_are_listed() {
    for (field, value, code) in [
        ("workflow", "../../etc/passwd", Code::PackagePathUnsafe),
        ("workflow", "/etc/passwd", Code::PackagePathUnsafe),
        (
            "workflow",
            "workflows/nope/workflow.md",
            Code::WorkflowFileNotFound,
        ),
        ("graph", "../graph.json", Code::PackagePathUnsafe),
        ("graph", "/etc/graph.json", Code::PackagePathUnsafe),
        (
            "graph",
            "workflows/nope/workflow.graph.json",
            Code::GraphFileNotFound,
        ),
    ] {
        let b = docs_kit_entry(field, value);
        let d = expect_one(&b.validate(), code);
        located(
            &d,
            "bmad.json",
            Some(&format!("/entry/{field}")),
            Some(b.line_of("bmad.json", value)),
        );
        assert!(d.message.contains(value), "{d:?}");
    }
}

#[test]
fn unsafe_agents_path_is_reported() {
    for value in ["../agents.json", "/etc/passwd"] {
        let b = Broken::from(CS);
        b.replace(
            "bmad.json",
            "\"agents\": \"agents.json\"",
            &format!("\"agents\": \"{value}\""),
        );
        let d = expect_one(&b.validate(), Code::PackagePathUnsafe);
        located(
            &d,
            "bmad.json",
            Some("/entry/agents"),
            Some(b.line_of("bmad.json", value)),
        );
    }
    let b = Broken::from(CS);
    b.remove("agents.json");
    let d = expect_one(&b.validate(), Code::AgentsFileNotFound);
    located(
        &d,
        "bmad.json",
        Some("/entry/agents"),
        Some(b.line_of("bmad.json", "\"agents\"")),
    );
}

#[test]
fn a_single_listed_workflow_needs_no_ref() {
    // Every CrewAgent Builder export lists its one workflow in workflows[].
    let b = Broken::from("docs-kit");
    let mut doc: serde_json::Value = serde_json::from_str(&b.read("bmad.json")).unwrap();
    doc["workflows"].as_array_mut().unwrap().truncate(1);
    b.write("bmad.json", &serde_json::to_string_pretty(&doc).unwrap());
    let report = b.validate();
    assert!(report.ok(), "{:#?}", report.diagnostics.all());
    let package = report.package.unwrap();
    assert_eq!(package.resolve_workflow(None).unwrap().id, "write-readme");
    assert_eq!(
        package.resolve_workflow(Some("")).unwrap().id,
        "write-readme"
    );
    assert_eq!(
        package
            .resolve_workflow(Some("write-adr"))
            .unwrap_err()
            .code,
        Code::WorkflowRefUnknown
    );
    let only = |w: &str| {
        validate_path(
            &b.root,
            &ValidateOptions {
                workflow: Some(w.into()),
                ..Default::default()
            },
        )
    };
    assert!(only("write-readme").ok());
    expect_one(&only("write-adr"), Code::WorkflowRefUnknown);
}

#[test]
fn several_workflows_without_a_ref_are_listed() {
    let package = baton_package::Package::load(&example("docs-kit")).unwrap();
    let d = package.resolve_workflow(None).unwrap_err();
    assert_eq!(d.code, Code::WorkflowRefRequired);
    assert!(
        d.message
            .contains("has 2 workflows: write-readme, write-adr; choose one with --workflow"),
        "{d:?}"
    );
}

#[test]
fn missing_assets_dir_warns_only_when_assets_are_referenced() {
    // bug-triage names assets/ but no file reads @pkg/assets/...: nothing to warn about.
    let b = Broken::from("bug-triage");
    fs::remove_dir_all(b.root.join("assets")).unwrap();
    let report = b.validate();
    assert!(report.ok(), "{:#?}", report.diagnostics.all());
    assert_eq!(report.diagnostics.all(), &[]);

    // create-story-micro's step 4 reads @pkg/assets/story-template.md.
    let b = Broken::from(CS);
    fs::remove_dir_all(b.root.join("assets")).unwrap();
    let report = b.validate();
    assert!(report.ok(), "{:#?}", report.diagnostics.all());
    let w: Vec<_> = report.diagnostics.warnings().collect();
    assert_eq!(w.len(), 1, "{w:#?}");
    assert_eq!(w[0].code, Code::AssetsDirNotFound);
    located(
        w[0],
        "bmad.json",
        Some("/entry/assetsDir"),
        Some(b.line_of("bmad.json", "\"assetsDir\"")),
    );
    assert!(
        w[0].message.contains("steps/step-04-generate-story.md")
            && w[0].message.contains("@pkg/assets/story-template.md"),
        "{:?}",
        w[0]
    );
}
