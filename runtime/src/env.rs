//! Every `RSHMEM_*` environment variable, parsed once per process.
//!
//! The table in [`VARIABLES`] is the one list; `docs/environment.md` is written from it.
//! Sizes take an optional `K`, `M`, `G` or `T` suffix (powers of 1024); booleans take
//! `1/0/true/false/yes/no/on/off`.

use crate::error::{Error, Result};
use std::sync::OnceLock;

/// One documented variable.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// Its type, as written in the docs.
    pub kind: &'static str,
    /// Its default, as written in the docs.
    pub default: &'static str,
    /// What it does.
    pub meaning: &'static str,
}

/// The variables rshmem reads, in the order the docs list them.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "RSHMEM_BACKEND",
        kind: "`cuda` or `host`",
        default: "`cuda` when a GPU is visible, else `host`",
        meaning: "memory backend of the symmetric heap",
    },
    Variable {
        name: "RSHMEM_SYMMETRIC_SIZE",
        kind: "size",
        default: "128G",
        meaning: "upper bound of each PE's symmetric heap; the heap grows on demand up to it",
    },
    Variable {
        name: "RSHMEM_HEAP_GROWTH",
        kind: "size",
        default: "64M",
        meaning: "smallest step by which the heap grows (rounded up to the backend's granularity)",
    },
    Variable {
        name: "RSHMEM_BOOTSTRAP_TIMEOUT_S",
        kind: "seconds",
        default: "300",
        meaning: "how long a bootstrap collective (init, malloc, barrier of the host side) waits for peers",
    },
    Variable {
        name: "RSHMEM_BOOTSTRAP_PORT",
        kind: "port",
        default: "MASTER_PORT + 1",
        meaning: "TCP port PE 0 listens on when bootstrapping from the torchrun environment",
    },
    Variable {
        name: "RSHMEM_BOOTSTRAP_SECRET",
        kind: "string",
        default: "unset: PE 0 hands a random secret to processes of its user on its host",
        meaning: "shared secret of an environment bootstrap (give every PE the same private value; needed across hosts); peers presenting another one are refused",
    },
    Variable {
        name: "RSHMEM_JOB_ID",
        kind: "string",
        default: "unset: the launcher's job id (TORCHELASTIC_RUN_ID, Open MPI's / PMIx's / Slurm's), where it sets one",
        meaning: "this job's identity in the bootstrap handshake: a PE whose identity differs from PE 0's is refused, naming both (give every PE of one job the same value, and each job its own, where two jobs may share an address and port)",
    },
    Variable {
        name: "RSHMEM_LOG",
        kind: "`error`, `warn`, `info`, `debug`, `trace`, or `EnvFilter` directives (`rshmem::bootstrap=trace,info`)",
        default: "unset: no logs",
        meaning: "print the runtime's logs at that level to stderr, each line prefixed `[rshmem pe N/M]` (the PE that wrote it)",
    },
    Variable {
        name: "RSHMEM_DEBUG",
        kind: "bool",
        default: "0",
        meaning: "the same as `RSHMEM_LOG=debug` (`RSHMEM_LOG` wins when both are set)",
    },
    Variable {
        name: "RSHMEM_DEBUG_WAIT_TIMEOUT_MS",
        kind: "milliseconds",
        default: "unset (wait forever)",
        meaning: "every wait (host waits, barriers and collectives; the kernels of on-stream barriers and collectives; waits inside Triton kernels) that does not complete in time fails with an error naming the PE, the allocation and offset, the expected and the last seen value; a kernel's timeout traps the kernel and is raised by the next host call on that PE; `signal_wait_until_on_stream` has none",
    },
    Variable {
        name: "RSHMEM_STUCK_REPORT_MS",
        kind: "milliseconds",
        default: "60000 (0: never)",
        meaning: "a host wait, barrier or collective that makes no progress this long prints once to stderr what it waits for (operation, team, word, values, missing peers) and keeps waiting",
    },
    Variable {
        name: "RSHMEM_VIRTUAL_HOSTS",
        kind: "integer",
        default: "1",
        meaning: "split the PEs of each machine into this many virtual hosts (consecutive ranks together); PEs on other virtual hosts are reached only through the network transport (UCX), as on other machines: tests of the multi-host paths on one machine",
    },
    Variable {
        name: "RSHMEM_UCX_DIR",
        kind: "path",
        default: "unset: the `libucx-cu12` wheel's `libucx/lib` when the Python package finds it, else the loader path",
        meaning: "directory holding `libucp.so.0` and `libucs.so.0`, loaded when PEs sit on more than one host",
    },
    Variable {
        name: "RSHMEM_NET_PROXY",
        kind: "bool",
        default: "1 on the cuda backend, 0 on the host backend",
        meaning: "run the proxy thread that carries out device-initiated operations towards PEs on other hosts (only when some PE is on another host); 1 on the host backend lets tests post to it from host threads",
    },
    Variable {
        name: "RSHMEM_NET_TARGET_ATOMICS",
        kind: "bool",
        default: "1 on the cuda backend (always), 0 on the host backend",
        meaning: "atomics and signals towards PEs on other hosts are active messages run by the target PE's runtime with its own atomics, as a GPU heap needs; 1 on the host backend tests that path there (0: UCX's atomics)",
    },
    Variable {
        name: "RSHMEM_NET_SPIN_US",
        kind: "microseconds",
        default: "100 on a machine of 8 cores or more, else 0",
        meaning: "how long the network transport's progress thread polls on after its last event before it sleeps (incoming puts then need not wait for it to wake; costs a core meanwhile; 0: sleep at once)",
    },
    Variable {
        name: "RSHMEM_COLL_HIERARCHY_MIN_BYTES",
        kind: "bytes (integer)",
        default: "16384",
        meaning: "host broadcasts and reductions of a team whose PEs span hosts move at least this many bytes per PE hierarchically: one transfer per host through the network transport, then copies on each host, for two barriers more (0: always; a huge value: never)",
    },
    Variable {
        name: "RSHMEM_ALLOW_SHARED_GPU",
        kind: "bool",
        default: "0",
        meaning: "allow several PEs on one GPU (tests on one-GPU machines)",
    },
    Variable {
        name: "RSHMEM_CHECK",
        kind: "bool",
        default: "0",
        meaning: "check mode: `rshmem.triton` links `libshmem_device.check.bc`, whose puts, gets, signals and atomics stop the kernel with an error naming the address, PE and operation when the range is not program memory (the runtime's own words, or past the heap bound) instead of writing it; the default library has no such check",
    },
    Variable {
        name: "RSHMEM_TRITON_LINK",
        kind: "bool",
        default: "1",
        meaning: "importing `rshmem.triton` links the device library into plain `@triton.jit` kernels that call it (and only those) and installs the module-load hook; 0 leaves Triton alone (docs/porting-from-triton-distributed.md, \"Plain `@triton.jit` kernels\")",
    },
];

