//! baton's private data store: where it lives, durable writes and locks, installed packages,
//! projects, runs, the run state document and its transition guard, and JSONL logs.
//!
//! Nothing here knows about models or tools.

pub mod apart;
pub mod driver_lock;
pub mod durable;
pub mod guard;
pub mod home;
pub mod jsonl;
pub mod next_step;
pub mod package_lookup;
pub mod packages;
pub mod project_root;
pub mod projects;
pub mod reindex;
pub mod run_error;
pub mod run_gc;
pub mod run_meta;
pub mod runs;
pub mod runs_index;
pub mod state;
pub mod state_file;
pub mod task_run;
pub mod terminal;
pub mod time;

pub use driver_lock::{DriverLock, DriverLockError, Holder};
pub use guard::GuardOptions;
pub use home::{StoreError, resolve_home};
pub use packages::{InstallOutcome, InstalledPackage, PackageStore};
pub use projects::{Project, ProjectRecord, ProjectScan, Store, StoreListing};
pub use reindex::ReindexReport;
pub use run_error::RunError;
pub use run_gc::GarbageReport;
pub use run_meta::{BUDGET_EXCEEDED, ContextPolicy, MODEL_UNREACHABLE, ModelRecord, RunUsage};
pub use runs::{Durability, NewRun, Phase, RunKind, RunListing, RunMetadata, RunPaths};
pub use runs_index::StoreWarning;
pub use state::{NodeProgress, NodeStatus, StateCode, StateDoc, StateError, UpdateSummary};
pub use state_file::{StateFile, StateFileError, StateRead, StateWrite};
pub use task_run::NewTaskRun;
