//! The tokio runtime a command drives its work on.

/// Two threads: `block_on` drives the run on this one while the signal watcher runs on the
/// worker, even when this thread waits at a prompt.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?)
}