/// Where this PE sits among the PEs of its host, as its launcher describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalPlace {
    /// This PE's index among the PEs of its host (`LOCAL_RANK`).
    pub rank: usize,
    /// How many PEs its host runs (`LOCAL_WORLD_SIZE`).
    pub size: usize,
}

/// The launchers' variables for a PE's index and count on its host: torchrun, Open MPI, MPICH
/// (Hydra), Slurm. The first pair found wins; a missing count is taken as `rank + 1`.
const LOCAL_VARS: [(&str, &str); 4] = [
    ("LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
];

impl LocalPlace {
    /// From the launcher's environment, read through `lookup`; `None` when no launcher variable
    /// is set (a lone process, or a launcher that names none).
    ///
    /// # Errors
    /// [`Error::Config`] for a variable that is not a non-negative integer.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<LocalPlace>> {
        let parse = |var: &'static str, v: String| -> Result<usize> {
            v.trim().parse().map_err(|_| Error::Config {
                var,
                value: v.clone(),
                reason: "expected a non-negative integer (set by the launcher)".into(),
            })
        };
        for (rank_var, size_var) in LOCAL_VARS {
            if let Some(r) = lookup(rank_var) {
                let rank = parse(rank_var, r)?;
                let size = match lookup(size_var) {
                    Some(s) => parse(size_var, s)?,
                    None => rank + 1,
                };
                return Ok(Some(LocalPlace { rank, size: size.max(rank + 1) }));
            }
        }
        Ok(None)
    }

}

