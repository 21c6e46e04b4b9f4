//! baton's private data store: where it lives, how files are written durably, and the installed
//! package cache. Runs and projects join in later.

pub mod durable;
pub mod home;
pub mod packages;
pub mod time;

pub use home::{StoreError, resolve_home};
pub use packages::{InstallOutcome, InstalledPackage, PackageStore};
