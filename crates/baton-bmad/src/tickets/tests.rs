#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::order::Scope;
use super::*;
use std::path::{Path, PathBuf};

const INIT: &str = "_bmad-output/initiative-kite";

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn ticket(id: u64, status: Option<&str>, extra: &str) -> String {
    let status = status.map(|s| format!("status: {s}\n")).unwrap_or_default();
    format!(
        "---\n# made by the ticketing skill\nid: {id}\ntype: story\n{status}{extra}owner: ana\n---\n\n# Ticket {id}\n\nBody.\n"
    )
}

/// Two epics: frame (id 1) with three entries, sail (id 2) whose entry 2 waits on frame's 3.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    write(
        &root,
        &format!("{INIT}/tickets.toml"),
        "# build order\n[[epic]]\nid = 1\nslug = \"frame\"\n\n[[epic]]\nid = 2\nslug = \"sail\"\n",
    );
    write(
        &root,
        &format!("{INIT}/epic-frame/tickets.toml"),
        "[[entry]]\nid = 1\ntitle = \"Spar\"\n\n[[entry]]\nid = 2\ntitle = \"Spine\"\nafter = [1]\n\n[[entry]]\nid = 3\ntitle = \"Bridle\"\nnotes = \"kept\"\n",
    );
    write(
        &root,
        &format!("{INIT}/epic-frame/epic-frame.md"),
        "---\nid: 1\n---\n# Frame\n",
    );
    write(
        &root,
        &format!("{INIT}/epic-frame/story-spar.md"),
        &ticket(1, Some("done"), ""),
    );
    write(
        &root,
        &format!("{INIT}/epic-frame/story-spine.md"),
        &ticket(2, Some("built"), ""),
    );
    write(
        &root,
        &format!("{INIT}/epic-frame/story-bridle-plan.md"),
        &ticket(3, None, ""),
    );
    write(
        &root,
        &format!("{INIT}/epic-sail/tickets.toml"),
        "[[entry]]\nid = 1\ntitle = \"Panel\"\n\n[[entry]]\nid = 2\ntitle = \"Hem\"\nafter = [\"1.2\"]\n\n[[entry]]\nid = 3\ntitle = \"Tail\"\n",
    );
    write(
        &root,
        &format!("{INIT}/epic-sail/story-panel.md"),
        &ticket(
            1,
            Some("in-progress"),
            "blocked_at: 2026-11-02\nblocked_reason: which fabric?\n",
        ),
    );
    write(
        &root,
        &format!("{INIT}/epic-sail/story-hem.md"),
        &ticket(2, Some("ready-for-dev"), ""),
    );
    (tmp, root)
}

fn load(root: &Path) -> Tree {
    Tree::load(root).unwrap().unwrap()
}

#[test]
fn the_tree_is_found_under_the_output_folder_and_read() {
    let (_tmp, root) = tree();
    let t = load(&root);
    assert_eq!(t.output_folder, "_bmad-output");
    let init = &t.initiatives[0];
    assert_eq!(init.folder, INIT);
    let names: Vec<&str> = init.epics.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["epic-frame", "epic-sail"]);
    assert_eq!(init.epics[0].id, Some(1));
    let frame = &init.epics[0].tickets;
    assert_eq!(frame[0].key, "epic-frame.1");
    assert_eq!(frame[2].file.as_deref(), Some("story-bridle-plan.md"));
    assert_eq!(frame[2].shown_status(), "not-started");
    assert_eq!(frame[2].title.as_deref(), Some("Bridle"));
    let sail = &init.epics[1].tickets;
    assert_eq!(sail[0].blocked_reason.as_deref(), Some("which fabric?"));
    assert_eq!(sail[2].shown_status(), "not-pulled");
    assert_eq!(
        t.file_of("epic-sail.2").as_deref(),
        Some(format!("{INIT}/epic-sail/story-hem.md").as_str())
    );

    // No initiative folder: no tree.
    let empty = tempfile::tempdir().unwrap();
    assert!(Tree::load(empty.path()).unwrap().is_none());
}

#[test]
fn the_output_folder_follows_bmads_configuration_layers() {
    let (_tmp, root) = tree();
    std::fs::rename(root.join("_bmad-output"), root.join("out")).unwrap();
    write(
        &root,
        "_bmad/config.toml",
        "[core]\noutput_folder = \"{project-root}/nowhere\"\n",
    );
    write(
        &root,
        "_bmad/custom/config.toml",
        "[core]\noutput_folder = \"{project-root}/out\"\n",
    );
    let t = load(&root);
    assert_eq!(t.output_folder, "out");
    assert_eq!(t.output_rule, "_bmad/custom/config.toml output_folder");
    assert_eq!(t.initiatives[0].folder, "out/initiative-kite");
    write(
        &root,
        "_bmad/custom/config.toml",
        "[core]\noutput_folder = \"/elsewhere\"\n",
    );
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "TICKETS_OUTPUT_FOLDER_INVALID");
}

