//! Where the queue's database is and how to log in: the URL (from `--db` or an environment
//! variable named by `--db-env`), the password (URL, `PGPASSWORD`, then the password file as
//! libpq reads it), TLS with rustls, and a redacted form of the URL for every message.
//!
//! The password is never part of anything this module prints or returns as text.

use crate::error::{PasswordSource, QueueError, UrlSource, chain, is_io};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::error::SqlState;

/// The connect timeout when the URL sets none.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Debian's (and libpq's usual) socket directory, used when the URL names no host.
const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// A database to connect to, with its password resolved.
#[derive(Clone)]
pub struct DbConfig {
    pg: tokio_postgres::Config,
    source: UrlSource,
    password: PasswordSource,
    root_cert: Option<PathBuf>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for DbConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbConfig")
            .field("url", &self.redacted())
            .field("source", &self.source)
            .field("password", &self.password)
            .finish()
    }
}

/// The environment a [`DbConfig`] reads: variables and the home directory. Tests give their own.
pub trait Environment {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process's environment.
pub struct ProcessEnv;

impl Environment for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl DbConfig {
    /// The URL given with `--db` (or by a caller), password resolved from the process's
    /// environment.
    pub fn from_url(url: &str, source: UrlSource) -> Result<DbConfig, QueueError> {
        DbConfig::from_url_in(url, source, &ProcessEnv)
    }

    /// The URL held by the environment variable `name` (`--db-env NAME`).
    pub fn from_env(name: &str) -> Result<DbConfig, QueueError> {
        DbConfig::from_env_in(name, &ProcessEnv)
    }

    /// [`DbConfig::from_env`] in a given environment.
    pub fn from_env_in(name: &str, env: &dyn Environment) -> Result<DbConfig, QueueError> {
        match env.var(name) {
            Some(url) if !url.trim().is_empty() => {
                DbConfig::from_url_in(url.trim(), UrlSource::Env(name.to_string()), env)
            }
            _ => Err(QueueError::EnvMissing {
                name: name.to_string(),
            }),
        }
    }

    /// [`DbConfig::from_url`] in a given environment.
    pub fn from_url_in(
        url: &str,
        source: UrlSource,
        env: &dyn Environment,
    ) -> Result<DbConfig, QueueError> {
        let (url, url_root_cert) = libpq_params(url);
        let mut pg: tokio_postgres::Config =
            url.parse()
                .map_err(|e: tokio_postgres::Error| QueueError::UrlInvalid {
                    source_setting: source.clone(),
                    reason: chain(&e),
                })?;
        if pg.get_hosts().is_empty() && pg.get_hostaddrs().is_empty() {
            if Path::new(DEFAULT_SOCKET_DIR).is_dir() {
                pg.host_path(DEFAULT_SOCKET_DIR);
            } else {
                pg.host("localhost");
            }
        }
        if pg.get_user().is_none()
            && let Some(user) = env.var("USER").or_else(|| env.var("LOGNAME"))
        {
            pg.user(&user);
        }
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if pg.get_application_name().is_none() {
            pg.application_name("baton");
        }
        let mut warnings = Vec::new();
        let password = if pg.get_password().is_some() {
            PasswordSource::Url
        } else if let Some(pw) = env.var("PGPASSWORD").filter(|p| !p.is_empty()) {
            pg.password(pw);
            PasswordSource::Env
        } else {
            match pass_file(env) {
                Some(path) => match read_pass_file(&path) {
                    Ok(Some(contents)) => {
                        let (host, port) = first_endpoint(&pg);
                        let user = pg.get_user().unwrap_or("").to_string();
                        let dbname = pg.get_dbname().unwrap_or(&user).to_string();
                        match pgpass_lookup(&contents, &host, port, &dbname, &user) {
                            Some(pw) => {
                                pg.password(pw);
                                PasswordSource::PassFile(path.display().to_string())
                            }
                            None => PasswordSource::None,
                        }
                    }
                    Ok(None) => PasswordSource::None,
                    Err(warning) => {
                        warnings.push(warning);
                        PasswordSource::None
                    }
                },
                None => PasswordSource::None,
            }
        };
        let root_cert = url_root_cert
            .or_else(|| env.var("PGSSLROOTCERT").filter(|p| !p.is_empty()))
            .filter(|p| p != "system")
            .map(PathBuf::from);
        Ok(DbConfig {
            pg,
            source,
            password,
            root_cert,
            warnings,
        })
    }

