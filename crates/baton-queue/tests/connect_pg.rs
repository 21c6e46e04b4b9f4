//! Connecting to a real throwaway PostgreSQL: passwords from PGPASSWORD and the password file
//! over TCP (SCRAM), the errors for a wrong or missing password, an unreachable server and a
//! missing database, and TLS with a test CA. No message ever holds the password.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use baton_queue::{DbConfig, Environment, PasswordSource, Queue, QueueError, UrlSource, init};
use baton_testkit::pg::{PgOptions, postgres_or_skip, postgres_or_skip_with};
use std::collections::HashMap;
use std::time::{Duration, Instant};

struct Env(HashMap<String, String>);

impl Environment for Env {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

fn env(pairs: &[(&str, &str)]) -> Env {
    Env(pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

fn full_text(e: &QueueError) -> String {
    format!("{e} {:?} {}", e, e.hint().unwrap_or_default())
}

async fn connect(url: &str, env: &Env) -> Result<Queue, QueueError> {
    let cfg = DbConfig::from_url_in(url, UrlSource::Flag, env)?;
    init(&cfg).await?;
    Queue::open(&cfg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_come_from_pgpassword_or_the_password_file_and_are_never_shown() {
    let Some(pg) =
        postgres_or_skip("passwords_come_from_pgpassword_or_the_password_file_and_are_never_shown")
    else {
        return;
    };
    let url = pg.tcp_url("postgres");
    let secret = pg.password().to_string();

    // No password anywhere: the server asks for one.
    let e = connect(&url, &env(&[])).await.err().unwrap();
    assert_eq!(e.code(), "QUEUE_DB_AUTH_FAILED", "{e}");
    assert!(e.hint().unwrap().contains("PGPASSWORD"), "{:?}", e.hint());

    // A wrong one: refused, and neither password appears.
    let e = connect(&url, &env(&[("PGPASSWORD", "wrong-pw-123")]))
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), "QUEUE_DB_AUTH_FAILED", "{e}");
    let text = full_text(&e);
    assert!(text.contains(&format!("127.0.0.1:{}", pg.port())), "{text}");
    assert!(text.contains("PGPASSWORD"), "{text}");
    assert!(
        !text.contains("wrong-pw-123") && !text.contains(&secret),
        "{text}"
    );

    // PGPASSWORD.
    let q = connect(&url, &env(&[("PGPASSWORD", &secret)]))
        .await
        .unwrap();
    assert!(!q.database().contains(&secret));
    assert_eq!(
        q.database(),
        format!("postgresql://baton@127.0.0.1:{}/postgres", pg.port())
    );

    // The password file, found through HOME; a line for another port does not match.
    let home = tempfile::tempdir().unwrap();
    let pgpass = home.path().join(".pgpass");
    std::fs::write(
        &pgpass,
        format!(
            "127.0.0.1:1:postgres:baton:not-this\n127.0.0.1:{}:*:baton:{secret}\n",
            pg.port()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&pgpass, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let e_home = env(&[("HOME", &home.path().display().to_string())]);
    let cfg = DbConfig::from_url_in(&url, UrlSource::Flag, &e_home).unwrap();
    assert_eq!(
        cfg.password_source(),
        &PasswordSource::PassFile(pgpass.display().to_string())
    );
    connect(&url, &e_home).await.unwrap();

    // A password in the URL works and stays out of every text.
    let with_pw = format!(
        "postgresql://baton:{secret}@127.0.0.1:{}/postgres",
        pg.port()
    );
    let cfg = DbConfig::from_url_in(&with_pw, UrlSource::Flag, &env(&[])).unwrap();
    assert!(!format!("{cfg:?} {}", cfg.redacted()).contains(&secret));
    let q = connect(&with_pw, &env(&[])).await.unwrap();
    let status = serde_json::to_string(&q.status(10).await.unwrap()).unwrap();
    assert!(!status.contains(&secret), "{status}");

    // --db-env: the URL comes from the named variable.
    let cfg = DbConfig::from_env_in("QUEUE_URL", &env(&[("QUEUE_URL", &with_pw)])).unwrap();
    assert_eq!(cfg.source(), &UrlSource::Env("QUEUE_URL".into()));
    Queue::open(&cfg).await.unwrap();

    // A database that does not exist.
    let e = connect(&pg.tcp_url("nosuchdb"), &env(&[("PGPASSWORD", &secret)]))
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), "QUEUE_DB_MISSING", "{e}");
}

#[tokio::test]
async fn an_unreachable_server_is_named_within_two_seconds() {
    // A port nothing listens on (no server needed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgresql://baton:hunter2@127.0.0.1:{port}/postgres");
    let started = Instant::now();
    let e = connect(&url, &env(&[])).await.err().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(e.code(), "QUEUE_DB_UNREACHABLE", "{e}");
    let text = full_text(&e);
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.contains("--db"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");

    // A socket directory with no server.
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "postgresql://baton@/postgres?host={}&port=5999",
        dir.path().display()
    );
    let e = connect(&url, &env(&[])).await.err().unwrap();
    assert_eq!(e.code(), "QUEUE_DB_UNREACHABLE", "{e}");
    assert!(e.to_string().contains(".s.PGSQL.5999"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_used_and_the_servers_certificate_is_verified() {
    let options = PgOptions {
        tls: true,
        ..PgOptions::default()
    };
    let Some(pg) = postgres_or_skip_with(
        "tls_is_used_and_the_servers_certificate_is_verified",
        &options,
    ) else {
        return;
    };
    let secret = pg.password().to_string();
    let ca = pg.ca_cert().display().to_string();
    let url = format!("{}?sslmode=require", pg.tcp_url("postgres"));

    // Trusting the test CA: the connection is encrypted.
    let q = connect(
        &url,
        &env(&[("PGPASSWORD", &secret), ("PGSSLROOTCERT", &ca)]),
    )
    .await
    .unwrap();
    assert_eq!(
        pg.psql(
            "postgres",
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE s.ssl AND a.application_name = 'baton'"
        )
        .unwrap(),
        "1"
    );
    drop(q);
    // The same through the URL (libpq's sslrootcert and verify-full).
    let url_ca = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        pg.tcp_url("postgres"),
        ca.replace('/', "%2F")
    );
    connect(&url_ca, &env(&[("PGPASSWORD", &secret)]))
        .await
        .unwrap();

    // Not trusting it (the system's store): refused, saying it is about TLS.
    let e = connect(&url, &env(&[("PGPASSWORD", &secret)]))
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), "QUEUE_DB_TLS_FAILED", "{e}");
    assert!(e.hint().unwrap().contains("PGSSLROOTCERT"));

    // sslmode=disable: plain TCP.
    let plain = format!("{}?sslmode=disable", pg.tcp_url("postgres"));
    connect(&plain, &env(&[("PGPASSWORD", &secret)]))
        .await
        .unwrap();
}

#[test]
fn a_server_without_tls_is_refused_when_tls_is_required() {
    let Some(pg) = postgres_or_skip("a_server_without_tls_is_refused_when_tls_is_required") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = format!("{}?sslmode=require", pg.tcp_url("postgres"));
    let e = rt
        .block_on(connect(&url, &env(&[("PGPASSWORD", pg.password())])))
        .err()
        .unwrap();
    assert_eq!(e.code(), "QUEUE_DB_TLS_FAILED", "{e}");
}
