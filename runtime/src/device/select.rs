//! Which GPU a PE uses, and which node-local peers' memory it reaches by load/store.
//!
//! One PE per GPU: the device is `InitOptions.device` when given, else `LOCAL_RANK` (or 0 when
//! the process sees a single GPU, as under a launcher that sets `CUDA_VISIBLE_DEVICES` per
//! process). After every PE has chosen, the runtime allgathers each one's
//! [`DeviceIdentity`] among node-local PEs, calls [`check_distinct`] (two PEs on one GPU is an
//! error unless `RSHMEM_ALLOW_SHARED_GPU=1`), and [`reachability`] (which peers are reachable
//! by load/store, and which devices get access to mapped chunks).
//!
//! Devices are compared by UUID, never by ordinal: ordinals depend on each process's
//! `CUDA_VISIBLE_DEVICES`.

use crate::driver::context::{self, Device};
use crate::error::{Error, Result};

/// A GPU as node-local peers see it: the same physical GPU has the same UUID in every process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// `cuDeviceGetUuid`.
    pub uuid: [u8; 16],
    /// Ordinal in the process that chose it (for messages only).
    pub ordinal: u32,
    /// PCI bus id ("0000:3b:00.0", for messages only).
    pub pci_bus_id: String,
}

impl DeviceIdentity {
    /// The identity of `device` in this process.
    ///
    /// # Errors
    /// [`Error::Driver`] from the queries.
    pub fn of(device: Device) -> Result<DeviceIdentity> {
        Ok(DeviceIdentity {
            uuid: device.uuid()?,
            ordinal: device.ordinal() as u32,
            pci_bus_id: device.pci_bus_id()?,
        })
    }

    /// Bytes to allgather: uuid (16), ordinal (4, little-endian), then the bus id.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(20 + self.pci_bus_id.len());
        b.extend_from_slice(&self.uuid);
        b.extend_from_slice(&self.ordinal.to_le_bytes());
        b.extend_from_slice(self.pci_bus_id.as_bytes());
        b
    }

    /// Parses [`DeviceIdentity::to_bytes`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there are fewer than 20 bytes.
    pub fn from_bytes(b: &[u8]) -> Result<DeviceIdentity> {
        if b.len() < 20 {
            return Err(Error::InvalidArgument(format!(
                "a device identity is at least 20 bytes, got {}: peers run different rshmem versions?",
                b.len()
            )));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[..16]);
        let ordinal = u32::from_le_bytes([b[16], b[17], b[18], b[19]]);
        Ok(DeviceIdentity { uuid, ordinal, pci_bus_id: String::from_utf8_lossy(&b[20..]).into_owned() })
    }

    /// "GPU-xxxxxxxx-xxxx-..." as `nvidia-smi -L` prints it.
    pub fn uuid_string(&self) -> String {
        let h: Vec<String> = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "GPU-{}-{}-{}-{}-{}",
            h[..4].concat(),
            h[4..6].concat(),
            h[6..8].concat(),
            h[8..10].concat(),
            h[10..].concat()
        )
    }
}

/// The ordinal a PE should use: `requested` when given, else `local_rank`, else 0 when the
/// process sees exactly one GPU. With `allow_shared`, `local_rank` wraps around the visible
/// devices (several PEs per GPU, for tests on small machines).
///
/// # Errors
/// [`Error::InvalidArgument`] naming the values and what to do when no device fits.
pub fn choose_ordinal(local_rank: usize, requested: Option<usize>, visible: usize, allow_shared: bool) -> Result<usize> {
    if visible == 0 {
        return Err(Error::Unsupported(
            "no CUDA device is visible to this process (check CUDA_VISIBLE_DEVICES); use \
             RSHMEM_BACKEND=host to run without a GPU"
                .into(),
        ));
    }
    if let Some(d) = requested {
        if d >= visible {
            return Err(Error::InvalidArgument(format!(
                "device {d} was requested but this process sees {visible} CUDA device(s) \
                 (0..{visible}); pass a device below {visible} or check CUDA_VISIBLE_DEVICES"
            )));
        }
        return Ok(d);
    }
    if local_rank < visible {
        return Ok(local_rank);
    }
    if visible == 1 {
        return Ok(0);
    }
    if allow_shared {
        return Ok(local_rank % visible);
    }
    Err(Error::InvalidArgument(format!(
        "LOCAL_RANK={local_rank} but this process sees only {visible} CUDA devices: start at most \
         one PE per GPU (torchrun --nproc-per-node {visible}), pass device=..., or set \
         RSHMEM_ALLOW_SHARED_GPU=1 to put several PEs on one GPU"
    )))
}

