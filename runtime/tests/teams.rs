//! Teams on the host backend: predefined teams, split_strided, translate_pe, team barriers,
//! destroy and slot reuse, and split errors.

mod common;

use common::Pes;
use rshmem::backend::{AmoOp, Width};
use rshmem::runtime::{InitOptions, Runtime, Team};
use rshmem::Error;

fn init() -> Runtime {
    Runtime::init(InitOptions::default()).expect("init")
}

#[test]
fn predefined_teams_on_one_host() {
    Pes::new("predefined_teams_on_one_host", 3).run(|pe, n| {
        let rt = init();
        let (pe_i, n_i) = (pe as i32, n as i32);
        for team in [Team::WORLD, Team::NODE, Team::SHARED] {
            assert_eq!(rt.team_n_pes(team).unwrap(), n_i);
            assert_eq!(rt.team_my_pe(team).unwrap(), pe_i);
        }
        // One host: each PE is alone with its local index.
        assert_eq!(rt.team_n_pes(Team::SAME_MYPE_NODE).unwrap(), 1);
        assert_eq!(rt.team_my_pe(Team::SAME_MYPE_NODE).unwrap(), 0);
        assert_eq!(rt.team_translate_pe(Team::SAME_MYPE_NODE, 0, Team::WORLD).unwrap(), pe_i);
        for other in 0..n_i {
            assert_eq!(rt.team_translate_pe(Team::WORLD, other, Team::NODE).unwrap(), other);
            let expect = if other == pe_i { 0 } else { -1 };
            assert_eq!(rt.team_translate_pe(Team::WORLD, other, Team::SAME_MYPE_NODE).unwrap(), expect);
        }
        let err = rt.team_translate_pe(Team::WORLD, n_i, Team::NODE).unwrap_err();
        assert!(matches!(err, Error::PeOutOfRange { .. }), "{err}");
        assert!(err.to_string().contains("team WORLD"), "{err}");
        // NVSHMEM_TEAM_INVALID, as NVSHMEM: -1 from the queries, destroy a no-op, no split.
        assert_eq!(rt.team_n_pes(Team::INVALID).unwrap(), -1);
        assert_eq!(rt.team_my_pe(Team::INVALID).unwrap(), -1);
        assert_eq!(rt.team_translate_pe(Team::INVALID, 0, Team::WORLD).unwrap(), -1);
        assert_eq!(rt.team_translate_pe(Team::WORLD, 0, Team::INVALID).unwrap(), -1);
        rt.team_destroy(Team::INVALID).unwrap();
        assert_eq!(rt.team_split_strided(Team::INVALID, 0, 1, 1).unwrap(), None);
        assert_eq!(rt.team_split_2d(Team::INVALID, 2).unwrap(), (None, None));
        let err = rt.barrier(Team::INVALID).unwrap_err().to_string();
        assert!(err.contains("team -1"), "{err}");
        let err = rt.team_n_pes(Team(17)).unwrap_err().to_string();
        assert!(err.contains("team 17"), "{err}");
        assert!(rt.team_destroy(Team::WORLD).unwrap_err().to_string().contains("predefined"));
        for team in [Team::WORLD, Team::NODE, Team::SHARED, Team::SAME_MYPE_NODE] {
            rt.barrier(team).unwrap();
            rt.sync(team).unwrap();
        }
        rt.finalize().unwrap();
    });
}