    /// The URL without its password, for messages: `postgresql://USER@HOST:PORT/DBNAME`.
    pub fn redacted(&self) -> String {
        let user = self.pg.get_user().unwrap_or("");
        let user = if user.is_empty() {
            String::new()
        } else {
            format!("{user}@")
        };
        let dbname = self.pg.get_dbname().unwrap_or("");
        let ports = self.pg.get_ports();
        let port_of = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        let mut tcp = Vec::new();
        let mut sockets = Vec::new();
        for (i, host) in self.pg.get_hosts().iter().enumerate() {
            match host {
                Host::Tcp(h) if h.contains(':') => tcp.push(format!("[{h}]:{}", port_of(i))),
                Host::Tcp(h) => tcp.push(format!("{h}:{}", port_of(i))),
                Host::Unix(p) => sockets.push(p.display().to_string()),
            }
        }
        if sockets.is_empty() {
            format!("postgresql://{user}{}/{dbname}", tcp.join(","))
        } else {
            format!(
                "postgresql://{user}{}/{dbname}?host={}&port={}",
                tcp.join(","),
                sockets.join(","),
                port_of(0)
            )
        }
    }

    /// Where the connection goes, for messages: `HOST:PORT` or the socket file.
    pub fn endpoint(&self) -> String {
        let ports = self.pg.get_ports();
        let port_of = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        self.pg
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| match host {
                Host::Tcp(h) if h.contains(':') => format!("[{h}]:{}", port_of(i)),
                Host::Tcp(h) => format!("{h}:{}", port_of(i)),
                Host::Unix(p) => format!("{}/.s.PGSQL.{}", p.display(), port_of(i)),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The user the connection logs in as.
    pub fn user(&self) -> &str {
        self.pg.get_user().unwrap_or("")
    }

    /// Where the password came from.
    pub fn password_source(&self) -> &PasswordSource {
        &self.password
    }

    /// Where the URL came from.
    pub fn source(&self) -> &UrlSource {
        &self.source
    }

    /// Things worth saying before connecting (a password file ignored for its permissions).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Opens a connection, spawning its driver on the current Tokio runtime.
    pub(crate) async fn connect(&self) -> Result<tokio_postgres::Client, QueueError> {
        let wants_tls = self.pg.get_ssl_mode() != SslMode::Disable
            && self
                .pg
                .get_hosts()
                .iter()
                .any(|h| matches!(h, Host::Tcp(_)));
        if wants_tls {
            let tls = tokio_postgres_rustls::MakeRustlsConnect::new(self.tls_config()?);
            let (client, connection) = self
                .pg
                .connect(tls)
                .await
                .map_err(|e| self.connect_error(e))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok(client)
        } else {
            let (client, connection) = self
                .pg
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| self.connect_error(e))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok(client)
        }
    }

    fn tls_config(&self) -> Result<rustls::ClientConfig, QueueError> {
        // The process may already have one (baton-llm installs the same).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let tls_error = |reason: String| QueueError::Tls {
            endpoint: self.endpoint(),
            reason,
        };
        match &self.root_cert {
            Some(path) => {
                use rustls::pki_types::{CertificateDer, pem::PemObject};
                let mut roots = rustls::RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| tls_error(format!("root certificate {}: {e}", path.display())))?;
                for cert in certs {
                    let cert = cert.map_err(|e| {
                        tls_error(format!("root certificate {}: {e}", path.display()))
                    })?;
                    roots.add(cert).map_err(|e| {
                        tls_error(format!("root certificate {}: {e}", path.display()))
                    })?;
                }
                if roots.is_empty() {
                    return Err(tls_error(format!(
                        "root certificate file {} holds no certificate",
                        path.display()
                    )));
                }
                Ok(rustls::ClientConfig::builder()
                    .with_root_certificates(roots)
                    .with_no_client_auth())
            }
            None => {
                use rustls_platform_verifier::ConfigVerifierExt;
                rustls::ClientConfig::with_platform_verifier()
                    .map_err(|e| tls_error(format!("the system's certificate store: {e}")))
            }
        }
    }

