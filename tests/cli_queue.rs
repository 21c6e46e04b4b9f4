//! `baton queue init|status|cancel` against a real throwaway PostgreSQL (baton-testkit's `pg`):
//! text and --json, the errors with their hints, and the password never printed. Skips without
//! PostgreSQL, saying so, unless BATON_REQUIRE_POSTGRES is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_testkit::pg::postgres_or_skip;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }

    fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs baton with a clean PostgreSQL environment plus `env`.
fn baton(args: &[&str], env: &[(&str, &str)], home: &Path) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args)
        .env("BATON_HOME", home.join("baton-home"))
        .env("HOME", home)
        .env("NO_COLOR", "1");
    for var in [
        "PGPASSWORD",
        "PGPASSFILE",
        "PGSSLROOTCERT",
        "BATON_QUEUE_URL",
        "OPENAI_API_KEY",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("baton runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

#[test]
fn queue_init_status_and_cancel() {
    let Some(pg) = postgres_or_skip("queue_init_status_and_cancel") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let url = pg.socket_url("postgres");
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--db", &url]);
        baton(&all, &[], home.path())
    };

    // Before init: status says the queue is missing and what to run.
    let out = run(&["queue", "status"]);
    assert_eq!(out.code, 1, "{}", out.all());
    assert!(
        out.stderr.contains("error[QUEUE_SCHEMA_MISSING]"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("baton queue init"), "{}", out.stderr);

    let out = run(&["queue", "init"]);
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(
        out.stdout
            .contains("queue ready in postgresql://baton@/postgres?host="),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "schema version {}, was 0",
            baton_queue::SCHEMA_VERSION
        )),
        "{}",
        out.stdout
    );
    let out = run(&["queue", "init", "--json"]);
    assert_eq!(out.code, 0, "{}", out.all());
    let j = out.json();
    assert_eq!(
        (j["fromVersion"].as_i64(), j["version"].as_i64()),
        (
            Some(i64::from(baton_queue::SCHEMA_VERSION)),
            Some(i64::from(baton_queue::SCHEMA_VERSION))
        )
    );
    assert_eq!(j["applied"], serde_json::json!([]));
    let out = run(&["queue", "init"]);
    assert!(
        out.stdout.contains(&format!(
            "is up to date (schema version {})",
            baton_queue::SCHEMA_VERSION
        )),
        "{}",
        out.stdout
    );

    let out = run(&["queue", "status", "--json"]);
    assert_eq!(out.code, 0, "{}", out.all());
    let j = out.json();
    assert_eq!(j["schemaVersion"], baton_queue::SCHEMA_VERSION);
    assert_eq!(
        j["counts"],
        serde_json::json!({"queued": 0, "leased": 0, "waiting": 0, "done": 0, "failed": 0, "cancelled": 0})
    );

    // Units in every state but failed, a worker holding one.
    pg.psql(
        "postgres",
        &format!(
            "INSERT INTO baton.work_units (kind, queue, project_remote, base_commit) \
             SELECT 'run', 'default', 'r', '{COMMIT}' FROM generate_series(1, 5); \
             INSERT INTO baton.workers (id, host) VALUES ('build-1:77', 'build-1'); \
             UPDATE baton.work_units SET state = 'leased', owner = 'build-1:77', epoch = 3, \
               leased_at = now(), heartbeat_at = now(), \
               lease_expires_at = now() + interval '30 s' WHERE id = 2; \
             UPDATE baton.work_units SET state = 'waiting', \
               question = '{{\"message\": \"Which port?\"}}' WHERE id = 3; \
             UPDATE baton.work_units SET state = 'done' WHERE id = 4"
        ),
    )
    .unwrap();
    let out = run(&["queue", "status", "--json"]);
    let j = out.json();
    assert_eq!(
        j["counts"],
        serde_json::json!({"queued": 2, "leased": 1, "waiting": 1, "done": 1, "failed": 0, "cancelled": 0})
    );
    assert_eq!(j["leased"][0]["id"], 2);
    assert_eq!(j["leased"][0]["owner"], "build-1:77");
    assert_eq!(j["leased"][0]["epoch"], 3);
    assert!(j["leased"][0]["expiresInS"].as_f64().unwrap() > 20.0, "{j}");
    assert_eq!(j["waiting"][0]["question"]["message"], "Which port?");
    assert_eq!(j["workers"][0]["id"], "build-1:77");
    assert_eq!(j["workers"][0]["leases"], 1);
    let out = run(&["queue", "status"]);
    assert_eq!(out.code, 0, "{}", out.all());
    for text in [
        "units: 2 queued, 1 leased, 1 waiting, 1 done, 0 failed, 0 cancelled",
        "build-1:77",
        "Which port?",
        "LAST HEARTBEAT",
    ] {
        assert!(
            out.stdout.contains(text),
            "{text:?} missing:\n{}",
            out.stdout
        );
    }

    // Cancel: the leased unit (its worker is told), a queued one, then refusals.
    let out = run(&["queue", "cancel", "2"]);
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(
        out.stdout.contains("leased by build-1:77 at epoch 3"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("LEASE_LOST"), "{}", out.stdout);
    let out = run(&["queue", "cancel", "1", "--json"]);
    assert_eq!(out.code, 0, "{}", out.all());
    assert_eq!(out.json()["previousState"], "queued");
    let out = run(&["queue", "cancel", "4", "--json"]);
    assert_eq!(out.code, 1, "{}", out.all());
    assert_eq!(out.json()["error"]["code"], "QUEUE_UNIT_FINISHED");
    let out = run(&["queue", "cancel", "404"]);
    assert_eq!(out.code, 1, "{}", out.all());
    assert!(
        out.stderr.contains("error[QUEUE_UNIT_NOT_FOUND]"),
        "{}",
        out.stderr
    );
    let j = run(&["queue", "status", "--json"]).json();
    assert_eq!(
        (
            j["counts"]["cancelled"].as_i64(),
            j["counts"]["queued"].as_i64()
        ),
        (Some(2), Some(1))
    );
    assert_eq!(
        pg.psql(
            "postgres",
            "SELECT state FROM baton.work_units WHERE id = 2"
        )
        .unwrap(),
        "cancelled"
    );
}

#[test]
fn queue_passwords_come_from_the_environment_and_are_never_printed() {
    let Some(pg) =
        postgres_or_skip("queue_passwords_come_from_the_environment_and_are_never_printed")
    else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let secret = pg.password().to_string();
    let url = pg.tcp_url("postgres");
    let hidden = |out: &Out| {
        assert!(
            !out.all().contains(&secret),
            "password printed:\n{}",
            out.all()
        );
    };

    // No password anywhere: refused, and the hint says where one can come from.
    let out = baton(&["queue", "init", "--db", &url], &[], home.path());
    assert_eq!(out.code, 1, "{}", out.all());
    assert!(
        out.stderr.contains("error[QUEUE_DB_AUTH_FAILED]"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("PGPASSWORD") && out.stderr.contains(".pgpass"),
        "{}",
        out.stderr
    );

    // A wrong PGPASSWORD: refused, said where it came from, not printed.
    let out = baton(
        &["queue", "init", "--db", &url, "--json"],
        &[("PGPASSWORD", "wrong-secret-42")],
        home.path(),
    );
    assert_eq!(out.code, 1, "{}", out.all());
    let j = out.json();
    assert_eq!(j["error"]["code"], "QUEUE_DB_AUTH_FAILED");
    assert!(
        j["error"]["hint"].as_str().unwrap().contains("PGPASSWORD"),
        "{j}"
    );
    assert!(!out.all().contains("wrong-secret-42"), "{}", out.all());

    // PGPASSWORD.
    let out = baton(
        &["queue", "init", "--db", &url],
        &[("PGPASSWORD", &secret)],
        home.path(),
    );
    assert_eq!(out.code, 0, "{}", out.all());
    hidden(&out);

    // ~/.pgpass (HOME), mode 0600.
    let pgpass = home.path().join(".pgpass");
    std::fs::write(
        &pgpass,
        format!("127.0.0.1:{}:postgres:baton:{secret}\n", pg.port()),
    )
    .unwrap();
    std::fs::set_permissions(&pgpass, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let out = baton(
        &["queue", "status", "--db", &url, "--json"],
        &[],
        home.path(),
    );
    assert_eq!(out.code, 0, "{}", out.all());
    hidden(&out);
    // Readable by others: ignored, with a warning (as libpq does).
    std::fs::set_permissions(&pgpass, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = baton(&["queue", "status", "--db", &url], &[], home.path());
    assert_eq!(out.code, 1, "{}", out.all());
    assert!(
        out.stderr.contains("warning:") && out.stderr.contains("0600"),
        "{}",
        out.stderr
    );
    std::fs::remove_file(&pgpass).unwrap();

    // --db-env: a URL with its password in a variable; JSON and text never show it.
    let with_pw = format!(
        "postgresql://baton:{secret}@127.0.0.1:{}/postgres",
        pg.port()
    );
    for args in [
        &["queue", "status", "--db-env", "QUEUE_DB", "--json"][..],
        &["queue", "status", "--db-env", "QUEUE_DB"][..],
        &["queue", "init", "--db-env", "QUEUE_DB", "--json"][..],
        &["queue", "cancel", "1", "--db-env", "QUEUE_DB", "--json"][..],
    ] {
        let out = baton(args, &[("QUEUE_DB", &with_pw)], home.path());
        hidden(&out);
        assert!(
            out.all().contains(&format!(
                "postgresql://baton@127.0.0.1:{}/postgres",
                pg.port()
            )) || out.all().contains("QUEUE_UNIT_NOT_FOUND"),
            "{args:?}: {}",
            out.all()
        );
    }
    let out = baton(
        &["queue", "status", "--db-env", "QUEUE_DB"],
        &[],
        home.path(),
    );
    assert_eq!(out.code, 2, "{}", out.all());
    assert!(
        out.stderr.contains("error[QUEUE_DB_ENV_MISSING]"),
        "{}",
        out.stderr
    );

    // The password on the command line, in errors too.
    let out = baton(
        &["queue", "cancel", "9", "--db", &with_pw],
        &[],
        home.path(),
    );
    assert_eq!(out.code, 1, "{}", out.all());
    hidden(&out);
    let bad = format!("postgresql://baton:{secret}@127.0.0.1:notaport/postgres");
    let out = baton(
        &["queue", "status", "--db", &bad, "--json"],
        &[],
        home.path(),
    );
    assert_eq!(out.code, 2, "{}", out.all());
    assert_eq!(out.json()["error"]["code"], "QUEUE_DB_URL_INVALID");
    hidden(&out);

    // --db and --db-env together, or neither: a usage error.
    let out = baton(
        &["queue", "status", "--db", &url, "--db-env", "X"],
        &[],
        home.path(),
    );
    assert_eq!(out.code, 2, "{}", out.all());
    let out = baton(&["queue", "status"], &[], home.path());
    assert_eq!(out.code, 2, "{}", out.all());
}

#[test]
fn queue_unreachable_server_is_named_within_two_seconds() {
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgresql://baton:s3cr3t-pw@127.0.0.1:{port}/queue");
    let started = Instant::now();
    let out = baton(&["queue", "status", "--db", &url], &[], home.path());
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_eq!(out.code, 1, "{}", out.all());
    assert!(
        out.stderr.contains("error[QUEUE_DB_UNREACHABLE]"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--db"), "{}", out.stderr);
    assert!(!out.all().contains("s3cr3t-pw"), "{}", out.all());

    let out = baton(
        &["queue", "status", "--db-env", "QUEUE_DB", "--json"],
        &[("QUEUE_DB", &url)],
        home.path(),
    );
    let j = out.json();
    assert_eq!(j["error"]["code"], "QUEUE_DB_UNREACHABLE");
    assert!(
        j["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("--db-env QUEUE_DB"),
        "{j}"
    );
    assert!(!out.all().contains("s3cr3t-pw"), "{}", out.all());
}
