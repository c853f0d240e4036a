//! What the heap needs from the PEs' bootstrap: byte allgathers, a barrier, the node layout and
//! file-descriptor exchange among node-local PEs.
//!
//! A trait rather than the bootstrap type itself so the heap's collective logic can also be
//! tested with PEs as threads of one process (see `heap/tests.rs`).

use crate::error::Result;
use std::os::fd::{BorrowedFd, OwnedFd};

/// Which PEs share this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// PEs on this host, in local-index order.
    pub local_pes: Vec<usize>,
    /// This PE's index in `local_pes`.
    pub local_index: usize,
    /// Host number of every PE.
    pub node_of: Vec<usize>,
}

/// The collective operations of the heap. Every PE calls them in the same order.
pub trait Group {
    /// This PE.
    fn rank(&self) -> usize;
    /// Number of PEs.
    fn nranks(&self) -> usize;
    /// The node layout.
    fn node_view(&self) -> NodeView;
    /// Every PE's `data`, indexed by PE.
    ///
    /// # Errors
    /// When a peer dies or the bootstrap times out.
    fn allgather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Returns once every PE has called it.
    ///
    /// # Errors
    /// As [`Group::allgather`].
    fn barrier(&self) -> Result<()>;
    /// Every node-local PE's descriptor, indexed by local index; this PE's entry is `None`.
    ///
    /// # Errors
    /// As [`Group::allgather`].
    fn allgather_local_fds(&self, fd: BorrowedFd<'_>) -> Result<Vec<Option<OwnedFd>>>;
}

impl Group for crate::bootstrap::Bootstrap {
    fn rank(&self) -> usize {
        crate::bootstrap::Bootstrap::rank(self)
    }
    fn nranks(&self) -> usize {
        crate::bootstrap::Bootstrap::nranks(self)
    }
    fn node_view(&self) -> NodeView {
        let n = self.node();
        NodeView { local_pes: n.local_pes.clone(), local_index: n.local_index, node_of: n.node_of.clone() }
    }
    fn allgather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        crate::bootstrap::Bootstrap::allgather(self, data)
    }
    fn barrier(&self) -> Result<()> {
        crate::bootstrap::Bootstrap::barrier(self)
    }
    fn allgather_local_fds(&self, fd: BorrowedFd<'_>) -> Result<Vec<Option<OwnedFd>>> {
        self.local().allgather_fds(fd)
    }
}
