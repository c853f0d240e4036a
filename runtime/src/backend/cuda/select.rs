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
pub use crate::env::LocalPlace;
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

/// What a process sees of the GPUs: how many, and whether its launcher gave it exactly one of
/// its own (`CUDA_VISIBLE_DEVICES` naming a single device, as Slurm's `--gpus-per-task=1` or a
/// per-rank wrapper does), in which case ordinal 0 of every PE may be a different GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visible {
    /// Devices this process sees.
    pub count: usize,
    /// `CUDA_VISIBLE_DEVICES` names exactly one device.
    pub one_per_process: bool,
}

impl Visible {
    /// `count` devices, with `cuda_visible_devices` as the process's `CUDA_VISIBLE_DEVICES`.
    pub fn new(count: usize, cuda_visible_devices: Option<&str>) -> Visible {
        let named = cuda_visible_devices
            .map(|v| v.split(',').filter(|d| !d.trim().is_empty()).count())
            .unwrap_or(0);
        Visible { count, one_per_process: count == 1 && named == 1 }
    }
}

/// The rule every entry point applies to pick a PE's GPU (`rshmem.init`, `rshmem.torch.device()`
/// before init, the tutorials, the benchmarks, the tests):
///
/// 1. `requested` (an ordinal the program passed) when given;
/// 2. one PE per GPU when the host has no more PEs than the process sees GPUs: the PE's local
///    rank;
/// 3. ordinal 0 when the launcher gave each process a GPU of its own ([`Visible::one_per_process`]):
///    init then checks by UUID that no two PEs really share one;
/// 4. fewer GPUs than PEs on the host: with `allow_shared` (`RSHMEM_ALLOW_SHARED_GPU=1`) the PEs
///    share the GPUs round-robin (local rank modulo the GPU count); without it, an error naming
///    both counts and the variable.
///
/// # Errors
/// [`Error::Unsupported`] when no GPU is visible; [`Error::InvalidArgument`] naming the values
/// and what to do for a bad `requested` ordinal or too few GPUs without the opt-in.
pub fn choose_ordinal(place: LocalPlace, visible: Visible, requested: Option<usize>, allow_shared: bool) -> Result<usize> {
    let n = visible.count;
    if n == 0 {
        return Err(Error::Unsupported(
            "no CUDA device is visible to this process (check CUDA_VISIBLE_DEVICES); use \
             RSHMEM_BACKEND=host to run without a GPU"
                .into(),
        ));
    }
    if let Some(d) = requested {
        if d >= n {
            return Err(Error::InvalidArgument(format!(
                "device {d} was requested but this process sees {n} CUDA device(s) \
                 (0..{n}); pass a device below {n} or check CUDA_VISIBLE_DEVICES"
            )));
        }
        return Ok(d);
    }
    if place.size <= n && place.rank < n {
        return Ok(place.rank);
    }
    if visible.one_per_process {
        return Ok(0);
    }
    if allow_shared {
        return Ok(place.rank % n);
    }
    Err(Error::InvalidArgument(shared_gpu_advice(place.size, n)))
}

/// The message for a host with more PEs than GPUs, without the opt-in.
pub fn shared_gpu_advice(pes: usize, gpus: usize) -> String {
    format!(
        "this host runs {pes} PEs but {gpus} CUDA GPU(s) are visible: rshmem gives each PE its own \
         GPU unless told otherwise. Start at most {gpus} PE(s) per host (torchrun --nproc-per-node \
         {gpus}), or set RSHMEM_ALLOW_SHARED_GPU=1 to let PEs share GPUs round-robin (correct, but \
         timings then mean nothing for speed, and torch.distributed must use gloo: NCCL refuses \
         two ranks on one GPU)"
    )
}

