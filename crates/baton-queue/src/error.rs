//! The queue's errors: a stable code each, a message that names what failed (never a
//! password), and a hint saying what to do.

use std::error::Error as _;
use tokio_postgres::error::SqlState;

/// Where the database URL came from, so a message can name the setting to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlSource {
    /// `--db URL`.
    Flag,
    /// `--db-env NAME`: the environment variable holding the URL.
    Env(String),
    /// A caller of the library.
    Given,
}

impl std::fmt::Display for UrlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UrlSource::Flag => write!(f, "--db"),
            UrlSource::Env(name) => write!(f, "--db-env {name} (the URL in ${name})"),
            UrlSource::Given => write!(f, "the database URL"),
        }
    }
}

/// Where the password of a connection came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordSource {
    /// In the URL itself.
    Url,
    /// `PGPASSWORD`.
    Env,
    /// A line of the password file (`PGPASSFILE` or `~/.pgpass`).
    PassFile(String),
    /// None found.
    None,
}

impl std::fmt::Display for PasswordSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PasswordSource::Url => write!(f, "the URL"),
            PasswordSource::Env => write!(f, "PGPASSWORD"),
            PasswordSource::PassFile(path) => write!(f, "{path}"),
            PasswordSource::None => write!(f, "nowhere (no password given)"),
        }
    }
}

/// Everything that can go wrong talking to the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("the database URL from {source_setting} cannot be read: {reason}")]
    UrlInvalid {
        source_setting: UrlSource,
        reason: String,
    },
    #[error("environment variable {name} (named by --db-env) is not set or empty")]
    EnvMissing { name: String },
    #[error("cannot reach PostgreSQL at {endpoint}: {reason}")]
    Unreachable {
        endpoint: String,
        source_setting: UrlSource,
        reason: String,
    },
    #[error("PostgreSQL at {endpoint} refused user {user:?}: {reason}")]
    AuthFailed {
        endpoint: String,
        user: String,
        password: PasswordSource,
        reason: String,
    },
    #[error("TLS with PostgreSQL at {endpoint} failed: {reason}")]
    Tls { endpoint: String, reason: String },
    #[error("database {dbname:?} does not exist on {endpoint}")]
    DatabaseMissing { endpoint: String, dbname: String },
    #[error("database {database} has no baton queue (schema `baton` not found)")]
    SchemaMissing { database: String },
    #[error(
        "the queue in {database} has schema version {found}, newer than this baton knows ({known})"
    )]
    SchemaNewer {
        database: String,
        found: i32,
        known: i32,
    },
    #[error("the queue in {database} has schema version {found}; this baton needs {needed}")]
    SchemaOutdated {
        database: String,
        found: i32,
        needed: i32,
    },
    #[error("no work unit {id} in the queue")]
    UnitNotFound { id: i64 },
    #[error("work unit {id} is already {state}")]
    UnitFinished { id: i64, state: String },
    #[error("work unit {id} is {state}, not {expected}")]
    UnitState {
        id: i64,
        state: String,
        expected: String,
    },
    #[error("lease lost on work unit {id} (epoch {epoch}, owner {owner}): {reason}")]
    LeaseLost {
        id: i64,
        epoch: i64,
        owner: String,
        reason: String,
    },
    #[error("{0}")]
    InvalidInput(String),
    #[error("PostgreSQL: {message}")]
    Db {
        message: String,
        sqlstate: Option<String>,
    },
}