#[test]
fn next_follows_build_order_and_only_done_releases_dependants() {
    let (_tmp, root) = tree();
    let t = load(&root);
    let all = Scope {
        initiative: 0,
        epic: None,
    };
    let states: Vec<(String, &'static str)> = t
        .walk(&all)
        .into_iter()
        .map(|(_, t, s)| (t.key.clone(), s.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("epic-frame.1".to_string(), "done"),
            ("epic-frame.2".to_string(), "built"),
            ("epic-frame.3".to_string(), "runnable"),
            ("epic-sail.1".to_string(), "blocked"),
            ("epic-sail.2".to_string(), "waiting"),
            ("epic-sail.3".to_string(), "not-pulled"),
        ]
    );
    // Built is not done: the hem still waits on the spine.
    assert_eq!(
        t.state_of("epic-sail.2"),
        Some(State::Waiting(vec!["epic-frame.2".into()]))
    );
    assert_eq!(t.next(&all).unwrap().key, "epic-frame.3");
    let sail = t.scope("sail").unwrap();
    assert_eq!(t.scope("epic-sail"), Some(sail.clone()));
    assert_eq!(t.scope("2"), Some(sail.clone()));
    assert_eq!(t.scope("initiative-kite"), Some(all.clone()));
    assert_eq!(t.scope_folder(&sail).unwrap(), format!("{INIT}/epic-sail"));
    // The epic id the loop prints in its hints names the same scope.
    assert_eq!(
        t.scope(&format!("tickets:{INIT}/epic-sail")),
        Some(sail.clone())
    );
    assert!(t.next(&sail).is_none());

    // A stored done releases it.
    t.set_status("epic-frame.2", "done").unwrap();
    let t = load(&root);
    assert_eq!(t.next(&sail).unwrap().key, "epic-sail.2");
    // A whole epic as a prerequisite gates every ticket under the waiting one.
    write(
        &root,
        &format!("{INIT}/tickets.toml"),
        "[[epic]]\nid = 1\nslug = \"frame\"\n\n[[epic]]\nid = 2\nslug = \"sail\"\nafter = [\"epic-frame\"]\n",
    );
    let t = load(&root);
    assert_eq!(
        t.state_of("epic-sail.2"),
        Some(State::Waiting(vec!["epic-frame.3".into()]))
    );
    // Dropped and done are passed over.
    t.set_status("epic-frame.3", "dropped").unwrap();
    let t = load(&root);
    assert_eq!(t.state_of("epic-frame.3"), Some(State::Dropped));
    assert_eq!(t.next(&all).map(|x| x.key.as_str()), None);
}

#[test]
fn a_status_is_written_in_place_keeping_every_other_byte() {
    let (_tmp, root) = tree();
    let t = load(&root);
    let path = root.join(INIT).join("epic-sail/story-hem.md");
    let before = std::fs::read_to_string(&path).unwrap();
    t.set_status("epic-sail.2", "in-progress").unwrap();
    let after = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        after,
        before.replace("status: ready-for-dev", "status: in-progress")
    );
    assert!(after.contains("# made by the ticketing skill\nid: 2\ntype: story\n"));
    assert!(after.contains("owner: ana\n"));
    // A file without a status gets one line, nothing else moves.
    let plan = root.join(INIT).join("epic-frame/story-bridle-plan.md");
    let before = std::fs::read_to_string(&plan).unwrap();
    t.set_status("epic-frame.3", "in-review").unwrap();
    let after = std::fs::read_to_string(&plan).unwrap();
    assert_eq!(after.replacen("status: in-review\n", "", 1), before);
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(root.join(INIT).join("epic-frame"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
    assert_eq!(
        t.set_status("epic-frame.3", "shipped").unwrap_err().code,
        "TICKET_STATUS_UNKNOWN"
    );
    assert_eq!(
        t.set_status("epic-sail.3", "done").unwrap_err().code,
        "TICKET_NOT_PULLED"
    );
}

#[test]
fn hostile_files_are_refused_with_their_place() {
    let (_tmp, root) = tree();
    let manifest = format!("{INIT}/epic-sail/tickets.toml");

    // Not TOML: the line.
    write(
        &root,
        &manifest,
        "[[entry]]\nid = 1\n\n[[entry]]\nid = = 2\n",
    );
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "TICKETS_TOML_INVALID");
    assert!(
        e.message.starts_with(&format!("{manifest} (line 5)")),
        "{}",
        e.message
    );

    // An entry without an integer id, and a duplicate id.
    write(
        &root,
        &manifest,
        "[[entry]]\nid = 1\n\n[[entry]]\nid = \"two\"\n",
    );
    let e = Tree::load(&root).unwrap_err();
    assert!(e.message.contains("(line 4): field id"), "{}", e.message);
    write(&root, &manifest, "[[entry]]\nid = 1\n\n[[entry]]\nid = 1\n");
    assert_eq!(Tree::load(&root).unwrap_err().code, "TICKET_ID_DUPLICATE");

    // A loop of prerequisites across the two epics.
    write(
        &root,
        &manifest,
        "[[entry]]\nid = 1\n\n[[entry]]\nid = 2\nafter = [\"1.3\"]\n",
    );
    write(
        &root,
        &format!("{INIT}/epic-frame/tickets.toml"),
        "[[entry]]\nid = 1\n\n[[entry]]\nid = 2\n\n[[entry]]\nid = 3\nafter = [\"2.2\"]\n",
    );
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "TICKETS_AFTER_CYCLE");
    assert!(
        e.message
            .contains("epic-frame.3 → epic-sail.2 → epic-frame.3"),
        "{}",
        e.message
    );
    assert!(e.message.contains("(line 7)"), "{}", e.message);

    // An after naming nothing.
    write(&root, &manifest, "[[entry]]\nid = 1\nafter = [9]\n");
    write(
        &root,
        &format!("{INIT}/epic-frame/tickets.toml"),
        "[[entry]]\nid = 1\n",
    );
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "TICKETS_AFTER_UNKNOWN");
    assert!(
        e.message
            .starts_with(&format!("{manifest} (line 1): field after: \"9\"")),
        "{}",
        e.message
    );
    write(
        &root,
        &manifest,
        "[[entry]]\nid = 1\nafter = [\"fabric\"]\n",
    );
    assert_eq!(Tree::load(&root).unwrap_err().code, "TICKETS_TOML_INVALID");
    write(&root, &manifest, "[[entry]]\nid = 1\n[[entry]]\nid = 2\n");

    // A status BMAD does not define: the file and the field.
    let hem = format!("{INIT}/epic-sail/story-hem.md");
    write(&root, &hem, &ticket(2, Some("shipped"), ""));
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "TICKET_STATUS_UNKNOWN");
    assert!(
        e.message
            .starts_with(&format!("{hem}: field status: \"shipped\"")),
        "{}",
        e.message
    );
    write(&root, &hem, "---\nid: [2]\n---\n");
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "TICKET_FILE_INVALID");
    assert!(
        e.message.starts_with(&format!("{hem}: field id")),
        "{}",
        e.message
    );

    // A huge file is refused by its size before it is read.
    write(&root, &hem, &ticket(2, None, ""));
    let big = std::fs::File::create(root.join(&manifest)).unwrap();
    big.set_len(64 << 20).unwrap();
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "FILE_TOO_LARGE");
    assert!(e.message.starts_with(&manifest), "{}", e.message);

    // Two files for one entry.
    write(&root, &manifest, "[[entry]]\nid = 1\n");
    write(
        &root,
        &format!("{INIT}/epic-sail/story-copy.md"),
        &ticket(1, None, ""),
    );
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "TICKET_FILE_AMBIGUOUS");
}