    fn connect_error(&self, e: tokio_postgres::Error) -> QueueError {
        if let Some(db) = e.as_db_error() {
            let code = db.code();
            if *code == SqlState::INVALID_PASSWORD
                || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            {
                return QueueError::AuthFailed {
                    endpoint: self.endpoint(),
                    user: self.user().to_string(),
                    password: self.password.clone(),
                    reason: db.message().to_string(),
                };
            }
            if *code == SqlState::INVALID_CATALOG_NAME {
                return QueueError::DatabaseMissing {
                    endpoint: self.endpoint(),
                    dbname: self.pg.get_dbname().unwrap_or(self.user()).to_string(),
                };
            }
            return QueueError::Db {
                message: db.message().to_string(),
                sqlstate: Some(code.code().to_string()),
            };
        }
        let text = chain(&e);
        if text.contains("password missing") {
            return QueueError::AuthFailed {
                endpoint: self.endpoint(),
                user: self.user().to_string(),
                password: self.password.clone(),
                reason: "the server asks for a password".into(),
            };
        }
        if text.contains("TLS") || text.contains("certificate") {
            return QueueError::Tls {
                endpoint: self.endpoint(),
                reason: text,
            };
        }
        if is_io(&e) {
            return QueueError::Unreachable {
                endpoint: self.endpoint(),
                source_setting: self.source.clone(),
                reason: text,
            };
        }
        QueueError::Db {
            message: text,
            sqlstate: None,
        }
    }
}

/// Takes out of a URL's query the libpq settings tokio-postgres does not know: `sslrootcert`
/// (returned) and `sslmode=verify-ca|verify-full` (certificates are always verified here, so
/// they mean `require`). Other forms pass unchanged.
fn libpq_params(url: &str) -> (String, Option<String>) {
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let Some((base, query)) = url.split_once('?').filter(|_| is_url) else {
        return (url.to_string(), None);
    };
    let mut root_cert = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslrootcert", value)) => root_cert = Some(percent_decode(value)),
            Some(("sslmode", "verify-ca" | "verify-full")) => kept.push("sslmode=require"),
            _ => kept.push(pair),
        }
    }
    if kept.is_empty() {
        (base.to_string(), root_cert)
    } else {
        (format!("{base}?{}", kept.join("&")), root_cert)
    }
}

fn percent_decode(text: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(Some(h)), Some(Some(l))) = (
                bytes.get(i + 1).map(|b| hex(*b)),
                bytes.get(i + 2).map(|b| hex(*b)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The host and port the password file is matched against (the first host; a socket in the
/// default directory counts as `localhost`, as libpq has it).
fn first_endpoint(pg: &tokio_postgres::Config) -> (String, u16) {
    let port = pg.get_ports().first().copied().unwrap_or(5432);
    let host = match pg.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) if p == Path::new(DEFAULT_SOCKET_DIR) || p == Path::new("/tmp") => {
            "localhost".to_string()
        }
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    (host, port)
}

/// `PGPASSFILE`, else `~/.pgpass`.
fn pass_file(env: &dyn Environment) -> Option<PathBuf> {
    if let Some(path) = env.var("PGPASSFILE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    env.var("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| Path::new(&home).join(".pgpass"))
}

/// The password file's text; `Ok(None)` when there is none; `Err(warning)` when it is ignored
/// because others may read it (as libpq does).
fn read_pass_file(path: &Path) -> Result<Option<String>, String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Ok(None);
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "password file {} is ignored: it has group or world access (chmod 0600 it)",
            path.display()
        ));
    }
    // A password file is small; read no more than 1 MiB of it.
    use std::io::Read;
    let mut text = String::new();
    match std::fs::File::open(path) {
        Ok(f) => match f.take(1 << 20).read_to_string(&mut text) {
            Ok(_) => Ok(Some(text)),
            Err(e) => Err(format!("password file {} unreadable: {e}", path.display())),
        },
        Err(e) => Err(format!("password file {} unreadable: {e}", path.display())),
    }
}

/// The password of the first line of a `.pgpass` text matching `host:port:dbname:user`
/// (`*` matches anything; `\:` and `\\` are a colon and a backslash).
pub fn pgpass_lookup(
    contents: &str,
    host: &str,
    port: u16,
    dbname: &str,
    user: &str,
) -> Option<String> {
    let port = port.to_string();
    let wanted = [host, port.as_str(), dbname, user];
    for line in contents.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields = split_pgpass(line);
        if fields.len() < 5 {
            continue;
        }
        if fields[..4]
            .iter()
            .zip(wanted)
            .all(|(field, want)| field == "*" || field == want)
        {
            return Some(fields[4..].join(":"));
        }
    }
    None
}

