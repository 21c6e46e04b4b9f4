//! Questions of queued runs answered from the database: a run the worker drives asks a person,
//! its unit waits with the question; `baton queue status` shows it, `baton answer <UNIT> --db`
//! answers it from anywhere, and the next worker goes on with the answer exactly as `baton
//! answer` would locally, once. Real throwaway PostgreSQL, scripted model on 127.0.0.1, a bare
//! git repository as the project's remote. Skips without PostgreSQL unless
//! BATON_REQUIRE_POSTGRES is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::worker_support;

use baton_llm::Trace;
use baton_llm::testing::{Received, Reply, ScriptedServer};
use baton_testkit::demo_trace;
use baton_testkit::git::{git, project_with_remote};
use baton_testkit::pg::postgres_or_skip;
use serde_json::Value;
use worker_support::{
    assert_resumed, baton, hanging_at, json_of, psql, queue, stderr, submit, unit_state,
    wait_lease_expired, worker_killed_at,
};

const ANSWER: &str = "1-2-user-authentication";

/// The user messages of a request that carry a person's answer.
fn answers_in(r: &Received) -> usize {
    r.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .filter(|c| c.contains("USER_INPUT") && c.contains(ANSWER))
        .count()
}

fn messages(r: &Received) -> Vec<Value> {
    r.body["messages"].as_array().unwrap().clone()
}

fn answer(home: &std::path::Path, url: &str, unit: &str, text: &str) -> std::process::Output {
    baton(home)
        .args(["answer", unit, "--db", url, text, "--json"])
        .output()
        .unwrap()
}

