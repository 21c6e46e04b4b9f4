//! The runs index is a view of the run directories: damage or loss of it loses no run, damage
//! stays inside one project, the garbage collector never removes a run, long texts are cut, and
//! the index is written only when a run is created or changes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::Package;
use baton_store::{InstalledPackage, NewRun, Phase, Project, RunError, RunMetadata, Store};
use baton_testkit::example;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

struct Fixture {
    tmp: tempfile::TempDir,
    store: Store,
    package: Package,
    installed: InstalledPackage,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::new(tmp.path().join("home"));
    let package = Package::load(&example("create-story-micro")).unwrap();
    let installed = store.packages().install(&package, "test").unwrap().package;
    Fixture {
        tmp,
        store,
        package,
        installed,
    }
}

impl Fixture {
    fn project(&self, name: &str) -> Project {
        let root = self.tmp.path().join(name);
        fs::create_dir_all(&root).unwrap();
        self.store.project(&root).unwrap()
    }

    fn create(&self, project: &Project) -> RunMetadata {
        project
            .create_run(NewRun {
                package: &self.package,
                installed: &self.installed,
                workflow_ref: None,
                agent_id: "sm",
            })
            .unwrap()
    }

    /// `n` runs, each moved along a little so their metadata differ.
    fn runs(&self, project: &Project, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let run = self.create(project);
                match i % 3 {
                    0 => {}
                    1 => {
                        project
                            .set_phase(&run.run_id, Phase::Running, None)
                            .unwrap();
                    }
                    _ => {
                        project
                            .update_run(&run.run_id, |r| {
                                r.phase = Phase::WaitingUser;
                                r.current_node_id = Some("step-02-discover-inputs".into());
                                r.waiting_for = Some(json!({"question": format!("question {i}?")}));
                            })
                            .unwrap();
                    }
                }
                run.run_id
            })
            .collect()
    }
}

fn index_file(project: &Project) -> PathBuf {
    project.dir.join("runsIndex.json")
}

fn journal_file(project: &Project) -> PathBuf {
    project.dir.join("runsIndex.journal.jsonl")
}

fn ids(runs: &[RunMetadata]) -> HashSet<String> {
    runs.iter().map(|r| r.run_id.clone()).collect()
}

