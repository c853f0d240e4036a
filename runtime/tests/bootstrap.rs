//! Multi-process tests of `rshmem::bootstrap` on loopback: each test re-runs this binary once
//! per PE (see `common/mod.rs`).

mod common;

use common::{Exit, Pes};
use rshmem::bootstrap::{Bootstrap, UniqueId};
use rshmem::Error;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Variable naming the per-test scratch directory (unique-id file, timing reports).
const DIR_VAR: &str = "RSHMEM_TEST_DIR";

/// A scratch directory for one test, made by the parent and removed by [`Scratch::finish`].
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("rshmem-{test}-{}", std::process::id()));
        if Pes::child_pe().is_none() {
            std::fs::create_dir_all(&d).unwrap();
        }
        Scratch(d)
    }
    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
    /// In the parent: prints every `report-*` file the PEs wrote, then removes the directory.
    fn finish(self) {
        if Pes::child_pe().is_some() {
            return;
        }
        let mut reports: Vec<_> = std::fs::read_dir(&self.0)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        reports.sort();
        for r in reports.iter().filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("report-")
        }) {
            print!("{}", std::fs::read_to_string(r).unwrap());
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn child_dir() -> PathBuf {
    PathBuf::from(std::env::var(DIR_VAR).expect("scratch dir variable"))
}

fn report(pe: usize, text: String) {
    std::fs::write(child_dir().join(format!("report-{pe}")), text).unwrap();
}

/// The environment path, with the harness's torchrun variables.
fn connect_env(timeout: Duration) -> Bootstrap {
    let (uid, rank, n) = UniqueId::from_env()
        .unwrap()
        .expect("torchrun variables are set");
    Bootstrap::connect(&uid, rank, n, timeout).unwrap()
}

/// The unique-id path: PE 0 makes the id and writes its bytes to a file the others poll for.
fn uid_via_file(pe: usize) -> UniqueId {
    let file = child_dir().join("uid");
    if pe == 0 {
        let uid = UniqueId::new().unwrap();
        let tmp = child_dir().join("uid.tmp");
        std::fs::write(&tmp, uid.to_bytes()).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
        uid
    } else {
        let t0 = Instant::now();
        loop {
            if let Ok(b) = std::fs::read(&file) {
                return UniqueId::from_bytes(&b).unwrap();
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "PE 0 never wrote the unique id"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Allgather (lengths differing per PE, then 1 MiB), broadcast from every root, 1000 barriers.
fn exercise(b: &Bootstrap) {
    let (pe, n) = (b.rank(), b.nranks());
    let mine: Vec<u8> = (0..pe * 7 + 1).map(|i| (pe * 31 + i) as u8).collect();
    let all = b.allgather(&mine).unwrap();
    assert_eq!(all.len(), n);
    for (q, blob) in all.iter().enumerate() {
        assert_eq!(
            blob,
            &(0..q * 7 + 1)
                .map(|i| (q * 31 + i) as u8)
                .collect::<Vec<u8>>(),
            "blob of PE {q}"
        );
    }
    assert_eq!(b.allgather(&[]).unwrap(), vec![Vec::<u8>::new(); n]);
    let big: Vec<u8> = (0..1 << 20).map(|i: usize| (i * 7 + pe) as u8).collect();
    let all = b.allgather(&big).unwrap();
    for (q, blob) in all.iter().enumerate() {
        assert!(
            blob.len() == 1 << 20
                && blob
                    .iter()
                    .enumerate()
                    .all(|(i, &x)| x == (i * 7 + q) as u8),
            "1 MiB blob of PE {q}"
        );
    }
    for root in 0..n {
        let data = if pe == root {
            format!("from root {root}").into_bytes()
        } else {
            b"ignored".to_vec()
        };
        assert_eq!(
            b.broadcast(root, &data).unwrap(),
            format!("from root {root}").into_bytes()
        );
    }
    for _ in 0..1000 {
        b.barrier().unwrap();
    }
    assert_eq!(b.node().local_pes, (0..n).collect::<Vec<_>>());
    assert_eq!(b.node().local_index, pe);
    assert_eq!(b.node().node_of, vec![0; n]);
    // Nobody died; a peer that finished first may already be leaving (finalize), which is no failure.
    assert!(b.health().check_dead("test").is_ok());
}

fn env_collectives(name: &'static str, n: usize) {
    Pes::new(name, n).run(|_, _| {
        let b = connect_env(Duration::from_secs(30));
        exercise(&b);
        b.finalize().unwrap();
    });
}

#[test]
fn env_collectives_2() {
    env_collectives("env_collectives_2", 2);
}

#[test]
fn env_collectives_3() {
    env_collectives("env_collectives_3", 3);
}

#[test]
fn env_collectives_4() {
    env_collectives("env_collectives_4", 4);
}

fn uid_collectives(name: &'static str, n: usize) {
    let dir = Scratch::new(name);
    Pes::new(name, n).env(DIR_VAR, dir.path()).run(|pe, n| {
        let uid = uid_via_file(pe);
        let b = Bootstrap::connect(&uid, pe, n, Duration::from_secs(30)).unwrap();
        exercise(&b);
        b.finalize().unwrap();
    });
    dir.finish();
}

#[test]
fn uid_collectives_2() {
    uid_collectives("uid_collectives_2", 2);
}

#[test]
fn uid_collectives_3() {
    uid_collectives("uid_collectives_3", 3);
}

#[test]
fn uid_collectives_4() {
    uid_collectives("uid_collectives_4", 4);
}

/// Prints connect time and collective latencies on 4 PEs (run with `--nocapture`; numbers only,
/// nothing asserted about speed).
#[test]
fn timing_4() {
    let dir = Scratch::new("timing_4");
    Pes::new("timing_4", 4).env(DIR_VAR, dir.path()).run(|pe, _| {
        let t0 = Instant::now();
        let b = connect_env(Duration::from_secs(30));
        let connect = t0.elapsed();
        b.barrier().unwrap();
        const ROUNDS: u32 = 2000;
        let t = Instant::now();
        for _ in 0..ROUNDS {
            b.barrier().unwrap();
        }
        let barrier = t.elapsed() / ROUNDS;
        let t = Instant::now();
        for _ in 0..ROUNDS {
            b.allgather(&[pe as u8; 8]).unwrap();
        }
        let allgather = t.elapsed() / ROUNDS;
        report(
            pe,
            format!("timing_4 PE {pe}: connect {connect:?}, barrier {barrier:?}, allgather (8 B each) {allgather:?}\n"),
        );
        b.finalize().unwrap();
    });
    dir.finish();
}

fn fd_passing(name: &'static str, n: usize) {
    Pes::new(name, n).run(|pe, n| {
        let b = connect_env(Duration::from_secs(30));
        for round in 0..3u64 {
            let fd =
                rustix::fs::memfd_create("rshmem-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
            let mut f = std::fs::File::from(fd);
            f.write_all(&(pe as u64 * 100 + round).to_le_bytes())
                .unwrap();
            let got = b.local().allgather_fds(f.as_fd()).unwrap();
            assert_eq!(got.len(), n);
            for (q, fd) in got.into_iter().enumerate() {
                if q == pe {
                    assert!(fd.is_none());
                    continue;
                }
                let g = std::fs::File::from(fd.expect("a descriptor from every peer"));
                // A positional read: every receiver of a descriptor shares one file offset with
                // the sender and the other receivers, so seek + read races between PEs.
                let mut word = [0u8; 8];
                g.read_exact_at(&mut word, 0).unwrap();
                assert_eq!(
                    u64::from_le_bytes(word),
                    q as u64 * 100 + round,
                    "PE {q}'s memfd, round {round}"
                );
            }
        }
        b.finalize().unwrap();
    });
}

#[test]
fn fd_passing_2() {
    fd_passing("fd_passing_2", 2);
}

#[test]
fn fd_passing_3() {
    fd_passing("fd_passing_3", 3);
}

/// Asserts `r` is `PeerDied` naming `dead`, seen within 10 s of `since`.
fn expect_died<T: std::fmt::Debug>(r: rshmem::Result<T>, dead: usize, since: Instant) {
    match r {
        Err(Error::PeerDied { pe, ref during }) => {
            assert_eq!(pe, dead, "wrong PE reported dead (during {during})");
            assert!(
                since.elapsed() < Duration::from_secs(10),
                "took {:?}",
                since.elapsed()
            );
        }
        other => panic!("expected PE {dead} reported dead, got {other:?}"),
    }
}

#[test]
fn death_during_allgather() {
    Pes::new("death_during_allgather", 4)
        .exit(2, Exit::Code(3))
        .deadline(Duration::from_secs(60))
        .run(|pe, _| {
            let b = connect_env(Duration::from_secs(60));
            b.barrier().unwrap();
            if pe == 2 {
                b.allgather(b"once").unwrap();
                std::thread::sleep(Duration::from_millis(300));
                std::process::exit(3);
            }
            b.allgather(b"once").unwrap();
            let t0 = Instant::now();
            // Not joined by PE 2: must fail with PE 2's death, long before the 60 s timeout.
            expect_died(b.allgather(b"twice"), 2, t0);
            expect_died(b.barrier(), 2, t0);
            assert_eq!(b.health().dead_pe(), Some(2));
        });
}

#[test]
fn death_of_pe0_during_barrier() {
    Pes::new("death_of_pe0_during_barrier", 3)
        .exit(0, Exit::Any)
        .deadline(Duration::from_secs(60))
        .run(|pe, _| {
            let b = connect_env(Duration::from_secs(60));
            b.barrier().unwrap();
            if pe == 0 {
                std::thread::sleep(Duration::from_millis(300));
                std::process::abort();
            }
            let t0 = Instant::now();
            expect_died(b.barrier(), 0, t0);
        });
}

#[test]
fn death_seen_by_health_check() {
    Pes::new("death_seen_by_health_check", 3)
        .exit(1, Exit::Code(5))
        .deadline(Duration::from_secs(60))
        .run(|pe, _| {
            let b = connect_env(Duration::from_secs(60));
            b.barrier().unwrap();
            if pe == 1 {
                std::thread::sleep(Duration::from_millis(200));
                std::process::exit(5);
            }
            let t0 = Instant::now();
            let health = b.health().clone();
            let r = loop {
                if let Err(e) = health.check("spin-wait in test") {
                    break Err::<(), _>(e);
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "PE 1's death not seen in 10 s"
                );
                std::hint::spin_loop();
            };
            expect_died(r, 1, t0);
            let msg = health.check("spin-wait in test").unwrap_err().to_string();
            assert!(
                msg.contains("PE 1") && msg.contains("spin-wait in test"),
                "{msg}"
            );
            if pe == 2 {
                // Stay until PE 0 has seen PE 1's death too: PE 2 leaving first (its relay can
                // reach it before PE 0's own check on a loaded machine) would make PE 0 report
                // PE 2 instead.
                std::thread::sleep(Duration::from_secs(2));
            }
        });
}

#[test]
fn finalize_is_not_death() {
    Pes::new("finalize_is_not_death", 3).run(|pe, _| {
        let b = connect_env(Duration::from_secs(30));
        let health = b.health().clone();
        // PEs finalize at different moments; PE 0 last.
        std::thread::sleep(Duration::from_millis(if pe == 0 {
            300
        } else {
            100 * pe as u64
        }));
        b.finalize().unwrap();
        // Others exit now; none of that may count as a death here.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(health.dead_pe(), None, "a finalized PE was reported dead");
    });
}

#[test]
fn drop_without_finalize_is_death() {
    Pes::new("drop_without_finalize_is_death", 2).run(|pe, _| {
        let b = connect_env(Duration::from_secs(30));
        b.barrier().unwrap();
        if pe == 1 {
            drop(b);
            return;
        }
        let t0 = Instant::now();
        expect_died(b.barrier(), 1, t0);
    });
}

/// PE 2 first presents a wrong secret, then a duplicate rank, then another PE count; each is
/// refused with a clear reason while PE 0 keeps waiting; then it joins properly.
#[test]
fn bad_hellos_refused_root_keeps_waiting() {
    let dir = Scratch::new("bad_hellos_refused_root_keeps_waiting");
    Pes::new("bad_hellos_refused_root_keeps_waiting", 3)
        .env(DIR_VAR, dir.path())
        .run(|pe, n| {
            let (uid, rank, _) = UniqueId::from_env().unwrap().unwrap();
            assert_eq!(rank, pe);
            let t = Duration::from_secs(30);
            let marker = child_dir().join("pe1-connecting");
            if pe == 1 {
                std::fs::write(&marker, b"").unwrap();
            }
            if pe == 2 {
                // Let PE 1 join first, so that rank 1 is taken when PE 2 claims it.
                let t0 = Instant::now();
                while !marker.exists() {
                    assert!(t0.elapsed() < Duration::from_secs(30), "PE 1 never started");
                    std::thread::sleep(Duration::from_millis(5));
                }
                std::thread::sleep(Duration::from_millis(500));
                let mut bytes = uid.to_bytes();
                *bytes.last_mut().unwrap() ^= 1;
                let wrong = UniqueId::from_bytes(&bytes).unwrap();
                let refused = |r: rshmem::Result<Bootstrap>, what: &str| match r {
                    Err(Error::Refused { reason }) => assert!(reason.contains(what), "{reason}"),
                    other => panic!("expected a refusal mentioning {what:?}, got {other:?}"),
                };
                refused(Bootstrap::connect(&wrong, 2, n, t), "wrong secret");
                refused(Bootstrap::connect(&uid, 1, n, t), "duplicate");
                refused(Bootstrap::connect(&uid, 2, n + 1, t), "started for 3 PEs, PE 2 for 4");
            }
            let b = Bootstrap::connect(&uid, pe, n, t).unwrap();
            assert_eq!(
                b.allgather(&[pe as u8]).unwrap(),
                vec![vec![0], vec![1], vec![2]]
            );
            b.finalize().unwrap();
        });
    dir.finish();
}

/// Without `RSHMEM_BOOTSTRAP_SECRET` the PEs share PE 0's random secret over
/// its Unix socket; a guess at the secret derived from the environment (what a stranger could
/// compute) is refused, and the job forms.
#[test]
fn env_only_job_fetches_a_random_secret() {
    Pes::new("env_only_job_fetches_a_random_secret", 3)
        .env("RSHMEM_BOOTSTRAP_SECRET", "")
        .run(|pe, n| {
            let (uid, rank, _) = UniqueId::from_env().unwrap().unwrap();
            assert_eq!(rank, pe);
            assert!(format!("{uid:?}").contains("<from PE 0>"));
            let t = Duration::from_secs(30);
            if pe == 2 {
                // A stranger's best guess: the secret the environment used to give. It holds a
                // secret where PE 0 serves its own, so it is refused before any proof (the wrong
                // proof of one that claims PE 0's secret: tests/host/test_security.py).
                let mut bytes = uid.to_bytes();
                bytes[28..].copy_from_slice(&[0; 16]);
                let guessed = UniqueId::from_bytes(&bytes).unwrap();
                match Bootstrap::connect(&guessed, 2, n, t) {
                    Err(Error::Refused { reason }) => assert!(reason.contains("PE 2 holds one"), "{reason}"),
                    other => panic!("expected a refusal, got {other:?}"),
                }
            }
            let b = Bootstrap::connect(&uid, pe, n, t).unwrap();
            assert_eq!(b.allgather(&[pe as u8]).unwrap(), vec![vec![0], vec![1], vec![2]]);
            b.finalize().unwrap();
        });
}

/// PE 2 never joins (its only attempt has a wrong secret): PE 0 fails after the timeout naming
/// rank 2 and the refusal, and PE 1 hears the same from PE 0.
#[test]
fn missing_rank_times_out_naming_it() {
    Pes::new("missing_rank_times_out_naming_it", 3).run(|pe, n| {
        let (uid, _, _) = UniqueId::from_env().unwrap().unwrap();
        let timeout = Duration::from_secs(2);
        let t0 = Instant::now();
        if pe == 2 {
            let mut bytes = uid.to_bytes();
            *bytes.last_mut().unwrap() ^= 1;
            let wrong = UniqueId::from_bytes(&bytes).unwrap();
            let r = Bootstrap::connect(&wrong, 2, n, timeout);
            assert!(matches!(r, Err(Error::Refused { .. })), "{r:?}");
            return;
        }
        match Bootstrap::connect(&uid, pe, n, timeout) {
            Err(Error::Timeout { what, after }) => {
                assert_eq!(after, timeout);
                assert!(what.contains("[2]"), "{what}");
                if pe == 0 {
                    assert!(what.contains("wrong secret"), "{what}");
                }
            }
            other => panic!("expected a timeout naming rank 2, got {other:?}"),
        }
        // PE 1 hears PE 0's verdict, which comes on PE 0's clock, not its own.
        assert!(pe != 0 || t0.elapsed() >= timeout, "{:?}", t0.elapsed());
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    });
}

/// PE 2 stays alive but skips a barrier: the others fail with a timeout naming the barrier.
#[test]
fn collective_timeout_names_it() {
    Pes::new("collective_timeout_names_it", 3).run(|pe, _| {
        let timeout = Duration::from_secs(2);
        let b = connect_env(timeout);
        b.allgather(b"warm-up").unwrap();
        if pe == 2 {
            std::thread::sleep(Duration::from_secs(5));
            return;
        }
        let t0 = Instant::now();
        match b.barrier() {
            Err(Error::Timeout { what, after }) => {
                assert!(what.contains("barrier"), "{what}");
                assert_eq!(after, timeout);
                if pe == 0 {
                    assert!(what.contains("PE 2"), "{what}");
                }
            }
            other => panic!("expected a barrier timeout, got {other:?}"),
        }
        assert!(
            t0.elapsed() >= timeout && t0.elapsed() < Duration::from_secs(10),
            "{:?}",
            t0.elapsed()
        );
        // Stay until every PE has timed out, so nobody sees this exit as a death first.
        std::thread::sleep(Duration::from_millis(1500));
    });
}

#[test]
fn collective_timeout_allgather_2() {
    Pes::new("collective_timeout_allgather_2", 2).run(|pe, _| {
        let timeout = Duration::from_secs(2);
        let b = connect_env(timeout);
        if pe == 0 {
            std::thread::sleep(Duration::from_secs(4));
            return;
        }
        let t0 = Instant::now();
        match b.allgather(b"lonely") {
            Err(Error::Timeout { what, .. }) => assert!(what.contains("allgather"), "{what}"),
            other => panic!("expected an allgather timeout, got {other:?}"),
        }
        assert!(
            t0.elapsed() >= timeout && t0.elapsed() < Duration::from_secs(10),
            "{:?}",
            t0.elapsed()
        );
    });
}

#[test]
fn single_pe_needs_no_peers() {
    let uid = UniqueId::new().unwrap();
    let b = Bootstrap::connect(&uid, 0, 1, Duration::from_secs(5)).unwrap();
    assert_eq!(b.allgather(b"x").unwrap(), vec![b"x".to_vec()]);
    assert_eq!(b.broadcast(0, b"y").unwrap(), b"y");
    assert!(matches!(
        b.broadcast(1, b"y"),
        Err(Error::PeOutOfRange { .. })
    ));
    b.barrier().unwrap();
    assert_eq!(
        (b.node().local_pes.clone(), b.node().local_index),
        (vec![0], 0)
    );
    let fd = rustix::fs::memfd_create("one", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    assert!(b.local().allgather_fds(fd.as_fd()).unwrap()[0].is_none());
    b.finalize().unwrap();
    assert!(matches!(
        Bootstrap::connect(&uid, 1, 1, Duration::from_secs(1)),
        Err(Error::InvalidArgument(_))
    ));
}
