//! Collectives on the host backend: broadcast, fcollect, alltoall, every reduction and reduce-scatter,
//! for every dtype, on the world team and on split teams, against references computed here; and
//! their on-stream forms, which run as the host collectives on a backend without streams.

mod common;

use common::rng::Rng;
use common::Pes;
use half::{bf16, f16};
use rshmem::driver::stream::StreamHandle;
use rshmem::dtype::{DType, Element, ReduceOp, ALL_REDUCE_OPS};
use rshmem::SymAddr;
use rshmem::runtime::{InitOptions, Runtime, Team};

/// What the reference needs from an element type.
trait TestElem: Element {
    /// A test value: any bits for integers, a small integer (-4..=4) for floats, so that sums
    /// and products of up to four of them are exact in every float type.
    fn sample(rng: &mut Rng) -> Self;
    /// The reference of `op` over `values`, computed in wider arithmetic.
    fn reference(op: ReduceOp, values: &[Self]) -> Self;
    /// Equality for the check (numeric for floats, so -0.0 == 0.0).
    fn same(a: Self, b: Self) -> bool;
}

macro_rules! int_test_elem {
    ($($t:ty),*) => {$(
        impl TestElem for $t {
            fn sample(rng: &mut Rng) -> Self {
                rng.next() as $t
            }
            fn reference(op: ReduceOp, values: &[Self]) -> Self {
                let wide = values.iter().map(|&v| v as i128);
                let r: i128 = match op {
                    // Wrapping in i128 keeps the low bits exact; the cast truncates to the type.
                    ReduceOp::Sum => wide.fold(0, i128::wrapping_add),
                    ReduceOp::Prod => wide.fold(1, i128::wrapping_mul),
                    ReduceOp::Min => wide.min().unwrap(),
                    ReduceOp::Max => wide.max().unwrap(),
                    ReduceOp::And => wide.fold(-1, |a, b| a & b),
                    ReduceOp::Or => wide.fold(0, |a, b| a | b),
                    ReduceOp::Xor => wide.fold(0, |a, b| a ^ b),
                };
                r as $t
            }
            fn same(a: Self, b: Self) -> bool {
                a == b
            }
        }
    )*};
}

int_test_elem!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_test_elem {
    ($($t:ty: $from:expr, $to:expr);* $(;)?) => {$(
        impl TestElem for $t {
            fn sample(rng: &mut Rng) -> Self {
                $from((rng.next() % 9) as f64 - 4.0)
            }
            fn reference(op: ReduceOp, values: &[Self]) -> Self {
                let wide = values.iter().map(|&v| $to(v));
                let r: f64 = match op {
                    ReduceOp::Sum => wide.sum(),
                    ReduceOp::Prod => wide.product(),
                    ReduceOp::Min => wide.fold(f64::INFINITY, f64::min),
                    ReduceOp::Max => wide.fold(f64::NEG_INFINITY, f64::max),
                    _ => unreachable!("bitwise reductions take integers only"),
                };
                $from(r)
            }
            fn same(a: Self, b: Self) -> bool {
                $to(a) == $to(b)
            }
        }
    )*};
}

float_test_elem!(
    f16: f16::from_f64, f16::to_f64;
    bf16: bf16::from_f64, bf16::to_f64;
    f32: |v: f64| v as f32, |v: f32| v as f64;
    f64: |v: f64| v, |v: f64| v;
);

fn to_bytes<T: Element>(values: &[T]) -> Vec<u8> {
    let n = T::DTYPE.size();
    let mut out = vec![0u8; values.len() * n];
    for (chunk, v) in out.chunks_exact_mut(n).zip(values) {
        v.write_ne(chunk);
    }
    out
}

fn write_local<T: Element>(rt: &Runtime, addr: SymAddr, values: &[T]) {
    let bytes = to_bytes(values);
    // SAFETY: `bytes` is a live buffer of its length.
    unsafe { rt.putmem(addr, bytes.as_ptr() as usize, bytes.len(), rt.my_pe()) }.unwrap();
}

fn read_local<T: Element>(rt: &Runtime, addr: SymAddr, count: usize) -> Vec<T> {
    let n = T::DTYPE.size();
    let mut bytes = vec![0u8; count * n];
    // SAFETY: `bytes` is a live buffer of its length.
    unsafe { rt.getmem(bytes.as_mut_ptr() as usize, addr, bytes.len(), rt.my_pe()) }.unwrap();
    bytes.chunks_exact(n).map(T::read_ne).collect()
}