fn error_code(out: &std::process::Output) -> String {
    json_of(out)["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_runs_question_is_answered_from_the_database_and_the_next_worker_goes_on() {
    let Some(pg) = postgres_or_skip("a_queued_runs_question_is_answered_from_the_database") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let person = tmp.path().join("person-home");
    let url = queue(&pg, &person);
    let (project, bare) = project_with_remote(tmp.path());
    // The demo conversation: its second answer asks which story to prepare.
    let server = ScriptedServer::start(Reply::from_trace(&Trace::load(&demo_trace()).unwrap()))
        .await
        .unwrap();
    submit(&person, &project, &url, &server.base_url(), &[]);

    // The first worker runs it until it asks, then has nothing left to do.
    let out = baton(&tmp.path().join("worker-a"))
        .args(["worker", "--db", &url, "--exit-when-idle"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unit 1 waits for a person"),
        "{}",
        stderr(&out)
    );
    assert_eq!(unit_state(&pg, 1), "waiting:1");
    assert_eq!(server.received().len(), 2);

    // The queue shows the question as the run asked it.
    let out = baton(&person)
        .args(["queue", "status", "--db", &url, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let status = json_of(&out);
    let waiting = status["waiting"].as_array().unwrap();
    assert_eq!(waiting.len(), 1, "{status}");
    assert_eq!(waiting[0]["id"], 1);
    let question = &waiting[0]["question"];
    assert!(
        question["question"]
            .as_str()
            .unwrap()
            .contains("Which story"),
        "{question}"
    );
    assert_eq!(question["nodeId"], "step-01-select-story");
    let run_id = question["runId"].as_str().unwrap().to_string();
    assert!(waiting[0]["since"].as_str().unwrap().ends_with('Z'));
    let out = baton(&person)
        .args(["queue", "status", "--db", &url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("waiting for a person"), "{text}");
    assert!(text.contains("Which story"), "{text}");
    assert!(text.contains("baton answer ID --db URL TEXT"), "{text}");

    // Answers that cannot be stored, and units that do not wait, are refused with a code.
    let out = answer(&person, &url, "1", " ");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(error_code(&out), "QUEUE_ANSWER_INVALID");
    let out = answer(&person, &url, "99", ANSWER);
    assert_eq!(error_code(&out), "QUEUE_UNIT_NOT_FOUND");
    let out = answer(&person, &url, "one", ANSWER);
    assert_eq!(out.status.code(), Some(2));
    let out = baton(&person)
        .args(["answer", "1", "--db", &url, ANSWER, "--model", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "--model does not go with --db");

    // The answer: stored with the unit, which goes back to the queue.
    let out = answer(&person, &url, "1", ANSWER);
    assert!(out.status.success(), "{}", stderr(&out));
    let receipt = json_of(&out);
    assert_eq!(receipt["unit"], 1);
    assert_eq!(receipt["runId"], run_id.as_str());
    assert_eq!(receipt["state"], "queued");
    assert!(receipt["database"].as_str().unwrap().contains("postgres"));
    assert_eq!(
        psql(
            &pg,
            "SELECT state || ':' || (SELECT body->>'text' FROM baton.unit_writes \
             WHERE unit_id = 1 AND kind = 'answer') FROM baton.work_units WHERE id = 1"
        ),
        format!("queued:{ANSWER}")
    );
    // Answered already: refused, nothing more written.
    let out = answer(&person, &url, "1", "something else");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(error_code(&out), "QUEUE_UNIT_NOT_WAITING");
    assert!(json_of(&out)["error"]["hint"].as_str().is_some());

    // The next worker continues the run with the answer and completes it.
    let out = baton(&tmp.path().join("worker-b"))
        .args(["worker", "--db", &url, "--exit-when-idle"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("answering run"), "{err}");
    assert_eq!(unit_state(&pg, 1), "done:2");
    // The model heard the answer in the next request, once, and nothing was asked twice.
    let received = server.received();
    assert_eq!(received.len(), 10);
    assert_eq!(server.remaining(), 0);
    assert_eq!(answers_in(&received[1]), 0);
    assert_eq!(answers_in(&received[2]), 1);
    let answered = messages(&received[2]);
    assert_eq!(
        answered[..messages(&received[1]).len()],
        messages(&received[1])[..]
    );
    let commit = psql(
        &pg,
        "SELECT outcome->>'commit' FROM baton.work_units WHERE id = 1",
    );
    let files = git(&bare, &["ls-tree", "-r", "--name-only", &commit]);
    assert!(
        files.contains("artifacts/stories/1-2-user-authentication.md"),
        "{files}"
    );

    // Done: nothing waits for an answer.
    let out = answer(&person, &url, "1", ANSWER);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(error_code(&out), "QUEUE_UNIT_NOT_WAITING");
    assert_eq!(
        psql(
            &pg,
            "SELECT count(*) FROM baton.unit_writes WHERE unit_id = 1 AND kind = 'answer'"
        ),
        "1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_the_run_went_on_with_is_not_applied_again_after_its_worker_is_killed() {
    let Some(pg) = postgres_or_skip("an_answer_the_run_went_on_with_is_not_applied_again") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let person = tmp.path().join("person-home");
    let url = queue(&pg, &person);
    let (project, _bare) = project_with_remote(tmp.path());
    // The request that carries the answer is never answered: its worker is killed there.
    let server = hanging_at(2).await;
    submit(&person, &project, &url, &server.base_url(), &[]);
    let out = baton(&tmp.path().join("worker-a"))
        .args(["worker", "--db", &url, "--exit-when-idle"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        psql(&pg, "SELECT state FROM baton.work_units WHERE id = 1"),
        "waiting"
    );
    let out = answer(&person, &url, "1", ANSWER);
    assert!(out.status.success(), "{}", stderr(&out));

    let worker_b = tmp.path().join("worker-b");
    worker_killed_at(&worker_b, &url, 3, "no request with the answer", || {
        server.received().len()
    })
    .await;
    // The answer was recorded by a checkpoint before the model heard it.
    assert_eq!(
        psql(
            &pg,
            "SELECT count(*) > 0 FROM baton.unit_writes WHERE unit_id = 1 AND kind = 'checkpoint' \
             AND seq > (SELECT max(seq) FROM baton.unit_writes WHERE kind = 'answer')"
        ),
        "t"
    );
    wait_lease_expired(&pg, 1);

    // The next worker resumes the run; it does not answer it again.
    let out = baton(&tmp.path().join("worker-c"))
        .args(["worker", "--db", &url, "--lease-s", "2", "--exit-when-idle"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("resuming run"), "{err}");
    assert!(!err.contains("answering run"), "{err}");
    assert_eq!(unit_state(&pg, 1), "done:3");
    let received = server.received();
    assert_eq!(received.len(), 11);
    assert_eq!(server.remaining(), 0);
    // The hung request carried the answer; the resumed one is the same turn with the resume
    // directive after it, the answer still there once.
    assert_eq!(answers_in(&received[2]), 1);
    assert_eq!(answers_in(&received[3]), 1);
    assert_resumed(&messages(&received[2]), &messages(&received[3]));
    for r in &received[4..] {
        assert!(answers_in(r) <= 1);
    }
}

/// Answers given in advance (`--input`) answer each question once: a run taken over after it
/// used its only one asks a person its next question instead of getting that answer again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_the_run_used_does_not_answer_its_next_question_after_a_takeover() {
    let Some(pg) = postgres_or_skip("an_input_the_run_used_does_not_answer_again") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let person = tmp.path().join("person-home");
    let url = queue(&pg, &person);
    let (project, _bare) = project_with_remote(tmp.path());
    // The demo asks its question at the second turn (answered by the input); the fourth request
    // hangs (its worker is killed there); after the resumed turn the model asks again.
    let mut replies = Reply::from_trace(&Trace::load(&demo_trace()).unwrap());
    replies.insert(3, Reply::Hang);
    replies.insert(
        5,
        Reply::text("Which epic should this story also be checked against?"),
    );
    let server = ScriptedServer::start(replies).await.unwrap();
    submit(
        &person,
        &project,
        &url,
        &server.base_url(),
        &["--input", ANSWER],
    );
    let worker_a = tmp.path().join("worker-a");
    worker_killed_at(&worker_a, &url, 4, "no fourth request", || {
        server.received().len()
    })
    .await;
    assert_eq!(
        answers_in(&server.received()[2]),
        1,
        "the input answered the first question"
    );
    wait_lease_expired(&pg, 1);
    let out = baton(&tmp.path().join("worker-b"))
        .args(["worker", "--db", &url, "--lease-s", "2", "--exit-when-idle"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(unit_state(&pg, 1), "waiting:2");
    assert!(
        psql(
            &pg,
            "SELECT question::text FROM baton.work_units WHERE id = 1"
        )
        .contains("also be checked against"),
    );
    for r in server.received() {
        assert!(answers_in(&r) <= 1, "the input was given twice");
    }
}