fn run_dirs(project: &Project) -> HashSet<String> {
    fs::read_dir(project.dir.join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Makes a file or directory look `age` old (the garbage collector's threshold is by age).
fn age(path: &Path, age: Duration) {
    let then = SystemTime::now() - age;
    File::open(path).unwrap().set_modified(then).unwrap();
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn a_damaged_index_is_rebuilt_and_every_run_listed() {
    let f = fixture();
    let project = f.project("a");
    f.runs(&project, 6);
    let before = project.list_runs().unwrap();
    fs::write(index_file(&project), "[{\"runId\": ").unwrap();

    let listing = project.runs(None).unwrap();
    assert_eq!(listing.runs, before, "same runs, same metadata, same order");
    assert_eq!(listing.warnings.len(), 1, "{:?}", listing.warnings);
    assert_eq!(listing.warnings[0].code, "RUNS_INDEX_REBUILT");
    assert!(
        listing.warnings[0].message.contains("damaged"),
        "{}",
        listing.warnings[0]
    );
    // The index is whole again, and the damaged file was kept, not deleted.
    let again = project.runs(None).unwrap();
    assert!(again.warnings.is_empty());
    assert_eq!(again.runs, before);
    let rebuilt: Vec<RunMetadata> =
        serde_json::from_slice(&fs::read(index_file(&project)).unwrap()).unwrap();
    assert_eq!(ids(&rebuilt), ids(&before));
    let kept: Vec<String> = fs::read_dir(&project.dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("runsIndex.json.damaged-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    // Updates work again.
    project
        .set_phase(&before[0].run_id, Phase::Completed, None)
        .unwrap();
}

#[test]
fn a_damaged_journal_is_rebuilt_too() {
    let f = fixture();
    let project = f.project("a");
    f.runs(&project, 3);
    let before = project.list_runs().unwrap();
    let mut journal = fs::read(journal_file(&project)).unwrap();
    journal.splice(0..0, b"garbage\n".iter().copied());
    fs::write(journal_file(&project), journal).unwrap();
    let listing = project.runs(Some(50)).unwrap();
    assert_eq!(listing.runs, before);
    assert_eq!(listing.warnings[0].code, "RUNS_INDEX_REBUILT");
}

#[test]
fn a_removed_index_is_rebuilt_and_the_next_creation_deletes_nothing() {
    let f = fixture();
    let project = f.project("a");
    let old = f.runs(&project, 4);
    let before = project.list_runs().unwrap();
    // What the old hint said to do with a damaged index: move it away.
    for file in [index_file(&project), journal_file(&project)] {
        let _ = fs::remove_file(file);
    }
    // Old enough for any garbage collector.
    for id in &old {
        age(&project.run_paths(id).dir, HOUR);
    }

    let listing = project.runs(None).unwrap();
    assert_eq!(listing.runs, before);
    assert_eq!(listing.warnings[0].code, "RUNS_INDEX_REBUILT");
    assert!(listing.warnings[0].message.contains("missing"));

    for file in [index_file(&project), journal_file(&project)] {
        let _ = fs::remove_file(file);
    }
    let new = f.create(&project);
    let dirs = run_dirs(&project);
    for id in &old {
        assert!(dirs.contains(id), "run directory {id} was removed");
    }
    let listed = ids(&project.list_runs().unwrap());
    assert_eq!(listed.len(), 5);
    assert!(listed.contains(&new.run_id) && old.iter().all(|id| listed.contains(id)));
}

#[test]
fn damage_in_one_project_never_hides_another() {
    let f = fixture();
    let a = f.project("a");
    let b = f.project("b");
    let a_runs = f.runs(&a, 2);
    let b_runs = f.runs(&b, 3);

    // A damaged index in A: rebuilt, with a warning; B listed.
    fs::write(index_file(&a), "{not json").unwrap();
    let all = f.store.runs(None).unwrap();
    let listed: HashSet<String> = all.rows.iter().map(|(_, r)| r.run_id.clone()).collect();
    assert_eq!(listed.len(), 5);
    assert_eq!(all.warnings.len(), 1);
    assert!(
        all.warnings[0]
            .message
            .contains(&a.root().display().to_string())
    );

    // A damaged project.json in A: A is skipped with a warning naming it, B is listed and found.
    fs::write(a.dir.join("project.json"), "{\"projectId\": 7").unwrap();
    let all = f.store.runs(None).unwrap();
    let listed: HashSet<String> = all.rows.iter().map(|(_, r)| r.run_id.clone()).collect();
    assert_eq!(listed, b_runs.iter().cloned().collect());
    assert_eq!(all.warnings.len(), 1, "{:?}", all.warnings);
    assert_eq!(all.warnings[0].code, "PROJECT_RECORD_INVALID");
    assert!(
        all.warnings[0]
            .message
            .starts_with(&format!("project.json of {} is damaged: ", a.dir.display())),
        "{}",
        all.warnings[0]
    );
    let (found_in, run) = f.store.find_run(&b_runs[1][..30]).unwrap();
    assert_eq!(
        (found_in.id(), run.run_id.as_str()),
        (b.id(), b_runs[1].as_str())
    );
    let (_, run) = f.store.find_run(&b_runs[2]).unwrap();
    assert_eq!(run.run_id, b_runs[2]);
    // A's runs cannot be found, and the error says why.
    let err = f.store.find_run(&a_runs[0]).unwrap_err();
    assert_eq!(err.code(), "RUN_NOT_FOUND");
    assert!(err.to_string().contains("project.json of"), "{err}");
    // Asking for A itself names the damage.
    let err = f.store.project(a.root()).unwrap_err();
    assert_eq!(err.code(), "PROJECT_RECORD_INVALID");
    assert!(err.hint().unwrap().contains("runs"));
}

#[test]
fn reindex_rebuilds_an_identical_index() {
    let f = fixture();
    let project = f.project("a");
    f.runs(&project, 7);
    let before = project.list_runs().unwrap();

    let (report, warnings) = project.reindex().unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!((report.runs, report.from_run_json), (7, 7));
    assert!(report.skipped.is_empty());
    assert_eq!(project.list_runs().unwrap(), before);
    let first = fs::read(index_file(&project)).unwrap();
    let parsed: Vec<RunMetadata> = serde_json::from_slice(&first).unwrap();
    let mut oldest_first = before.clone();
    oldest_first.reverse();
    assert_eq!(
        parsed, oldest_first,
        "runsIndex.json holds every run, oldest first"
    );
    assert_eq!(fs::read(journal_file(&project)).unwrap().len(), 0);

    // From the run directories alone, the same bytes.
    fs::remove_file(index_file(&project)).unwrap();
    fs::remove_file(journal_file(&project)).unwrap();
    project.reindex().unwrap();
    assert_eq!(fs::read(index_file(&project)).unwrap(), first);
}

#[test]
fn a_huge_question_is_cut_in_the_index_and_run_json() {
    let f = fixture();
    let project = f.project("a");
    let run = f.create(&project);
    let question = "Which story? ".repeat(20 * 1024 * 1024 / 13);
    project
        .set_phase(
            &run.run_id,
            Phase::WaitingUser,
            Some(json!({"question": question, "nodeId": "step-01-select-story"})),
        )
        .unwrap();
    let index_bytes = fs::metadata(index_file(&project)).unwrap().len()
        + fs::metadata(journal_file(&project)).unwrap().len();
    assert!(index_bytes < 16 * 1024, "index holds {index_bytes} bytes");
    let run_json = fs::metadata(project.run_paths(&run.run_id).metadata_file())
        .unwrap()
        .len();
    assert!(run_json < 8 * 1024, "run.json holds {run_json} bytes");
    let meta = project.get_run(&run.run_id).unwrap();
    let waiting = meta.waiting_for.unwrap();
    let kept = waiting["question"].as_str().unwrap();
    assert_eq!(kept.chars().count(), 2_001);
    assert!(kept.starts_with("Which story? Which story?") && kept.ends_with('…'));
    assert_eq!(waiting["truncated"], true);
    assert_eq!(waiting["nodeId"], "step-01-select-story");
    let listed = &project.list_runs().unwrap()[0];
    assert_eq!(listed.waiting_for.as_ref().unwrap()["question"], kept);
}

/// Index writes are counted honestly: a line appended to the journal is one write, a new inode
/// of runsIndex.json is one rewrite.
#[test]
fn the_index_is_written_on_creation_and_changes_only() {
    let f = fixture();
    let project = f.project("a");
    f.create(&project); // the first creation may set the index up
    let lines = |p: &Project| fs::read_to_string(journal_file(p)).unwrap().lines().count();
    let inode = |p: &Project| fs::metadata(index_file(p)).unwrap().ino();
    let (lines0, inode0) = (lines(&project), inode(&project));

    let run = f.create(&project);
    assert_eq!(lines(&project), lines0 + 1, "creation: one write");
    let run_json = project.run_paths(&run.run_id).metadata_file();
    project
        .set_phase(&run.run_id, Phase::Running, None)
        .unwrap();
    project
        .update_run(&run.run_id, |r| {
            r.current_node_id = Some("step-02-discover-inputs".into())
        })
        .unwrap();
    assert_eq!(lines(&project), lines0 + 3, "phase, node: one write each");
    let written = fs::read(&run_json).unwrap();
    std::thread::sleep(Duration::from_millis(1_100)); // a new lastUpdatedAt would show
    for _ in 0..5 {
        project
            .set_phase(&run.run_id, Phase::Running, None)
            .unwrap();
        project
            .update_run(&run.run_id, |r| {
                r.current_node_id = Some("step-02-discover-inputs".into())
            })
            .unwrap();
        project.update_run(&run.run_id, |_| {}).unwrap();
    }
    assert_eq!(lines(&project), lines0 + 3, "no change, no write");
    assert_eq!(
        fs::read(&run_json).unwrap(),
        written,
        "run.json untouched too"
    );
    project
        .set_phase(&run.run_id, Phase::Completed, None)
        .unwrap();
    assert_eq!(lines(&project), lines0 + 4);
    assert_eq!(
        inode(&project),
        inode0,
        "runsIndex.json was never rewritten"
    );
    let indexed = project.list_runs().unwrap();
    assert_eq!(
        indexed.iter().find(|r| r.run_id == run.run_id).unwrap(),
        &serde_json::from_slice::<RunMetadata>(&fs::read(&run_json).unwrap()).unwrap(),
        "run.json and the index agree"
    );
}

#[test]
fn identity_fields_cannot_be_changed() {
    let f = fixture();
    let project = f.project("a");
    let run = f.create(&project);
    let after = project
        .update_run(&run.run_id, |r| {
            r.run_id = "x".into();
            r.created_at = "never".into();
            r.project_id = "elsewhere".into();
            r.phase = Phase::Running;
        })
        .unwrap();
    assert_eq!(
        (
            after.run_id.as_str(),
            after.created_at.as_str(),
            after.project_id.as_str()
        ),
        (
            run.run_id.as_str(),
            run.created_at.as_str(),
            run.project_id.as_str()
        )
    );
}

/// A run directory as the previous version left it: no run.json, no journal.
fn make_legacy(project: &Project) {
    for id in run_dirs(project) {
        let _ = fs::remove_file(project.run_paths(&id).metadata_file());
    }
    let _ = fs::remove_file(journal_file(project));
}

#[test]
fn runs_made_by_the_previous_version_are_found() {
    let f = fixture();
    let project = f.project("a");
    f.runs(&project, 3);
    let before = project.list_runs().unwrap();

    // The old index is readable: its entries are kept as they are.
    project.reindex().unwrap();
    make_legacy(&project);
    let listing = project.runs(None).unwrap();
    assert_eq!(listing.runs, before);
    assert!(listing.warnings.is_empty(), "an upgrade is no damage");
    let (report, _) = project.reindex().unwrap();
    assert_eq!(report.from_run_json, 3, "the upgrade wrote their run.json");

    // No index left: the state frontmatter and the store tell what they can.
    make_legacy(&project);
    fs::remove_file(index_file(&project)).unwrap();
    let (report, warnings) = project.reindex().unwrap();
    assert_eq!((report.runs, report.from_state), (3, 3));
    assert_eq!(warnings[0].code, "RUNS_INDEX_REBUILT");
    let rebuilt = project.list_runs().unwrap();
    for (old, new) in before.iter().zip(&rebuilt) {
        assert_eq!(new.run_id, old.run_id);
        assert_eq!(
            new.package_id, old.package_id,
            "the one package with that workflow"
        );
        assert_eq!(new.package_sha256, old.package_sha256);
        assert_eq!(new.workflow_ref, old.workflow_ref);
        assert_eq!(new.active_agent_id, old.active_agent_id);
        assert_eq!(new.phase, Phase::Idle, "unknown phase: idle, resumable");
        assert_eq!(new.waiting_for, None);
        // The UUID v7 carries the creation time.
        let old_secs = &old.created_at[..19];
        assert_eq!(&new.created_at[..19], old_secs);
    }
    // The recovered runs resume against their package.
    project.pinned_package(&f.store, &rebuilt[0]).unwrap();
}

#[test]
fn a_run_left_out_of_the_index_by_a_kill_is_added_never_removed() {
    let f = fixture();
    let project = f.project("a");
    let template = f.create(&project);
    // A complete run directory whose creation was killed between its rename and the index
    // write, an hour ago, with and without its pending marker.
    let orphan = |marker: bool| {
        let id = uuid::Uuid::now_v7().to_string();
        let dir = project.run_paths(&id).dir;
        baton_testkit::copy_dir(&project.run_paths(&template.run_id).dir, &dir);
        let mut meta = template.clone();
        meta.run_id = id.clone();
        fs::write(dir.join("run.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
        age(&dir, HOUR);
        if marker {
            let m = project.dir.join("staging").join(format!("{id}.pending"));
            File::create(&m).unwrap();
            age(&m, HOUR);
        }
        id
    };
    let with_marker = orphan(true);
    let without_marker = orphan(false);
    // And a half-built one, hidden in staging: the only thing ever removed.
    let half = project.dir.join("staging/.0190-half.tmp-1-0");
    fs::create_dir_all(half.join("state")).unwrap();
    age(&half, HOUR);

    f.create(&project);
    let listed = ids(&project.list_runs().unwrap());
    assert!(
        listed.contains(&with_marker),
        "the marker names it: indexed at the next creation"
    );
    assert!(!half.exists(), "the half-built run is removed");
    assert!(
        run_dirs(&project).contains(&without_marker),
        "never removed"
    );

    let gc = project.collect_garbage(Duration::ZERO).unwrap();
    assert_eq!((gc.staging_removed, gc.unindexed_added), (0, 1));
    let listed = ids(&project.list_runs().unwrap());
    assert!(listed.contains(&without_marker));
    assert_eq!(listed, run_dirs(&project));
}

#[test]
fn ambiguous_ids_name_at_most_ten() {
    let err = RunError::RunAmbiguous {
        query: "01".into(),
        matches: (0..25).map(|i| format!("01-run-{i}")).collect(),
    };
    let text = err.to_string();
    assert!(
        text.starts_with("'01' matches 25 runs: 01-run-0, "),
        "{text}"
    );
    assert!(text.ends_with("01-run-9 and 15 more"), "{text}");
}

#[test]
fn listing_the_newest_reads_the_newest() {
    let f = fixture();
    let project = f.project("a");
    let created = f.runs(&project, 6);
    project.reindex().unwrap(); // some in runsIndex.json, some in the journal
    let later = f.runs(&project, 2);
    project
        .set_phase(
            &created[0],
            Phase::Failed,
            Some(json!({"error": {"code": "X"}})),
        )
        .unwrap();
    let all = project.list_runs().unwrap();
    let newest = project.runs(Some(3)).unwrap();
    assert_eq!(newest.runs, all[..3].to_vec());
    assert!(newest.more);
    assert_eq!(newest.runs[0].run_id, later[1]);
    let everything = project.runs(Some(8)).unwrap();
    assert!(!everything.more);
    let failed = all.iter().find(|r| r.run_id == created[0]).unwrap();
    assert_eq!(failed.phase, Phase::Failed);
    assert_eq!(
        failed.waiting_for,
        Some(json!({"error": {"code": "X"}})) as Option<Value>
    );
}