/// Parsed values of [`VARIABLES`], and the launcher's variables rshmem reads.
#[derive(Debug, Clone)]
pub struct Env {
    /// `RSHMEM_BACKEND`, if set.
    pub backend: Option<String>,
    /// `RSHMEM_SYMMETRIC_SIZE` in bytes.
    pub symmetric_size: usize,
    /// `RSHMEM_HEAP_GROWTH` in bytes.
    pub heap_growth: usize,
    /// `RSHMEM_BOOTSTRAP_TIMEOUT_S`.
    pub bootstrap_timeout: std::time::Duration,
    /// `RSHMEM_BOOTSTRAP_PORT`, if set.
    pub bootstrap_port: Option<u16>,
    /// `RSHMEM_BOOTSTRAP_SECRET`, if set.
    pub bootstrap_secret: Option<String>,
    /// `RSHMEM_LOG`, if set: a level or `EnvFilter` directives (checked).
    pub log: Option<String>,
    /// `RSHMEM_DEBUG`.
    pub debug: bool,
    /// `RSHMEM_DEBUG_WAIT_TIMEOUT_MS`, if set.
    pub debug_wait_timeout_ms: Option<u64>,
    /// `RSHMEM_STUCK_REPORT_MS`; `None` when 0 (never report).
    pub stuck_report: Option<std::time::Duration>,
    /// `RSHMEM_ALLOW_SHARED_GPU`.
    pub allow_shared_gpu: bool,
    /// `RSHMEM_CHECK` (the device library's check mode; the Python package picks the bitcode).
    pub check: bool,
    /// `RSHMEM_VIRTUAL_HOSTS` (1: none).
    pub virtual_hosts: usize,
    /// `RSHMEM_NET_PROXY`, if set.
    pub net_proxy: Option<bool>,
    /// `RSHMEM_NET_TARGET_ATOMICS`.
    pub net_target_atomics: bool,
    /// `RSHMEM_NET_SPIN_US`, if set.
    pub net_spin_us: Option<u64>,
    /// `RSHMEM_COLL_HIERARCHY_MIN_BYTES`.
    pub coll_hierarchy_min_bytes: usize,
    /// `RSHMEM_UCX_DIR`, if set.
    pub ucx_dir: Option<std::path::PathBuf>,
    /// This PE's place on its host as its launcher tells it (`LOCAL_RANK`, ...; see
    /// [`LocalPlace`]), if any launcher variable is set.
    pub local_place: Option<LocalPlace>,
}

impl Env {
    /// Parses the process environment.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first variable with a bad value.
    pub fn from_process() -> Result<Env> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The log filter the environment asks for (`crate::log::install`): `RSHMEM_LOG`, else
    /// `debug` under `RSHMEM_DEBUG`, else none (no logs).
    pub fn log_directives(&self) -> Option<String> {
        match (&self.log, self.debug) {
            (Some(d), _) => Some(d.clone()),
            (None, true) => Some("debug".to_string()),
            (None, false) => None,
        }
    }

