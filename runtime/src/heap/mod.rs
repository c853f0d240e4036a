//! The symmetric heap.