/// `count` values of world PE `pe` for case `case`.
fn values<T: TestElem>(pe: usize, case: u64, count: usize) -> Vec<T> {
    let mut rng = Rng::new(case << 16 | pe as u64);
    (0..count).map(|_| T::sample(&mut rng)).collect()
}

fn assert_same<T: TestElem>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(T::same(g, w), "{what}, {}: element {i} is {g:?}, expected {w:?}", T::DTYPE);
    }
}

/// Which form of each collective a test calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// The host collective (`broadcast`, ...).
    Host,
    /// Its on-stream form (`broadcast_on_stream`, ...) on stream 0, which the host backend runs
    /// as the host collective.
    OnStream,
}

/// The collectives in either form.
struct Calls<'a> {
    rt: &'a Runtime,
    form: Form,
}

impl Calls<'_> {
    fn broadcast(&self, team: Team, dst: SymAddr, src: SymAddr, nelems: usize, root: i32, dtype: DType) {
        match self.form {
            Form::Host => self.rt.broadcast(team, dst, src, nelems, root, dtype),
            // SAFETY: stream 0 on a backend without streams; the buffers outlive the call.
            Form::OnStream => unsafe { self.rt.broadcast_on_stream(team, dst, src, nelems, root, dtype, StreamHandle(0)) },
        }
        .unwrap()
    }

    fn fcollect(&self, team: Team, dst: SymAddr, src: SymAddr, nelems: usize, dtype: DType) {
        match self.form {
            Form::Host => self.rt.fcollect(team, dst, src, nelems, dtype),
            // SAFETY: as in `broadcast`.
            Form::OnStream => unsafe { self.rt.fcollect_on_stream(team, dst, src, nelems, dtype, StreamHandle(0)) },
        }
        .unwrap()
    }

    fn alltoall(&self, team: Team, dst: SymAddr, src: SymAddr, nelems: usize, dtype: DType) {
        match self.form {
            Form::Host => self.rt.alltoall(team, dst, src, nelems, dtype),
            // SAFETY: as in `broadcast`.
            Form::OnStream => unsafe { self.rt.alltoall_on_stream(team, dst, src, nelems, dtype, StreamHandle(0)) },
        }
        .unwrap()
    }

    fn reduce(&self, team: Team, op: ReduceOp, dst: SymAddr, src: SymAddr, nelems: usize, dtype: DType) {
        match self.form {
            Form::Host => self.rt.reduce(team, op, dst, src, nelems, dtype),
            // SAFETY: as in `broadcast`.
            Form::OnStream => unsafe { self.rt.reduce_on_stream(team, op, dst, src, nelems, dtype, StreamHandle(0)) },
        }
        .unwrap()
    }

    fn reducescatter(&self, team: Team, op: ReduceOp, dst: SymAddr, src: SymAddr, nelems: usize, dtype: DType) {
        match self.form {
            Form::Host => self.rt.reducescatter(team, op, dst, src, nelems, dtype),
            // SAFETY: as in `broadcast`.
            Form::OnStream => unsafe { self.rt.reducescatter_on_stream(team, op, dst, src, nelems, dtype, StreamHandle(0)) },
        }
        .unwrap()
    }
}

/// Runs every collective for `T` on `team`, with `nelems` elements, checking each result.
fn every_collective<T: TestElem>(rt: &Runtime, team: Team, src: SymAddr, dst: SymAddr, nelems: usize, case: u64) {
    every_collective_as::<T>(Form::Host, rt, team, src, dst, nelems, case)
}

