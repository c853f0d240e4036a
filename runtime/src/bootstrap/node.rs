//! [`NodeInfo`]: which PEs share this host.
//!
//! A host is named by its hostname plus the kernel's boot id (`/proc/sys/kernel/random/boot_id`,
//! new on every boot): the hostname alone repeats across machines in badly configured clusters,
//! and the boot id alone is shared by containers with separate file systems. PEs with the same
//! pair pass memory by file descriptor; PEs with different pairs never try.

/// Identity of the host a PE runs on, as announced in the bootstrap handshake.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct HostId {
    pub(crate) hostname: String,
    pub(crate) boot_id: String,
}

impl HostId {
    /// This process's host. Missing files give empty strings (then the hostname alone decides,
    /// or, with both empty, every such PE counts as one host).
    pub(crate) fn current() -> HostId {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        HostId {
            hostname: read("/proc/sys/kernel/hostname"),
            boot_id: read("/proc/sys/kernel/random/boot_id"),
        }
    }

    /// This host as virtual host `rank * virtual_hosts / nranks` of it (`RSHMEM_VIRTUAL_HOSTS`),
    /// or unchanged for 0 or 1 virtual hosts. The name gains a `#vhost<k>` suffix, which no real
    /// hostname has (`#` is not allowed in one), so PEs on other virtual hosts count as remote.
    pub(crate) fn virtual_host(mut self, rank: usize, nranks: usize, virtual_hosts: usize) -> HostId {
        if virtual_hosts > 1 && nranks > 0 {
            let k = rank * virtual_hosts.min(nranks) / nranks;
            self.hostname = format!("{}#vhost{k}", self.hostname);
        }
        self
    }
}

/// Where the PEs are: the PEs on this host and the node of every PE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// Global PE numbers on this PE's host, ascending (includes this PE).
    pub local_pes: Vec<usize>,
    /// This PE's position in `local_pes`.
    pub local_index: usize,
    /// Node number of every PE, indexed by PE; nodes are numbered in the order of their lowest PE.
    pub node_of: Vec<usize>,
}

impl NodeInfo {
    /// Groups PEs by host; `hosts[pe]` is PE `pe`'s host.
    pub(crate) fn from_hosts(hosts: &[HostId], me: usize) -> NodeInfo {
        let mut firsts: Vec<&HostId> = Vec::new();
        let node_of: Vec<usize> = hosts
            .iter()
            .map(|h| match firsts.iter().position(|f| *f == h) {
                Some(n) => n,
                None => {
                    firsts.push(h);
                    firsts.len() - 1
                }
            })
            .collect();
        let local_pes: Vec<usize> = (0..hosts.len())
            .filter(|&pe| node_of[pe] == node_of[me])
            .collect();
        let local_index = local_pes.iter().position(|&pe| pe == me).unwrap_or(0);
        NodeInfo {
            local_pes,
            local_index,
            node_of,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, boot: &str) -> HostId {
        HostId {
            hostname: name.into(),
            boot_id: boot.into(),
        }
    }

    #[test]
    fn groups_by_hostname_and_boot_id() {
        let hosts = [
            host("b", "1"),
            host("a", "1"),
            host("b", "1"),
            host("b", "2"),
            host("a", "1"),
        ];
        let n = NodeInfo::from_hosts(&hosts, 2);
        assert_eq!(n.node_of, vec![0, 1, 0, 2, 1]);
        assert_eq!(n.local_pes, vec![0, 2]);
        assert_eq!(n.local_index, 1);
        let n = NodeInfo::from_hosts(&hosts, 3);
        assert_eq!((n.local_pes, n.local_index), (vec![3], 0));
    }

    #[test]
    fn virtual_hosts_split_consecutive_ranks() {
        let h = HostId::current();
        let hosts: Vec<HostId> = (0..6).map(|pe| h.clone().virtual_host(pe, 6, 3)).collect();
        assert_eq!(NodeInfo::from_hosts(&hosts, 0).node_of, vec![0, 0, 1, 1, 2, 2]);
        let hosts: Vec<HostId> = (0..4).map(|pe| h.clone().virtual_host(pe, 4, 1)).collect();
        assert_eq!(NodeInfo::from_hosts(&hosts, 0).node_of, vec![0; 4]);
        // More virtual hosts than PEs: one PE each.
        let hosts: Vec<HostId> = (0..2).map(|pe| h.clone().virtual_host(pe, 2, 8)).collect();
        assert_eq!(NodeInfo::from_hosts(&hosts, 0).node_of, vec![0, 1]);
    }

    #[test]
    fn this_host_is_readable() {
        let h = HostId::current();
        assert_eq!(
            NodeInfo::from_hosts(&[h.clone(), h], 1).local_pes,
            vec![0, 1]
        );
    }
}