/// Splits a `.pgpass` line at unescaped colons, unescaping `\x` to `x`.
fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next()
                    && let Some(last) = fields.last_mut()
                {
                    last.push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(last) = fields.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::collections::HashMap;

    struct Env(HashMap<&'static str, String>);
    impl Environment for Env {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).cloned()
        }
    }

    fn env(pairs: &[(&'static str, &str)]) -> Env {
        Env(pairs.iter().map(|(k, v)| (*k, v.to_string())).collect())
    }

    #[test]
    fn pgpass_matches_first_line_with_wildcards_and_escapes() {
        let text = "# comment\n\
                    db.example:5432:other:alice:nope\n\
                    db.example:5432:*:alice:se\\:cret\\\\x\n\
                    *:*:*:*:fallback\n";
        assert_eq!(
            pgpass_lookup(text, "db.example", 5432, "queue", "alice").as_deref(),
            Some("se:cret\\x")
        );
        assert_eq!(
            pgpass_lookup(text, "db.example", 5432, "other", "alice").as_deref(),
            Some("nope")
        );
        assert_eq!(
            pgpass_lookup(text, "elsewhere", 1, "x", "bob").as_deref(),
            Some("fallback")
        );
        assert_eq!(pgpass_lookup("a:1:b:c\n", "a", 1, "b", "c"), None);
        // An unescaped colon inside the password field is kept.
        assert_eq!(
            pgpass_lookup("h:5432:d:u:a:b\n", "h", 5432, "d", "u").as_deref(),
            Some("a:b")
        );
    }

    #[test]
    fn password_order_url_then_pgpassword_then_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "h:5432:d:u:from-file\n").unwrap();
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let file_s = file.display().to_string();
        let url = "postgresql://u@h:5432/d";

        let c =
            DbConfig::from_url_in(url, UrlSource::Flag, &env(&[("PGPASSFILE", &file_s)])).unwrap();
        assert_eq!(
            c.password_source(),
            &PasswordSource::PassFile(file_s.clone())
        );

        let c = DbConfig::from_url_in(
            url,
            UrlSource::Flag,
            &env(&[("PGPASSFILE", &file_s), ("PGPASSWORD", "env-pw")]),
        )
        .unwrap();
        assert_eq!(c.password_source(), &PasswordSource::Env);

        let c = DbConfig::from_url_in(
            "postgresql://u:url-pw@h:5432/d",
            UrlSource::Flag,
            &env(&[("PGPASSWORD", "env-pw")]),
        )
        .unwrap();
        assert_eq!(c.password_source(), &PasswordSource::Url);
        assert!(!c.redacted().contains("url-pw"));
        assert!(!format!("{c:?}").contains("url-pw"));

        // A file others can read is ignored, with a warning.
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let c =
            DbConfig::from_url_in(url, UrlSource::Flag, &env(&[("PGPASSFILE", &file_s)])).unwrap();
        assert_eq!(c.password_source(), &PasswordSource::None);
        assert!(c.warnings()[0].contains("0600"), "{:?}", c.warnings());
    }

    #[test]
    fn redacted_and_endpoint_forms() {
        let e = env(&[]);
        let c = DbConfig::from_url_in(
            "postgresql://ann:secret@db.internal:6543/work?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
            UrlSource::Flag,
            &e,
        )
        .unwrap();
        assert_eq!(c.redacted(), "postgresql://ann@db.internal:6543/work");
        assert_eq!(c.endpoint(), "db.internal:6543");
        assert_eq!(c.root_cert.as_deref(), Some(Path::new("/etc/ca.pem")));
        assert_eq!(c.pg.get_ssl_mode(), SslMode::Require);

        let c = DbConfig::from_url_in(
            "postgresql://ann@/work?host=/tmp/sock&port=7000",
            UrlSource::Flag,
            &e,
        )
        .unwrap();
        assert_eq!(
            c.redacted(),
            "postgresql://ann@/work?host=/tmp/sock&port=7000"
        );
        assert_eq!(c.endpoint(), "/tmp/sock/.s.PGSQL.7000");
    }

    #[test]
    fn bad_url_never_echoes_it() {
        let err = DbConfig::from_url_in(
            "postgresql://ann:hunter2@h:notaport/db",
            UrlSource::Flag,
            &env(&[]),
        )
        .unwrap_err();
        assert_eq!(err.code(), "QUEUE_DB_URL_INVALID");
        assert!(!err.to_string().contains("hunter2"), "{err}");

        let err = DbConfig::from_env_in("NOPE", &env(&[])).unwrap_err();
        assert_eq!(err.code(), "QUEUE_DB_ENV_MISSING");
    }
}
