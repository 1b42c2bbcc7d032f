//! Why the node model refuses a request; each maps to one gRPC status code.

/// Why a create was refused. `reason()` is the key counted in `creates_rejected`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CreateRejection {
    /// Malformed request (gRPC InvalidArgument).
    #[error("{0}")]
    InvalidArgument(String),
    /// The id is already running or starting on this node (gRPC AlreadyExists).
    #[error("sandbox {0} already exists")]
    AlreadyExists(String),
    /// Running sandboxes reached `max_sandboxes` (gRPC ResourceExhausted).
    #[error("max number of running sandboxes on node reached ({0}), please retry")]
    MaxSandboxes(u32),
    /// Creates in progress reached `max_starting` (gRPC ResourceExhausted). The message
    /// is E2B's, which does not name the limit.
    #[error("too many sandboxes starting on this node, please retry")]
    MaxStarting(u32),
    /// The vCPU would exceed `overcommit * cpu_count` (gRPC ResourceExhausted).
    #[error("not enough vCPU on node: {allocated} allocated + {requested} requested > {capacity} allowed, please retry")]
    Overcommit {
        /// vCPU allocated or reserved by creates in progress.
        allocated: u64,
        /// vCPU of this request.
        requested: u64,
        /// `overcommit * cpu_count`.
        capacity: f64,
    },
    /// An injected `exhaust` fault refuses every create (gRPC ResourceExhausted).
    #[error("node resources exhausted, please retry")]
    Exhausted,
}

impl CreateRejection {
    /// Key under which the rejection is counted.
    pub fn reason(&self) -> &'static str {
        match self {
            CreateRejection::InvalidArgument(_) => "invalid_argument",
            CreateRejection::AlreadyExists(_) => "already_exists",
            CreateRejection::MaxSandboxes(_) => "max_sandboxes",
            CreateRejection::MaxStarting(_) => "max_starting",
            CreateRejection::Overcommit { .. } => "overcommit",
            CreateRejection::Exhausted => "fault_exhaust",
        }
    }

    /// Whether a caller should retry elsewhere later (E2B maps these to ResourceExhausted).
    pub fn is_resource_exhausted(&self) -> bool {
        !matches!(
            self,
            CreateRejection::InvalidArgument(_) | CreateRejection::AlreadyExists(_)
        )
    }
}

/// A sandbox id the node does not hold (gRPC NotFound).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sandbox {0} not found")]
pub struct NotFound(pub String);
