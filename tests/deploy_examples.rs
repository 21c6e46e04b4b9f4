//! The deployment examples under examples/deploy/ stay true: the worker command lines they run
//! are accepted by this `baton worker`, the YAML parses into what Kubernetes and KEDA expect,
//! the queue URL they carry is one baton reads, and the scaler's query runs on the queue's
//! schema and counts what it says.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use baton_testkit::pg::postgres_or_skip;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn deploy(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/deploy")
        .join(name)
}

fn yaml_docs(name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(deploy(name)).unwrap();
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap_or_else(|e| panic!("{name}: {e}")))
        .collect()
}

/// `baton <args> --help` parses every argument before it prints help: an unknown flag or a
/// value out of range fails with exit 2.
fn assert_baton_accepts(args: &[String], from: &str) {
    assert_eq!(
        args.first().map(String::as_str),
        Some("worker"),
        "{from}: {args:?}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .arg("--help")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{from}: `baton {}` is refused: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_systemd_unit_runs_a_worker_command_baton_accepts() {
    let unit = std::fs::read_to_string(deploy("baton-worker.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let mut words = exec.split_whitespace();
    assert!(words.next().unwrap().ends_with("/baton"), "{exec}");
    let args: Vec<String> = words.map(str::to_owned).collect();
    assert!(
        args.iter().any(|a| a == "--db-env"),
        "the URL comes from the environment: {exec}"
    );
    assert_baton_accepts(&args, "baton-worker.service");
    // The variable it names is the one the environment file is said to define.
    let env_name = &args[args.iter().position(|a| a == "--db-env").unwrap() + 1];
    assert!(
        unit.contains(&format!("#   {env_name}=postgresql://")),
        "{unit}"
    );
}

#[test]
fn the_kubernetes_deployment_runs_a_worker_command_baton_accepts_with_its_secret() {
    let docs = yaml_docs("worker-deployment.yaml");
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret")
        .expect("a Secret");
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    assert_eq!(deployment["apiVersion"], "apps/v1");
    let spec = &deployment["spec"];
    assert_eq!(
        spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"],
        "the selector must match the pod's labels"
    );
    let container = &spec["template"]["spec"]["containers"][0];
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_baton_accepts(&args, "worker-deployment.yaml");
    let env_name = &args[args.iter().position(|a| a == "--db-env").unwrap() + 1];
    assert_eq!(
        container["envFrom"][0]["secretRef"]["name"],
        secret["metadata"]["name"]
    );
    // The URL the secret holds is one baton reads (and redacts).
    let url = secret["stringData"][env_name.as_str()].as_str().unwrap();
    let config = baton_queue::DbConfig::from_url(url, baton_queue::UrlSource::Flag).unwrap();
    assert!(
        !config.redacted().contains("change-me"),
        "{}",
        config.redacted()
    );
    assert!(secret["stringData"]["OPENAI_API_KEY"].is_string());
}

#[test]
fn the_keda_scaler_targets_the_deployment_and_its_query_counts_the_backlog() {
    let scaled = &yaml_docs("keda-scaledobject.yaml")[0];
    let deployment = yaml_docs("worker-deployment.yaml")
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    assert_eq!(scaled["kind"], "ScaledObject");
    assert_eq!(
        scaled["spec"]["scaleTargetRef"]["name"],
        deployment["metadata"]["name"]
    );
    let trigger = &scaled["spec"]["triggers"][0];
    assert_eq!(trigger["type"], "postgresql");
    let env_name = trigger["metadata"]["connectionFromEnv"].as_str().unwrap();
    let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(
        args.contains(env_name),
        "{env_name} is not the worker's --db-env: {args}"
    );
    let query = trigger["metadata"]["query"].as_str().unwrap().to_string();

    let Some(pg) = postgres_or_skip("the_keda_scaler_targets_the_deployment") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["queue", "init", "--db", &pg.socket_url("postgres")])
        .env("BATON_HOME", tmp.path().join("home"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Two ready, one leased, one waiting for a person, one done, one due later.
    pg.psql(
        "postgres",
        "INSERT INTO baton.work_units (kind, queue, state, project_remote, base_commit, owner, lease_expires_at, ready_at) VALUES
           ('run', 'default', 'queued', 'r', 'c', NULL, NULL, now()),
           ('run', 'default', 'queued', 'r', 'c', NULL, NULL, now()),
           ('run', 'default', 'leased', 'r', 'c', 'w', now() + interval '30 seconds', now()),
           ('run', 'default', 'waiting', 'r', 'c', NULL, NULL, now()),
           ('run', 'default', 'done', 'r', 'c', NULL, NULL, now()),
           ('run', 'default', 'queued', 'r', 'c', NULL, NULL, now() + interval '1 hour')",
    )
    .unwrap();
    let count = pg.psql("postgres", &query).unwrap();
    assert_eq!(count.trim(), "3", "the scaler's query counted {count:?}");
}