#[test]
fn split_translate_barrier_destroy() {
    Pes::new("split_translate_barrier_destroy", 4).run(|pe, n| {
        let rt = init();
        let pe_i = pe as i32;
        let ctr = rt.calloc(4, 8).unwrap();

        let even = rt.team_split_strided(Team::WORLD, 0, 2, 2).unwrap();
        assert_eq!(even.is_some(), pe % 2 == 0);
        if let Some(t) = even {
            assert_eq!(rt.team_n_pes(t).unwrap(), 2);
            assert_eq!(rt.team_my_pe(t).unwrap(), pe_i / 2);
            assert_eq!(rt.team_translate_pe(t, 1, Team::WORLD).unwrap(), 2);
            assert_eq!(rt.team_translate_pe(Team::WORLD, 1, t).unwrap(), -1);
            assert_eq!(rt.team_translate_pe(Team::WORLD, 2, t).unwrap(), 1);
            // Team barriers: member adds land before anyone leaves the barrier.
            for round in 1..=500u64 {
                rt.atomic(ctr, Width::W64, AmoOp::Add(1), 0).unwrap();
                rt.barrier(t).unwrap();
                assert_eq!(rt.atomic(ctr, Width::W64, AmoOp::Fetch, 0).unwrap(), 2 * round);
                rt.sync(t).unwrap();
            }
        }
        // Odd PEs barrier among themselves meanwhile, and everyone meets in the world team.
        let odd = rt.team_split_strided(Team::WORLD, 1, 2, 2).unwrap();
        if let Some(t) = odd {
            assert_eq!(rt.team_translate_pe(t, 0, Team::WORLD).unwrap(), 1);
            for _ in 0..500 {
                rt.barrier(t).unwrap();
            }
        }
        rt.barrier_all().unwrap();
        assert_ne!(even.or(odd).unwrap(), Team::WORLD);
        assert!(even.is_none() || odd.is_none());

        // Reversed order with a negative stride; a split of a split.
        let rev = rt.team_split_strided(Team::WORLD, n as i32 - 1, -1, n as i32).unwrap().unwrap();
        assert_eq!(rt.team_my_pe(rev).unwrap(), n as i32 - 1 - pe_i);
        assert_eq!(rt.team_translate_pe(rev, 0, Team::WORLD).unwrap(), n as i32 - 1);
        let first_of_rev = rt.team_split_strided(rev, 0, 1, 1).unwrap();
        assert_eq!(first_of_rev.is_some(), pe == n - 1);
        if let Some(t) = first_of_rev {
            assert_eq!(rt.team_translate_pe(t, 0, rev).unwrap(), 0);
            rt.barrier(t).unwrap();
            rt.team_destroy(t).unwrap();
        }
        if let Some(t) = even {
            let sub = rt.team_split_strided(t, 1, 1, 1).unwrap();
            assert_eq!(sub.is_some(), pe == 2);
            if let Some(s) = sub {
                rt.team_destroy(s).unwrap();
            }
        }
        rt.barrier(rev).unwrap();

        // Destroyed ids are reused, and barriers on a reused slot still count right.
        let ids: Vec<i32> = [even, odd].iter().flatten().map(|t| t.id()).collect();
        for t in [even, odd].into_iter().flatten() {
            rt.team_destroy(t).unwrap();
            assert!(rt.barrier(t).is_err(), "a destroyed team is gone");
        }
        rt.barrier_all().unwrap();
        let again = rt.team_split_strided(Team::WORLD, 0, 1, n as i32).unwrap().unwrap();
        assert!(ids == [4] || ids == [5], "{ids:?}");
        assert_eq!(again.id(), 4, "the lowest slot free on every PE is reused");
        for _ in 0..200 {
            rt.barrier(again).unwrap();
        }

        // Fill every slot, then the next split fails on every PE with a clear message.
        let mut made = vec![again, rev];
        let err = loop {
            match rt.team_split_strided(Team::WORLD, 0, 1, n as i32) {
                Ok(t) => made.push(t.unwrap()),
                Err(e) => break e,
            }
        };
        assert_eq!(made.len(), rshmem::consts::MAX_TEAMS - 4);
        assert!(err.to_string().contains("destroy teams"), "{err}");
        for t in made {
            rt.barrier(t).unwrap();
            rt.team_destroy(t).unwrap();
        }
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn split_2d_makes_nvshmems_grid_and_left_out_pes_destroy_invalid() {
    Pes::new("split_2d_makes_nvshmems_grid_and_left_out_pes_destroy_invalid", 5).run(|pe, n| {
        let rt = init();
        let (x, y) = rt.team_split_2d(Team::WORLD, 2).unwrap();
        let (x, y) = (x.expect("every PE has a row"), y.expect("every PE has a column"));
        let row: Vec<usize> = (0..n).filter(|p| p / 2 == pe / 2).collect();
        let col: Vec<usize> = (0..n).filter(|p| p % 2 == pe % 2).collect();
        assert_eq!(rt.team_n_pes(x).unwrap() as usize, row.len());
        assert_eq!(rt.team_my_pe(x).unwrap() as usize, row.iter().position(|&p| p == pe).unwrap());
        assert_eq!(rt.team_n_pes(y).unwrap() as usize, col.len());
        for (i, &p) in col.iter().enumerate() {
            assert_eq!(rt.team_translate_pe(y, i as i32, Team::WORLD).unwrap() as usize, p);
        }
        rt.barrier(x).unwrap();
        rt.barrier(y).unwrap();
        rt.team_destroy(x).unwrap();
        rt.team_destroy(y).unwrap();
        // An xrange above the size is the size: one row, columns of one.
        let (x, y) = rt.team_split_2d(Team::WORLD, 99).unwrap();
        assert_eq!(rt.team_n_pes(x.unwrap()).unwrap() as usize, n);
        assert_eq!(rt.team_n_pes(y.unwrap()).unwrap(), 1);
        rt.team_destroy(x.unwrap()).unwrap();
        rt.team_destroy(y.unwrap()).unwrap();
        let err = rt.team_split_2d(Team::WORLD, 0).unwrap_err().to_string();
        assert!(err.contains("xrange"), "{err}");
        // The spec's pattern: a team of PE 0 alone, destroyed on every PE (INVALID elsewhere).
        let first = rt.team_split_strided(Team::WORLD, 0, 1, 1).unwrap();
        assert_eq!(first.is_some(), pe == 0);
        let first = first.unwrap_or(Team::INVALID);
        assert_eq!(rt.team_n_pes(first).unwrap(), if pe == 0 { 1 } else { -1 });
        rt.team_destroy(first).unwrap();
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn split_errors_reach_every_pe() {
    Pes::new("split_errors_reach_every_pe", 3).run(|pe, _n| {
        let rt = init();
        // Out of the parent: every PE gets the same error naming the values.
        for (start, stride, size, needle) in [(2, 1, 2, "parent PE 3"), (0, 1, 0, "at least 1"), (0, 0, 2, "stride 0")]
        {
            let err = rt.team_split_strided(Team::WORLD, start, stride, size).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::InvalidArgument(_)), "{msg}");
            assert!(msg.contains(needle) && msg.contains(&format!("start={start}")), "{msg}");
        }
        // Different arguments on different PEs: a mismatch on every PE, naming both.
        let err = rt.team_split_strided(Team::WORLD, 0, 1, if pe == 1 { 2 } else { 3 }).unwrap_err();
        match &err {
            Error::Mismatch { pe: other, .. } => assert!(pe == 1 || *other == 1, "{err}"),
            _ => panic!("expected a mismatch, got {err}"),
        }
        assert!(err.to_string().contains("size=2") && err.to_string().contains("size=3"), "{err}");
        // Nothing was created; the runtime goes on.
        let t = rt.team_split_strided(Team::WORLD, 0, 1, 3).unwrap().unwrap();
        assert_eq!(t.id(), 4, "the failed splits took no slot");
        rt.barrier(t).unwrap();
        rt.finalize().unwrap();
    });
}
