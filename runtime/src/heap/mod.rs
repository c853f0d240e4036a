//! The symmetric heap.

pub mod allocator;