/// [`every_collective`] in `form`.
fn every_collective_as<T: TestElem>(form: Form, rt: &Runtime, team: Team, src: SymAddr, dst: SymAddr, nelems: usize, case: u64) {
    let call = Calls { rt, form };
    let size = rt.team_n_pes(team).unwrap() as usize;
    let me = rt.team_my_pe(team).unwrap() as usize;
    let world: Vec<usize> =
        (0..size).map(|j| rt.team_translate_pe(team, j as i32, Team::WORLD).unwrap() as usize).collect();
    let dtype = T::DTYPE;
    let what = |op: &str| format!("{op} of {nelems} on team {} (PE {me} of {size})", team.id());

    // broadcast from a root that moves with the case.
    let root = (case as usize) % size;
    write_local(rt, src, &values::<T>(world[me], case, nelems));
    call.broadcast(team, dst, src, nelems, root as i32, dtype);
    assert_same(&read_local::<T>(rt, dst, nelems), &values::<T>(world[root], case, nelems), &what("broadcast"));

    // fcollect: member j's block at j.
    call.fcollect(team, dst, src, nelems, dtype);
    let want: Vec<T> = (0..size).flat_map(|j| values::<T>(world[j], case, nelems)).collect();
    assert_same(&read_local::<T>(rt, dst, nelems * size), &want, &what("fcollect"));

    // alltoall: block `me` of member j's source lands in block j.
    write_local(rt, src, &values::<T>(world[me], case + 1, nelems * size));
    call.alltoall(team, dst, src, nelems, dtype);
    let want: Vec<T> = (0..size)
        .flat_map(|j| values::<T>(world[j], case + 1, nelems * size)[me * nelems..(me + 1) * nelems].to_vec())
        .collect();
    assert_same(&read_local::<T>(rt, dst, nelems * size), &want, &what("alltoall"));

    // Every reduction this dtype takes; the last one in place (dest == source).
    let per_pe: Vec<Vec<T>> = (0..size).map(|j| values::<T>(world[j], case + 2, nelems)).collect();
    let want = |op| -> Vec<T> {
        (0..nelems).map(|i| T::reference(op, &per_pe.iter().map(|v| v[i]).collect::<Vec<_>>())).collect()
    };
    write_local(rt, src, &per_pe[me]);
    for op in ALL_REDUCE_OPS.into_iter().filter(|op| op.check(dtype).is_ok()) {
        call.reduce(team, op, dst, src, nelems, dtype);
        assert_same(&read_local::<T>(rt, dst, nelems), &want(op), &what(op.name()));
    }
    call.reduce(team, ReduceOp::Max, src, src, nelems, dtype);
    assert_same(&read_local::<T>(rt, src, nelems), &want(ReduceOp::Max), &what("in-place max"));

    // Reduce-scatter: block `me` of every member's source, reduced; the last one in place, into
    // this member's own block of the source.
    let blocks: Vec<Vec<T>> = (0..size).map(|j| values::<T>(world[j], case + 3, nelems * size)).collect();
    let want = |op| -> Vec<T> {
        let at = |i| blocks.iter().map(|v| v[me * nelems + i]).collect::<Vec<_>>();
        (0..nelems).map(|i| T::reference(op, &at(i))).collect()
    };
    write_local(rt, src, &blocks[me]);
    for op in ALL_REDUCE_OPS.into_iter().filter(|op| op.check(dtype).is_ok()) {
        call.reducescatter(team, op, dst, src, nelems, dtype);
        assert_same(&read_local::<T>(rt, dst, nelems), &want(op), &what(&format!("reducescatter {}", op.name())));
    }
    let own = src + me * nelems * dtype.size();
    call.reducescatter(team, ReduceOp::Min, own, src, nelems, dtype);
    assert_same(&read_local::<T>(rt, own, nelems), &want(ReduceOp::Min), &what("in-place reducescatter min"));
    rt.barrier(team).unwrap();
}

fn every_dtype(rt: &Runtime, team: Team, src: SymAddr, dst: SymAddr, nelems: usize, case: u64) {
    every_collective::<i8>(rt, team, src, dst, nelems, case);
    every_collective::<i16>(rt, team, src, dst, nelems, case + 10);
    every_collective::<i32>(rt, team, src, dst, nelems, case + 20);
    every_collective::<i64>(rt, team, src, dst, nelems, case + 30);
    every_collective::<u8>(rt, team, src, dst, nelems, case + 40);
    every_collective::<u16>(rt, team, src, dst, nelems, case + 50);
    every_collective::<u32>(rt, team, src, dst, nelems, case + 60);
    every_collective::<u64>(rt, team, src, dst, nelems, case + 70);
    every_collective::<f16>(rt, team, src, dst, nelems, case + 80);
    every_collective::<bf16>(rt, team, src, dst, nelems, case + 90);
    every_collective::<f32>(rt, team, src, dst, nelems, case + 100);
    every_collective::<f64>(rt, team, src, dst, nelems, case + 110);
}

const NELEMS: [usize; 3] = [1, 19, 1000];