    /// Parses variables from any lookup (tests use a map).
    ///
    /// # Errors
    /// [`Error::Config`] naming the first variable with a bad value.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Env> {
        let backend = get("RSHMEM_BACKEND").filter(|s| !s.is_empty());
        if let Some(b) = &backend {
            if b != "cuda" && b != "host" {
                return Err(Error::Config {
                    var: "RSHMEM_BACKEND",
                    value: b.clone(),
                    reason: "allowed values are `cuda` and `host`".into(),
                });
            }
        }
        Ok(Env {
            backend,
            symmetric_size: size_var(&get, "RSHMEM_SYMMETRIC_SIZE", 128 << 30)?,
            heap_growth: size_var(&get, "RSHMEM_HEAP_GROWTH", 64 << 20)?,
            bootstrap_timeout: std::time::Duration::from_secs(num_var(
                &get,
                "RSHMEM_BOOTSTRAP_TIMEOUT_S",
                300,
            )?),
            bootstrap_port: get("RSHMEM_BOOTSTRAP_PORT")
                .map(|v| {
                    v.trim().parse::<u16>().map_err(|_| Error::Config {
                        var: "RSHMEM_BOOTSTRAP_PORT",
                        value: v.clone(),
                        reason: "expected a TCP port number 1..65535".into(),
                    })
                })
                .transpose()?,
            bootstrap_secret: get("RSHMEM_BOOTSTRAP_SECRET").filter(|s| !s.is_empty()),
            log: get("RSHMEM_LOG")
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .map(|s| match crate::log::check_directives(&s) {
                    None => Ok(s),
                    Some(why) => Err(Error::Config {
                        var: "RSHMEM_LOG",
                        value: s,
                        reason: format!("expected error, warn, info, debug, trace or EnvFilter directives ({why})"),
                    }),
                })
                .transpose()?,
            debug: bool_var(&get, "RSHMEM_DEBUG")?,
            debug_wait_timeout_ms: get("RSHMEM_DEBUG_WAIT_TIMEOUT_MS")
                .filter(|s| !s.is_empty())
                .map(|_| num_var(&get, "RSHMEM_DEBUG_WAIT_TIMEOUT_MS", 0))
                .transpose()?,
            stuck_report: Some(num_var(&get, "RSHMEM_STUCK_REPORT_MS", 60_000)?)
                .filter(|&ms| ms > 0)
                .map(std::time::Duration::from_millis),
            allow_shared_gpu: bool_var(&get, "RSHMEM_ALLOW_SHARED_GPU")?,
            check: bool_var(&get, "RSHMEM_CHECK")?,
            virtual_hosts: num_var(&get, "RSHMEM_VIRTUAL_HOSTS", 1)?.max(1) as usize,
            net_proxy: get("RSHMEM_NET_PROXY").filter(|s| !s.is_empty()).map(|_| bool_var(&get, "RSHMEM_NET_PROXY")).transpose()?,
            net_target_atomics: bool_var(&get, "RSHMEM_NET_TARGET_ATOMICS")?,
            net_spin_us: get("RSHMEM_NET_SPIN_US").filter(|s| !s.is_empty()).map(|_| num_var(&get, "RSHMEM_NET_SPIN_US", 0)).transpose()?,
            coll_hierarchy_min_bytes: usize::try_from(num_var(&get, "RSHMEM_COLL_HIERARCHY_MIN_BYTES", 16 << 10)?).unwrap_or(usize::MAX),
            ucx_dir: get("RSHMEM_UCX_DIR").filter(|s| !s.is_empty()).map(std::path::PathBuf::from),
            local_place: LocalPlace::from_lookup(&get)?,
        })
    }
}

/// The process environment, parsed on first use.
///
/// # Errors
/// As [`Env::from_process`]; the error is returned on every call.
pub fn env() -> Result<&'static Env> {
    /// A bad variable, kept to be returned again as the same `Error::Config` on every call.
    type Bad = (&'static str, String, String);
    static ENV: OnceLock<std::result::Result<Env, Bad>> = OnceLock::new();
    ENV.get_or_init(|| {
        Env::from_process().map_err(|e| match e {
            Error::Config { var, value, reason } => (var, value, reason),
            other => ("the environment", String::new(), other.to_string()),
        })
    })
    .as_ref()
    .map_err(|(var, value, reason)| Error::Config { var, value: value.clone(), reason: reason.clone() })
}

