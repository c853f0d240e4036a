//! The host backend: memfd chunks in host memory.
