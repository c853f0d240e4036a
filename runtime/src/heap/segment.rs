//! One growth step of the heap: a chunk per node-local PE, each mapped at the same offset of
//! its owner's slot in every process.

use super::agree::all_ok;
use super::group::Group;
use super::layout::Layout;
use crate::backend::{Chunk, Mapping, MemoryBackend};
use crate::error::Result;

/// The chunks and mappings of one growth step, in this process.
///
/// Owns them; fields drop in order, so mappings go before chunks (the order the backend
/// trait asks for).
pub struct Segment {
    /// Heap offset of the segment in every slot.
    pub offset: usize,
    /// Bytes per slot.
    pub len: usize,
    mappings: Vec<Box<dyn Mapping>>,
    chunks: Vec<Box<dyn Chunk>>,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .field("mappings", &self.mappings.len())
            .finish()
    }
}

impl Segment {
    /// Collective over all PEs: every PE creates `len` bytes, maps them at `offset` in its own
    /// slot, and maps each node-local peer's chunk at `offset` in that peer's slot. All PEs
    /// succeed or all fail; on failure nothing new stays mapped.
    ///
    /// # Errors
    /// The first failing PE's error (on every PE), or a bootstrap error.
    pub fn grow(
        backend: &dyn MemoryBackend,
        group: &dyn Group,
        layout: &Layout,
        offset: usize,
        len: usize,
    ) -> Result<Segment> {
        Self::map_with(backend, group, layout, offset, len, "creating a heap chunk", || backend.create_chunk(len))
    }

    /// [`Segment::grow`] with each PE's own chunk from `own` (`what` names that step in the
    /// error every PE gets): a program's buffer adopted by `nvshmemx_buffer_register_symmetric`.
    ///
    /// # Errors
    /// As [`Segment::grow`].
    pub fn map_with(
        backend: &dyn MemoryBackend,
        group: &dyn Group,
        layout: &Layout,
        offset: usize,
        len: usize,
        what: &str,
        own: impl FnOnce() -> Result<Box<dyn Chunk>>,
    ) -> Result<Segment> {
        let mut seg = Segment { offset, len, mappings: Vec::new(), chunks: Vec::new() };
        // Step 1: own chunk. A PE that fails here still takes part in every collective below
        // (with a placeholder) so no peer is left waiting.
        let own = (|| {
            let chunk = own()?;
            let fd = chunk.export_fd()?;
            seg.mappings.push(chunk.map_at(layout.my_base() + offset)?);
            seg.chunks.push(chunk);
            Ok(fd)
        })();
        let (own, fd) = match own {
            Ok(fd) => (Ok(()), Some(fd)),
            Err(e) => (Err(e), None),
        };
        all_ok(group, own, &format!("{what} of {len} bytes"))?;
        let Some(fd) = fd else { unreachable!("all_ok returns this PE's error first") };
        // Step 2: exchange descriptors with node-local peers and map theirs. A PE alone on its
        // host has nothing to map but still takes part in the job-wide check below: hosts may
        // hold different numbers of PEs, and every PE must make the same job-wide calls.
        let node = group.node_view();
        let peers = (|| {
            if layout.nslots() <= 1 {
                return Ok(());
            }
            let fds = group.allgather_local_fds(std::os::fd::AsFd::as_fd(&fd))?;
            for (slot, peer_fd) in fds.into_iter().enumerate() {
                let Some(peer_fd) = peer_fd else { continue };
                let chunk = backend.import_chunk(peer_fd, len)?;
                seg.mappings.push(chunk.map_at(layout.slot_base(slot) + offset)?);
                seg.chunks.push(chunk);
            }
            Ok(())
        })();
        all_ok(
            group,
            peers,
            &format!("mapping the {len}-byte heap chunks of PEs {:?}", node.local_pes),
        )?;
        Ok(seg)
    }
}
