//! The runtime: init / finalize and the host API.
