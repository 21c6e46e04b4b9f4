//! The PostgreSQL work queue's database as the commands name it: `--db`/`--db-env`, the
//! configuration read from them (its warnings said), and a queue error as a [`Failure`].

use crate::exit;
use crate::failure::Failure;
use crate::ui::{Paint, color::err};
use baton_queue::{DbConfig, QueueError, UrlSource};
use clap::Args;

/// Which database: the URL itself, or the environment variable holding it.
#[derive(Debug, Args)]
pub struct DbArgs {
    /// The queue's database, e.g. postgresql://USER@HOST:5432/DBNAME (a socket directory as
    /// ?host=/path). Leave the password out: it comes from PGPASSWORD or ~/.pgpass.
    #[arg(long, value_name = "URL", required_unless_present = "db_env")]
    pub db: Option<String>,
    /// The name of an environment variable holding the URL (which may then carry the
    /// password without showing it on the command line).
    #[arg(long, value_name = "NAME", conflicts_with = "db")]
    pub db_env: Option<String>,
}

pub fn failure(e: &QueueError) -> Failure {
    let code = match e {
        QueueError::UrlInvalid { .. }
        | QueueError::EnvMissing { .. }
        | QueueError::InvalidInput(_) => exit::INVALID,
        _ => exit::FAILURE,
    };
    Failure::new(e.code(), e.to_string(), code).hint(e.hint())
}

/// The database from a URL flag or the environment variable named by `--db-env`, with the
/// URL's warnings (a password in it) printed.
pub fn db_config(url: Option<&str>, env: Option<&str>, flag: &str) -> Result<DbConfig, QueueError> {
    let config = match (url, env) {
        (_, Some(name)) => DbConfig::from_env(name)?,
        (Some(url), None) => DbConfig::from_url(url, UrlSource::Flag)?,
        (None, None) => {
            return Err(QueueError::InvalidInput(format!(
                "give the database with {flag} or --db-env NAME"
            )));
        }
    };
    for w in config.warnings() {
        eprintln!(
            "{} {}",
            err(Paint::Warn, "warning:"),
            crate::ui::visible(&w.to_string())
        );
    }
    Ok(config)
}