/// Picks this PE's device (see [`choose_ordinal`]) after initialising the driver.
///
/// # Errors
/// As [`context::init`] and [`choose_ordinal`].
pub fn select(local_rank: usize, requested: Option<usize>, allow_shared: bool) -> Result<Device> {
    context::init()?;
    let visible = context::device_count()?;
    let ordinal = choose_ordinal(local_rank, requested, visible, allow_shared)?;
    let device = Device::get(ordinal)?;
    tracing::debug!(local_rank, ordinal, "selected CUDA device");
    Ok(device)
}

/// Fails when another node-local PE uses this PE's GPU, unless `allow_shared`.
///
/// `node` lists `(world PE, identity)` of every node-local PE, this one included; `me` is this
/// PE's world number.
///
/// # Errors
/// [`Error::InvalidArgument`] naming both PEs and the GPU, and saying to set
/// `RSHMEM_ALLOW_SHARED_GPU=1` if sharing is intended.
pub fn check_distinct(node: &[(usize, DeviceIdentity)], me: usize, allow_shared: bool) -> Result<()> {
    if allow_shared {
        return Ok(());
    }
    let Some((_, mine)) = node.iter().find(|(pe, _)| *pe == me) else {
        return Err(Error::InvalidArgument(format!("PE {me} is missing from the node-local device list")));
    };
    if let Some((other, theirs)) = node.iter().find(|(pe, id)| *pe != me && id.uuid == mine.uuid) {
        return Err(Error::InvalidArgument(format!(
            "PE {me} (device {}) and PE {other} (device {}) use the same GPU {} at {}: rshmem runs \
             one PE per GPU; give each PE its own GPU (LOCAL_RANK, CUDA_VISIBLE_DEVICES or \
             device=...), or set RSHMEM_ALLOW_SHARED_GPU=1 to allow sharing (for tests)",
            mine.ordinal,
            theirs.ordinal,
            mine.uuid_string(),
            mine.pci_bus_id
        )));
    }
    Ok(())
}

/// What this PE can do with one node-local peer's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerReach {
    /// Loads and stores reach the peer's heap slot (the device state's per-PE bit).
    pub load_store: bool,
    /// Atomics are native over the link (not emulated by the driver).
    pub native_atomics: bool,
    /// The peer's GPU as a device of this process, when it is visible here; mapped chunks are
    /// opened to it too.
    pub device: Option<Device>,
    /// Whether the driver confirmed `load_store` (false: the peer's GPU is not visible in this
    /// process, so `load_store` is assumed and the first mapping will tell).
    pub verified: bool,
}