impl QueueError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            QueueError::UrlInvalid { .. } => "QUEUE_DB_URL_INVALID",
            QueueError::EnvMissing { .. } => "QUEUE_DB_ENV_MISSING",
            QueueError::Unreachable { .. } => "QUEUE_DB_UNREACHABLE",
            QueueError::AuthFailed { .. } => "QUEUE_DB_AUTH_FAILED",
            QueueError::Tls { .. } => "QUEUE_DB_TLS_FAILED",
            QueueError::DatabaseMissing { .. } => "QUEUE_DB_MISSING",
            QueueError::SchemaMissing { .. } => "QUEUE_SCHEMA_MISSING",
            QueueError::SchemaNewer { .. } => "QUEUE_SCHEMA_NEWER",
            QueueError::SchemaOutdated { .. } => "QUEUE_SCHEMA_OUTDATED",
            QueueError::UnitNotFound { .. } => "QUEUE_UNIT_NOT_FOUND",
            QueueError::UnitFinished { .. } => "QUEUE_UNIT_FINISHED",
            QueueError::UnitState { .. } => "QUEUE_UNIT_STATE",
            QueueError::LeaseLost { .. } => "LEASE_LOST",
            QueueError::InvalidInput(_) => "QUEUE_INVALID_INPUT",
            QueueError::Db { .. } => "QUEUE_DB_FAILED",
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            QueueError::UrlInvalid { .. } => "write it as postgresql://USER@HOST:PORT/DBNAME \
                (a socket directory as ?host=/path); leave the password out and put it in \
                PGPASSWORD or ~/.pgpass"
                .into(),
            QueueError::EnvMissing { name } => {
                format!("export {name}=postgresql://USER@HOST:PORT/DBNAME, or pass --db URL")
            }
            QueueError::Unreachable {
                endpoint,
                source_setting,
                ..
            } => format!(
                "is PostgreSQL running and listening on {endpoint}? The host and port come from \
                 {source_setting}; check them, and the server's listen_addresses and pg_hba.conf"
            ),
            QueueError::AuthFailed { password, .. } => match password {
                PasswordSource::None => "no password was found: set PGPASSWORD, add a line \
                    HOST:PORT:DBNAME:USER:PASSWORD to ~/.pgpass (mode 0600), or put the URL with \
                    its password in an environment variable named by --db-env"
                    .into(),
                other => format!(
                    "the password came from {other}; check it and the user name (and pg_hba.conf \
                     on the server)"
                ),
            },
            QueueError::Tls { .. } => "the server's certificate must be trusted by this \
                machine's certificate store or by the PEM file in PGSSLROOTCERT (or \
                ?sslrootcert=PATH); ?sslmode=disable turns TLS off on a trusted network"
                .into(),
            QueueError::DatabaseMissing { dbname, .. } => {
                format!("create it first (createdb {dbname}), or name another database in the URL")
            }
            QueueError::SchemaMissing { .. } => {
                "run `baton queue init --db URL` once to create the queue's tables".into()
            }
            QueueError::SchemaNewer { .. } => {
                "a newer baton initialised this queue: use that version (or newer) here".into()
            }
            QueueError::SchemaOutdated { .. } => {
                "run `baton queue init --db URL` to bring the queue's schema up to date".into()
            }
            QueueError::UnitNotFound { .. } => "`baton queue status` lists the units".into(),
            QueueError::UnitFinished { .. } => return None,
            QueueError::UnitState { .. } => return None,
            QueueError::LeaseLost { .. } => "another worker holds this unit now, or it was \
                cancelled: stop without writing anything more"
                .into(),
            QueueError::InvalidInput(_) => return None,
            QueueError::Db { sqlstate, .. } => match sqlstate.as_deref() {
                Some("42501") => "the database user lacks a privilege it needs (CREATE on the \
                    database for init; read and write on schema baton otherwise)"
                    .into(),
                _ => return None,
            },
        })
    }

    /// Whether the error means the caller's lease is gone.
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, QueueError::LeaseLost { .. })
    }
}

/// Describes an error of an operation on an open connection. A missing `baton` schema or table
/// means the queue was never initialised.
pub(crate) fn db_error(e: tokio_postgres::Error, database: &str) -> QueueError {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::UNDEFINED_TABLE || *code == SqlState::INVALID_SCHEMA_NAME {
            return QueueError::SchemaMissing {
                database: database.to_string(),
            };
        }
        return QueueError::Db {
            message: db.message().to_string(),
            sqlstate: Some(code.code().to_string()),
        };
    }
    QueueError::Db {
        message: chain(&e),
        sqlstate: None,
    }
}

/// The error and its causes, each once.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Whether a connection error came from the socket (refused, unreachable, timed out).
pub(crate) fn is_io(e: &tokio_postgres::Error) -> bool {
    let mut cause = e.source();
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>().is_some() {
            return true;
        }
        cause = c.source();
    }
    e.to_string().contains("timeout") || e.to_string().contains("connecting to server")
}