#[test]
fn world_three_pes() {
    Pes::new("world_three_pes", 3).run(|_pe, n| {
        let rt = Runtime::init(InitOptions::default()).unwrap();
        let bytes = n * NELEMS[2] * 8;
        let (src, dst) = (rt.malloc(bytes).unwrap(), rt.malloc(bytes).unwrap());
        for (k, nelems) in NELEMS.into_iter().enumerate() {
            every_dtype(&rt, Team::WORLD, src, dst, nelems, 1000 * k as u64);
        }
        // Zero elements: nothing to move, still collective.
        rt.fcollect(Team::WORLD, dst, src, 0, DType::F32).unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn world_and_split_teams_four_pes() {
    Pes::new("world_and_split_teams_four_pes", 4).run(|pe, n| {
        let rt = Runtime::init(InitOptions::default()).unwrap();
        let bytes = n * NELEMS[2] * 8;
        let (src, dst) = (rt.malloc(bytes).unwrap(), rt.malloc(bytes).unwrap());
        every_dtype(&rt, Team::WORLD, src, dst, NELEMS[1], 7);
        // Even and odd PEs form two teams that run their collectives at the same time.
        let even = rt.team_split_strided(Team::WORLD, 0, 2, 2).unwrap();
        let odd = rt.team_split_strided(Team::WORLD, 1, 2, 2).unwrap();
        assert_eq!(even.is_some(), pe % 2 == 0);
        assert_eq!(odd.is_some(), pe % 2 == 1);
        let mine = even.or(odd).unwrap();
        for (k, nelems) in NELEMS.into_iter().enumerate() {
            every_dtype(&rt, mine, src, dst, nelems, 5000 + 1000 * k as u64);
        }
        // NODE and SHARED cover every PE on this host.
        every_collective::<f32>(&rt, Team::NODE, src, dst, 33, 9000);
        every_collective::<u64>(&rt, Team::SHARED, src, dst, 33, 9100);
        rt.barrier_all().unwrap();
        rt.team_destroy(mine).unwrap();
        rt.finalize().unwrap();
    });
}

/// The on-stream forms on the host backend: each runs as its host collective (the backend has
/// no streams), with the same results, on the world team and on a team of some PEs.
#[test]
fn on_stream_forms_three_pes() {
    Pes::new("on_stream_forms_three_pes", 3).run(|pe, n| {
        let rt = Runtime::init(InitOptions::default()).unwrap();
        let bytes = n * NELEMS[2] * 8;
        let (src, dst) = (rt.malloc(bytes).unwrap(), rt.malloc(bytes).unwrap());
        for (k, nelems) in NELEMS.into_iter().enumerate() {
            every_collective_as::<f32>(Form::OnStream, &rt, Team::WORLD, src, dst, nelems, 30_000 + 1000 * k as u64);
            every_collective_as::<i64>(Form::OnStream, &rt, Team::WORLD, src, dst, nelems, 30_001 + 1000 * k as u64);
        }
        let pair = rt.team_split_strided(Team::WORLD, 1, 1, 2).unwrap();
        assert_eq!(pair.is_some(), pe > 0);
        if let Some(pair) = pair {
            every_collective_as::<u16>(Form::OnStream, &rt, pair, src, dst, NELEMS[1], 34_000);
        }
        rt.barrier_all().unwrap();
        rt.finalize().unwrap();
    });
}

/// Every collective with the hierarchical forms forced (`RSHMEM_COLL_HIERARCHY_MIN_BYTES=0`):
/// where the PEs span hosts (the vhosts CI step: 2 virtual hosts of 2 PEs) each host's leader
/// alone moves data across hosts for broadcasts (roots on both hosts) and reductions (in place
/// too), the others copy from it; on one host this is the flat form, as in the tests above.
#[test]
fn hierarchical_forms_four_pes() {
    Pes::new("hierarchical_forms_four_pes", 4).env("RSHMEM_COLL_HIERARCHY_MIN_BYTES", "0").run(|pe, n| {
        let rt = Runtime::init(InitOptions::default()).unwrap();
        let bytes = n * NELEMS[2] * 8;
        let (src, dst) = (rt.malloc(bytes).unwrap(), rt.malloc(bytes).unwrap());
        for (k, nelems) in NELEMS.into_iter().enumerate() {
            every_collective::<f32>(&rt, Team::WORLD, src, dst, nelems, 20_000 + 1000 * k as u64);
            every_collective::<i64>(&rt, Team::WORLD, src, dst, nelems, 20_001 + 1000 * k as u64);
        }
        every_dtype(&rt, Team::WORLD, src, dst, NELEMS[1], 23_000);
        // Teams of one PE per host (PEs 0, 2 and 1, 3): every member is its host's leader.
        let even = rt.team_split_strided(Team::WORLD, 0, 2, 2).unwrap();
        let odd = rt.team_split_strided(Team::WORLD, 1, 2, 2).unwrap();
        assert_eq!(even.is_some(), pe % 2 == 0);
        let pair = even.or(odd).unwrap();
        every_collective::<f64>(&rt, pair, src, dst, NELEMS[2], 24_000);
        rt.barrier_all().unwrap();
        rt.team_destroy(pair).unwrap();
        rt.finalize().unwrap();
    });
}
