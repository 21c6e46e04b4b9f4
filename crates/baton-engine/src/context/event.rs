//! What the context management reports having done.

use super::plan::Report;

/// Something the context management did, for the audit log and the progress display.
#[derive(Debug, Clone, PartialEq)]
pub enum ContextEvent {
    Compressed(Report),
    /// A compressed window broke the tool protocol; the uncompressed one was used.
    ProtocolFallback {
        violation: String,
    },
}
