//! The queue's schema: embedded, versioned migrations in the `baton` PostgreSQL schema, applied
//! by `init` in one transaction under an advisory lock, and recorded in `baton.schema_version`.

use crate::error::{QueueError, db_error};
use serde::Serialize;

/// One migration: applied once, in order, recorded with its version.
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration this baton knows, oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "work units, packages, workers, unit writes",
        sql: include_str!("../migrations/0001_work_queue.sql"),
    },
    Migration {
        version: 2,
        name: "epic leases, story units by epic",
        sql: include_str!("../migrations/0002_epics.sql"),
    },
    Migration {
        version: 3,
        name: "traces pinned by content, stopped workers kept",
        sql: include_str!("../migrations/0003_traces_stopped_workers.sql"),
    },
];

/// The schema version this baton needs.
pub const SCHEMA_VERSION: i32 = 3;

/// Any fixed number: concurrent inits take turns on it.
const INIT_LOCK: i64 = 0x6261_746f_6e71; // "batonq"

/// What `init` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitReport {
    /// The database, without its password.
    pub database: String,
    /// The version found before (0: no queue yet).
    pub from_version: i32,
    /// The version now.
    pub version: i32,
    /// The migrations applied by this call (empty: already up to date).
    pub applied: Vec<AppliedMigration>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AppliedMigration {
    pub version: i32,
    pub name: String,
}

/// Creates or upgrades the schema. Idempotent: a second call applies nothing.
pub(crate) async fn init(
    client: &mut tokio_postgres::Client,
    database: &str,
) -> Result<InitReport, QueueError> {
    let err = |e| db_error(e, database);
    let tx = client.transaction().await.map_err(err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&INIT_LOCK])
        .await
        .map_err(err)?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS baton;
         CREATE TABLE IF NOT EXISTS baton.schema_version (
             version     integer PRIMARY KEY,
             name        text NOT NULL,
             applied_at  timestamptz NOT NULL DEFAULT now(),
             applied_by  text NOT NULL
         );",
    )
    .await
    .map_err(err)?;
    let row = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM baton.schema_version",
            &[],
        )
        .await
        .map_err(err)?;
    let from: i32 = row.get(0);
    if from > SCHEMA_VERSION {
        return Err(QueueError::SchemaNewer {
            database: database.to_string(),
            found: from,
            known: SCHEMA_VERSION,
        });
    }
    let by = format!("baton {}", env!("CARGO_PKG_VERSION"));
    let mut applied = Vec::new();
    for m in MIGRATIONS.iter().filter(|m| m.version > from) {
        tx.batch_execute(m.sql).await.map_err(err)?;
        tx.execute(
            "INSERT INTO baton.schema_version (version, name, applied_by) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &by],
        )
        .await
        .map_err(err)?;
        applied.push(AppliedMigration {
            version: m.version,
            name: m.name.to_string(),
        });
    }
    tx.commit().await.map_err(err)?;
    Ok(InitReport {
        database: database.to_string(),
        from_version: from,
        version: SCHEMA_VERSION,
        applied,
    })
}

/// The schema's version, checked against this baton's: missing, older and newer are errors.
pub(crate) async fn check(
    client: &tokio_postgres::Client,
    database: &str,
) -> Result<i32, QueueError> {
    let row = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM baton.schema_version",
            &[],
        )
        .await
        .map_err(|e| db_error(e, database))?;
    let found: i32 = row.get(0);
    match found {
        0 => Err(QueueError::SchemaMissing {
            database: database.to_string(),
        }),
        v if v < SCHEMA_VERSION => Err(QueueError::SchemaOutdated {
            database: database.to_string(),
            found: v,
            needed: SCHEMA_VERSION,
        }),
        v if v > SCHEMA_VERSION => Err(QueueError::SchemaNewer {
            database: database.to_string(),
            found: v,
            known: SCHEMA_VERSION,
        }),
        v => Ok(v),
    }
}