/// Picks this PE's device (see [`choose_ordinal`]) after initialising the driver.
///
/// # Errors
/// As [`context::init`] and [`choose_ordinal`].
pub fn select(place: LocalPlace, requested: Option<usize>, allow_shared: bool) -> Result<Device> {
    context::init()?;
    let visible = Visible::new(context::device_count()?, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
    let ordinal = choose_ordinal(place, visible, requested, allow_shared)?;
    let device = Device::get(ordinal)?;
    tracing::debug!(local_rank = place.rank, local_size = place.size, ordinal, "selected CUDA device");
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
        let mut gpus: Vec<[u8; 16]> = node.iter().map(|(_, id)| id.uuid).collect();
        gpus.sort_unstable();
        gpus.dedup();
        return Err(Error::InvalidArgument(format!(
            "PE {me} (device {}) and PE {other} (device {}) use the same GPU {} at {}. {}",
            mine.ordinal,
            theirs.ordinal,
            mine.uuid_string(),
            mine.pci_bus_id,
            shared_gpu_advice(node.len(), gpus.len())
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

/// Refuses a node-local peer whose GPU this PE's GPU cannot reach by load/store (`reach[i]` is
/// about `node[i]`, as [`reachability`] returns it). Every PE of a host maps every other's heap
/// into its GPU's address space, and there is no transport between GPUs of one host other than
/// peer access: without this check init would fail later, in the driver's mapping call, with a
/// message that names neither PE.
///
/// # Errors
/// [`Error::Unsupported`] naming this PE's GPU and the first unreachable peer's PE and GPU.
pub fn check_peer_access(me: usize, node: &[(usize, DeviceIdentity)], reach: &[PeerReach]) -> Result<()> {
    let Some((_, mine)) = node.iter().find(|(pe, _)| *pe == me) else {
        return Err(Error::InvalidArgument(format!("PE {me} is missing from the node-local device list")));
    };
    let Some(((pe, theirs), _)) = node.iter().zip(reach).find(|(_, r)| !r.load_store) else {
        return Ok(());
    };
    Err(Error::Unsupported(format!(
        "PE {me}'s GPU {} at {} has no peer access to the GPU {} at {} of PE {pe} on the same host. \
         rshmem maps the heap of every PE of a host into each of the host's GPUs, which needs peer \
         access between every pair of them (NVLink, or PCIe with peer-to-peer enabled; `nvidia-smi \
         topo -p2p r` shows which pairs have it). Run the PEs on GPUs that reach each other, or on \
         one GPU (CUDA_VISIBLE_DEVICES=0 RSHMEM_ALLOW_SHARED_GPU=1: correct, not fast)",
        mine.uuid_string(),
        mine.pci_bus_id,
        theirs.uuid_string(),
        theirs.pci_bus_id
    )))
}

/// The devices to open mapped chunks to: every reachable peer GPU visible in this process
/// (for [`super::CudaMemory::new`]).
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

    fn at(rank: usize, size: usize) -> LocalPlace {
        LocalPlace { rank, size }
    }

    fn gpus(count: usize) -> Visible {
        Visible::new(count, None)
    }

    /// The rule for 1, 2 and 4 PEs on 1, 2 and 8 GPUs, with and without the opt-in: every PE
    /// gets a GPU, distinct while there are enough, round-robin when shared, an error otherwise.
    #[test]
    fn pe_to_gpu_rule_over_pes_and_gpus() {
        for pes in [1usize, 2, 4] {
            for n in [1usize, 2, 8] {
                for allow in [false, true] {
                    let got: Vec<Result<usize>> = (0..pes).map(|r| choose_ordinal(at(r, pes), gpus(n), None, allow)).collect();
                    if pes <= n {
                        let ords: Vec<usize> = got.into_iter().map(|g| g.unwrap()).collect();
                        assert_eq!(ords, (0..pes).collect::<Vec<_>>(), "{pes} PEs on {n} GPUs");
                    } else if allow {
                        let ords: Vec<usize> = got.into_iter().map(|g| g.unwrap()).collect();
                        assert_eq!(ords, (0..pes).map(|r| r % n).collect::<Vec<_>>(), "{pes} PEs shared on {n} GPUs");
                    } else {
                        for g in got {
                            let e = g.unwrap_err().to_string();
                            assert!(e.contains(&format!("runs {pes} PEs but {n} CUDA GPU(s)")), "{e}");
                            assert!(e.contains("RSHMEM_ALLOW_SHARED_GPU=1"), "{e}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn requested_device_and_one_gpu_per_process() {
        assert_eq!(choose_ordinal(at(1, 2), gpus(2), Some(0), false).unwrap(), 0);
        let e = choose_ordinal(at(0, 1), gpus(2), Some(4), false).unwrap_err().to_string();
        assert!(e.contains("device 4") && e.contains("2 CUDA device"), "{e}");
        // The launcher gave each process its own GPU: ordinal 0 everywhere, checked by UUID later.
        let own = Visible::new(1, Some("3"));
        assert!(own.one_per_process);
        assert_eq!(choose_ordinal(at(5, 8), own, None, false).unwrap(), 0);
        // One GPU and no per-process split: sharing needs the opt-in.
        assert!(!Visible::new(1, Some("0,1")).one_per_process);
        assert!(choose_ordinal(at(1, 2), Visible::new(1, None), None, false).is_err());
        assert!(matches!(choose_ordinal(at(0, 1), gpus(0), None, false), Err(Error::Unsupported(_))));
    }

    #[test]
    fn local_place_from_launcher_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(LocalPlace::from_lookup(env(&[])).unwrap(), None);
        assert_eq!(
            LocalPlace::from_lookup(env(&[("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", "4")])).unwrap(),
            Some(at(1, 4))
        );
        assert_eq!(
            LocalPlace::from_lookup(env(&[("OMPI_COMM_WORLD_LOCAL_RANK", "2"), ("OMPI_COMM_WORLD_LOCAL_SIZE", "3")])).unwrap(),
            Some(at(2, 3))
        );
        // A count missing or below the rank is at least rank + 1.
        assert_eq!(LocalPlace::from_lookup(env(&[("LOCAL_RANK", "3")])).unwrap(), Some(at(3, 4)));
        assert!(matches!(LocalPlace::from_lookup(env(&[("LOCAL_RANK", "x")])), Err(Error::Config { .. })));
    }

    #[test]
    fn two_pes_on_one_gpu_fail_unless_allowed() {
        let node = vec![(4, id(1, 0)), (5, id(2, 1)), (6, id(1, 0))];
        assert!(check_distinct(&node, 5, false).is_ok());
        let e = check_distinct(&node, 4, false).unwrap_err().to_string();
        assert!(e.contains("PE 4") && e.contains("PE 6"), "{e}");
        assert!(e.contains("RSHMEM_ALLOW_SHARED_GPU=1") && e.contains("runs 3 PEs but 2 CUDA GPU(s)"), "{e}");
        assert!(e.contains("GPU-01010101-0101-0101-0101-010101010101"), "{e}");
        assert!(check_distinct(&node, 4, true).is_ok());
        assert!(check_distinct(&node, 9, false).is_err());
    }

    #[test]
    fn a_peer_gpu_without_peer_access_is_refused_naming_both() {
        let node = vec![(0, id(1, 0)), (1, id(2, 1)), (2, id(3, 2))];
        let reach = |ok: [bool; 3]| -> Vec<PeerReach> {
            ok.iter().map(|&l| PeerReach { load_store: l, native_atomics: l, device: None, verified: true }).collect()
        };
        assert!(check_peer_access(0, &node, &reach([true, true, true])).is_ok());
        let e = check_peer_access(0, &node, &reach([true, true, false])).unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("PE 0's GPU GPU-01010101-") && e.contains("at 0000:01:00.0"), "{e}");
        assert!(e.contains("GPU-03030303-") && e.contains("at 0000:03:00.0 of PE 2"), "{e}");
        assert!(e.contains("nvidia-smi topo -p2p r") && e.contains("RSHMEM_ALLOW_SHARED_GPU=1"), "{e}");
        assert!(check_peer_access(9, &node, &reach([true, true, true])).is_err());
    }

    #[test]
    fn identity_round_trips_through_bytes() {
        let a = DeviceIdentity { uuid: *b"0123456789abcdef", ordinal: 7, pci_bus_id: "0000:3b:00.0".into() };
        assert_eq!(DeviceIdentity::from_bytes(&a.to_bytes()).unwrap(), a);
        assert!(DeviceIdentity::from_bytes(&[0; 19]).is_err());
    }
}
