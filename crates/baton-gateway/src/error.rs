//! How starting a gateway fails, each with a code and a hint.

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The listener handed over cannot be served (no address, not usable by tokio).
    #[error("the gateway cannot serve its listener: {0}")]
    Listener(std::io::Error),
    /// The record to replay cannot be read, or a line of it is not an exchange.
    #[error("the gateway's record {path} cannot be replayed: {message}")]
    Record { path: String, message: String },
    /// The record to write cannot be opened for appending.
    #[error("the gateway cannot append to its record {path}: {source}")]
    RecordWrite {
        path: String,
        source: std::io::Error,
    },
    /// The configuration cannot work (an empty token, a base URL that is not http(s)).
    #[error("{0}")]
    Config(String),
    /// The HTTP client for the upstream cannot be built.
    #[error("the gateway cannot build its HTTP client: {0}")]
    Client(String),
}

impl GatewayError {
    pub fn code(&self) -> &'static str {
        match self {
            GatewayError::Listener(_) => "GATEWAY_LISTENER",
            GatewayError::Record { .. } => "GATEWAY_RECORD_UNREADABLE",
            GatewayError::RecordWrite { .. } => "GATEWAY_RECORD_UNWRITABLE",
            GatewayError::Config(_) => "GATEWAY_CONFIG",
            GatewayError::Client(_) => "GATEWAY_CLIENT",
        }
    }

    pub fn hint(&self) -> &'static str {
        match self {
            GatewayError::Listener(_) => {
                "bind the listener to 127.0.0.1 before starting the gateway"
            }
            GatewayError::Record { .. } => {
                "replay a record written by a live run of the same phase (one JSON exchange per line)"
            }
            GatewayError::RecordWrite { .. } => {
                "check the permissions and free space of the run's folder"
            }
            GatewayError::Config(_) => {
                "give a non-empty per-run token and an http(s) upstream base URL ([executors.<name>] upstream)"
            }
            GatewayError::Client(_) => "check the system's TLS set-up",
        }
    }
}