/// For each node-local peer identity (in node-local order), whether `mine` reaches it.
///
/// A peer on the same GPU (shared GPU) is reachable. A peer whose GPU is visible here is
/// reachable when `cuDeviceCanAccessPeer` and `CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED` say
/// so. A peer whose GPU is not visible here (per-process `CUDA_VISIBLE_DEVICES`) cannot be
/// queried: it is assumed reachable, and importing its chunks fails clearly if it is not.
///
/// # Errors
/// [`Error::Driver`] from the queries.
pub fn reachability(mine: Device, peers: &[DeviceIdentity]) -> Result<Vec<PeerReach>> {
    let my_uuid = mine.uuid()?;
    let visible: Vec<(Device, [u8; 16])> = (0..context::device_count()?)
        .map(|i| {
            let d = Device::get(i)?;
            Ok((d, d.uuid()?))
        })
        .collect::<Result<_>>()?;
    peers
        .iter()
        .map(|p| {
            if p.uuid == my_uuid {
                return Ok(PeerReach { load_store: true, native_atomics: true, device: Some(mine), verified: true });
            }
            match visible.iter().find(|(_, u)| *u == p.uuid) {
                Some(&(d, _)) => {
                    let a = mine.peer_access(d)?;
                    Ok(PeerReach { load_store: a.access, native_atomics: a.native_atomics, device: Some(d), verified: true })
                }
                None => {
                    tracing::warn!(
                        peer_gpu = %p.uuid_string(),
                        "a node-local peer's GPU is not visible in this process; assuming it is \
                         reachable by load/store"
                    );
                    Ok(PeerReach { load_store: true, native_atomics: false, device: None, verified: false })
                }
            }
        })
        .collect()
}

/// The devices to open mapped chunks to: every reachable peer GPU visible in this process
/// (for [`crate::backend::cuda::CudaBackend::new`]).
pub fn access_devices(reach: &[PeerReach]) -> Vec<Device> {
    let mut out: Vec<Device> = Vec::new();
    for r in reach {
        if let (true, Some(d)) = (r.load_store, r.device) {
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8, ordinal: u32) -> DeviceIdentity {
        DeviceIdentity { uuid: [n; 16], ordinal, pci_bus_id: format!("0000:{n:02x}:00.0") }
    }

    #[test]
    fn ordinal_follows_request_then_local_rank() {
        assert_eq!(choose_ordinal(1, None, 2, false).unwrap(), 1);
        assert_eq!(choose_ordinal(1, Some(0), 2, false).unwrap(), 0);
        // One visible GPU per process (CUDA_VISIBLE_DEVICES set by the launcher).
        assert_eq!(choose_ordinal(5, None, 1, false).unwrap(), 0);
        assert_eq!(choose_ordinal(3, None, 2, true).unwrap(), 1);
        let e = choose_ordinal(2, None, 2, false).unwrap_err().to_string();
        assert!(e.contains("LOCAL_RANK=2") && e.contains("RSHMEM_ALLOW_SHARED_GPU=1"), "{e}");
        let e = choose_ordinal(0, Some(4), 2, false).unwrap_err().to_string();
        assert!(e.contains("device 4") && e.contains("2 CUDA device"), "{e}");
        assert!(matches!(choose_ordinal(0, None, 0, false), Err(Error::Unsupported(_))));
    }

    #[test]
    fn two_pes_on_one_gpu_fail_unless_allowed() {
        let node = vec![(4, id(1, 0)), (5, id(2, 1)), (6, id(1, 0))];
        assert!(check_distinct(&node, 5, false).is_ok());
        let e = check_distinct(&node, 4, false).unwrap_err().to_string();
        assert!(e.contains("PE 4") && e.contains("PE 6"), "{e}");
        assert!(e.contains("RSHMEM_ALLOW_SHARED_GPU=1"), "{e}");
        assert!(e.contains("GPU-01010101-0101-0101-0101-010101010101"), "{e}");
        assert!(check_distinct(&node, 4, true).is_ok());
        assert!(check_distinct(&node, 9, false).is_err());
    }

    #[test]
    fn identity_round_trips_through_bytes() {
        let a = DeviceIdentity { uuid: *b"0123456789abcdef", ordinal: 7, pci_bus_id: "0000:3b:00.0".into() };
        assert_eq!(DeviceIdentity::from_bytes(&a.to_bytes()).unwrap(), a);
        assert!(DeviceIdentity::from_bytes(&[0; 19]).is_err());
    }
}