#[test]
fn a_ticket_file_that_is_a_link_out_or_a_fifo_is_refused_without_being_read() {
    let (tmp, root) = tree();
    let hem = format!("{INIT}/epic-sail/story-hem.md");
    // A link to a file outside the project: never followed.
    let outside = tmp.path().join("outside.md");
    std::fs::write(&outside, ticket(2, Some("done"), "")).unwrap();
    std::fs::remove_file(root.join(&hem)).unwrap();
    std::os::unix::fs::symlink(&outside, root.join(&hem)).unwrap();
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "PATH_OUTSIDE_PROJECT", "{}", e.message);
    assert!(
        e.message.contains("story-hem.md"),
        "{}: {}",
        e.code,
        e.message
    );
    // A FIFO: refused at once (a read would block forever).
    std::fs::remove_file(root.join(&hem)).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(root.join(&hem))
        .status()
        .unwrap();
    assert!(status.success());
    let e = Tree::load(&root).unwrap_err();
    assert_eq!(e.code, "FILE_NOT_REGULAR", "{}", e.message);
    assert!(
        e.message.contains("story-hem.md"),
        "{}: {}",
        e.code,
        e.message
    );
    // The manifest as a link out: the same.
    std::fs::remove_file(root.join(&hem)).unwrap();
    let manifest = root.join(format!("{INIT}/epic-sail/tickets.toml"));
    let outside_toml = tmp.path().join("outside.toml");
    std::fs::write(&outside_toml, "[[entry]]\nid = 1\n").unwrap();
    std::fs::remove_file(&manifest).unwrap();
    std::os::unix::fs::symlink(&outside_toml, &manifest).unwrap();
    let e = Tree::load(&root).unwrap_err();
    assert!(
        e.message.contains("tickets.toml"),
        "{}: {}",
        e.code,
        e.message
    );
}
