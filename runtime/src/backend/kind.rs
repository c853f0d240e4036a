//! Which backend a runtime runs on, by name (`RSHMEM_BACKEND`, `init(backend=...)`).
//! [`BackendKind::choose`], which probes for a GPU, is `mod.rs`'s: it names the backends.

use crate::error::Result;

/// Which backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Host memory (memfd).
    Host,
    /// GPU memory through the CUDA driver.
    Cuda,
}

impl BackendKind {
    /// The name used by `RSHMEM_BACKEND` and `init(backend=...)`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Host => "host",
            BackendKind::Cuda => "cuda",
        }
    }

    /// Parses `"host"` / `"cuda"`.
    ///
    /// # Errors
    /// [`crate::Error::Config`] listing the allowed values.
    pub fn parse(name: &str) -> Result<BackendKind> {
        match name {
            "host" => Ok(BackendKind::Host),
            "cuda" => Ok(BackendKind::Cuda),
            other => Err(crate::Error::Config {
                var: "backend",
                value: other.to_string(),
                reason: "allowed values are `cuda` and `host`".into(),
            }),
        }
    }
}