/// Parses `"64M"`-style sizes.
pub fn parse_size(text: &str) -> Option<usize> {
    let t = text.trim();
    let (digits, shift) = match t.chars().last()?.to_ascii_uppercase() {
        'K' => (&t[..t.len() - 1], 10),
        'M' => (&t[..t.len() - 1], 20),
        'G' => (&t[..t.len() - 1], 30),
        'T' => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    digits.trim().parse::<usize>().ok()?.checked_mul(1usize << shift)
}

fn size_var(get: &impl Fn(&str) -> Option<String>, var: &'static str, default: usize) -> Result<usize> {
    match get(var).filter(|s| !s.is_empty()) {
        None => Ok(default),
        Some(v) => parse_size(&v).filter(|&n| n > 0).ok_or(Error::Config {
            var,
            value: v,
            reason: "expected a positive size such as 4096, 512M or 64G".into(),
        }),
    }
}

fn num_var(get: &impl Fn(&str) -> Option<String>, var: &'static str, default: u64) -> Result<u64> {
    match get(var).filter(|s| !s.is_empty()) {
        None => Ok(default),
        Some(v) => v.trim().parse::<u64>().map_err(|_| Error::Config {
            var,
            value: v,
            reason: "expected a non-negative integer".into(),
        }),
    }
}

fn bool_var(get: &impl Fn(&str) -> Option<String>, var: &'static str) -> Result<bool> {
    match get(var).map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("0") | Some("false") | Some("no") | Some("off") => Ok(false),
        Some("1") | Some("true") | Some("yes") | Some("on") => Ok(true),
        Some(other) => Err(Error::Config {
            var,
            value: other.to_string(),
            reason: "expected 1/0, true/false, yes/no or on/off".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<Env> {
        let m: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Env::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_and_sizes() {
        let e = parse(&[]).unwrap();
        assert_eq!(e.symmetric_size, 128 << 30);
        assert_eq!(e.stuck_report, Some(std::time::Duration::from_secs(60)));
        assert_eq!(parse(&[("RSHMEM_STUCK_REPORT_MS", "0")]).unwrap().stuck_report, None);
        assert!(!e.debug);
        let e = parse(&[("RSHMEM_SYMMETRIC_SIZE", "3g"), ("RSHMEM_DEBUG", "on")]).unwrap();
        assert_eq!(e.symmetric_size, 3 << 30);
        assert!(e.debug);
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn bad_values_name_the_variable() {
        let err = parse(&[("RSHMEM_BACKEND", "gpu")]).unwrap_err().to_string();
        assert!(err.contains("RSHMEM_BACKEND") && err.contains("`host`"), "{err}");
        let err = parse(&[("RSHMEM_SYMMETRIC_SIZE", "lots")]).unwrap_err().to_string();
        assert!(err.contains("RSHMEM_SYMMETRIC_SIZE"), "{err}");
        let err = parse(&[("RSHMEM_ALLOW_SHARED_GPU", "maybe")]).unwrap_err().to_string();
        assert!(err.contains("RSHMEM_ALLOW_SHARED_GPU"), "{err}");
        let err = parse(&[("RSHMEM_LOG", "rshmem=loud")]).unwrap_err().to_string();
        assert!(err.contains("RSHMEM_LOG") && err.contains("debug"), "{err}");
        assert_eq!(parse(&[("RSHMEM_LOG", " info ")]).unwrap().log.as_deref(), Some("info"));
    }

    #[test]
    fn debug_means_debug_and_log_wins() {
        let mut env = Env::from_lookup(|_| None).unwrap();
        assert_eq!(env.log_directives(), None);
        env.debug = true;
        assert_eq!(env.log_directives().as_deref(), Some("debug"));
        env.log = Some("trace".into());
        assert_eq!(env.log_directives().as_deref(), Some("trace"));
    }
}
