//! On the host backend: barrier instances of one PE that are in flight at once.
//!
//! A barrier instance counts arrivals; two instances of one PE on one team used to satisfy each
//! other with their own two arrivals, before any peer arrived. Instances of a PE now run one
//! after another in ticket order (`triton-lib/src/barrier_device.h`, `runtime/src/runtime/sync.rs`),
//! so each one waits for a peer instance of its own. The same happens on the GPU with two CTAs
//! calling `barrier_all_block`, or a stream barrier still running when the host calls
//! `barrier_all` (`tests/tensors/test_cuda_concurrency.py`).

mod common;

use common::Pes;
use rshmem::runtime::{InitOptions, Runtime};
use std::time::{Duration, Instant};

fn init() -> Runtime {
    Runtime::init(InitOptions::default()).expect("init")
}

/// How long PE 1 waits before each of its two barriers.
const LATE: Duration = Duration::from_millis(300);

/// PE 0 enters two world barriers at once, from two threads. PE 1 enters its two one after
/// another, each after a pause and after writing its number into PE 0's word. So the first of
/// PE 0's barriers to return must see 1 (or 2), and the other 2; neither may return before PE 1
/// reached its first barrier.
#[test]
fn two_barriers_in_flight_on_one_pe_each_wait_for_a_peer_instance() {
    Pes::new("two_barriers_in_flight_on_one_pe_each_wait_for_a_peer_instance", 2).run(|pe, _n| {
        let rt = init();
        let word = rt.calloc(1, 8).unwrap();
        rt.barrier_all().unwrap();
        let start = Instant::now();
        if pe == 0 {
            let seen: Vec<(u64, Duration)> = std::thread::scope(|s| {
                let threads: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            rt.barrier_all().unwrap();
                            (rt.g::<u64>(word, 0).unwrap(), start.elapsed())
                        })
                    })
                    .collect();
                threads.into_iter().map(|t| t.join().unwrap()).collect()
            });
            let mut values: Vec<u64> = seen.iter().map(|(v, _)| *v).collect();
            values.sort();
            let earliest = seen.iter().map(|(_, t)| *t).min().unwrap();
            assert!(
                values[0] >= 1 && values[1] == 2,
                "PE 0's barriers returned having seen {values:?} (want [1 or 2, 2]): an instance \
                 returned before PE 1's matching one, after {earliest:?}"
            );
            // PE 1's pause starts when its own first barrier returns, which can be a few ms before
            // PE 0's does: half the pause is the bound an early return (at ~0 ms) cannot meet.
            assert!(earliest >= LATE / 2, "a barrier returned after {earliest:?}, before PE 1 arrived");
        } else {
            for value in 1..=2u64 {
                std::thread::sleep(LATE);
                rt.p(word, value, 0).unwrap();
                rt.barrier_all().unwrap();
            }
        }
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

/// Many threads of every PE in barriers of one team at once, many times: every PE runs the same
/// number of instances, so all of them complete (none is left waiting for an arrival another
/// instance of its own PE took), and the counts stay consistent for the barriers after.
#[test]
fn barriers_from_many_threads_all_complete() {
    Pes::new("barriers_from_many_threads_all_complete", 3).run(|pe, n| {
        let rt = init();
        let ctr = rt.calloc(1, 8).unwrap();
        const THREADS: usize = 4;
        const ROUNDS: usize = 50;
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for _ in 0..ROUNDS {
                        rt.barrier_all().unwrap();
                    }
                });
            }
        });
        // After the storm, plain barriers still line up: everyone counts, then everyone reads.
        rt.atomic(ctr, rshmem::backend::Width::W64, rshmem::backend::AmoOp::Add(1), 0).unwrap();
        rt.barrier_all().unwrap();
        let c = rt.g::<u64>(ctr, 0).unwrap();
        assert_eq!(c, n as u64, "PE {pe}");
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}
