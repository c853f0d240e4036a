//! Typed arrays of symmetric allocations (feature `ndarray`) on the host backend, as 2 PEs:
//! copies to and from a peer, views of this PE's and the peer's copy, and each kind of bad input
//! refused with its error.

mod common;

use common::Pes;
use ndarray::{s, Array1, Array2, ShapeBuilder};
use rshmem::runtime::{InitOptions, Runtime};
use rshmem::SymAddr;
use rshmem::Error;

fn init() -> Runtime {
    Runtime::init(InitOptions::default()).expect("init")
}

#[test]
fn arrays_between_two_pes() {
    Pes::new("arrays_between_two_pes", 2).run(|pe, n| {
        let rt = init();
        let next = (pe + 1) % n;
        let buf = rt.calloc(6 * 5, 8).unwrap();
        // A column-major source goes out row-major: what arrives is the same matrix.
        let mut mine = Array2::<f64>::zeros((6, 5).f());
        mine.indexed_iter_mut()
            .for_each(|((i, j), v)| *v = (1000 * pe + 10 * i + j) as f64);
        rt.put_array(buf, &mine, next).unwrap();
        rt.barrier_all().unwrap();
        let got: Array2<f64> = rt.get_array(buf, (6, 5), pe).unwrap();
        let prev = (pe + n - 1) % n;
        assert_eq!(got[[2, 3]], (1000 * prev + 23) as f64);
        // Column-major read of the same bytes is the transpose's layout.
        let f: Array2<f64> = rt.get_array(buf, (5, 6).f(), pe).unwrap();
        assert_eq!(f.t(), got);
        // A slice of a view, and the peer's copy viewed in place.
        // SAFETY: between these barriers nobody writes `buf`.
        unsafe {
            let view = rt.array_view::<f64, _>(buf, (6, 5), pe).unwrap();
            assert_eq!(view.slice(s![1.., 2]), got.slice(s![1.., 2]));
            let theirs = rt.array_view::<f64, _>(buf, (6, 5), next).unwrap();
            assert_eq!(theirs, mine);
        }
        rt.barrier_all().unwrap();
        // A mutable view writes this PE's copy; the peer reads it with a get.
        // SAFETY: only this PE touches its own copy until the barrier.
        unsafe { rt.array_view_mut::<f64, _>(buf, 30, pe).unwrap() }.fill(pe as f64 + 0.5);
        rt.barrier_all().unwrap();
        let back: Array1<f64> = rt.get_array(buf, 30, next).unwrap();
        assert!(back.iter().all(|&v| v == next as f64 + 0.5));
        // Empty shapes move nothing and still check the PE.
        let empty: Array2<f64> = rt.get_array(buf, (0, 5), pe).unwrap();
        assert_eq!(empty.len(), 0);
        rt.put_array(buf, &empty, next).unwrap();
        rt.barrier_all().unwrap();
        rt.free(buf).unwrap();
        rt.finalize().unwrap();
    });
}

#[test]
fn bad_arrays_are_refused() {
    Pes::new("bad_arrays_are_refused", 2).run(|pe, n| {
        let rt = init();
        let buf = rt.malloc(64).unwrap(); // 16 f32
        let err = |r: Result<(), Error>| r.expect_err("accepted bad input");
        // More elements than the allocation holds.
        let e = err(rt.get_array::<f32, _>(buf, (4, 5), pe).map(drop));
        assert!(matches!(e, Error::NotAllocated { .. }), "{e}");
        let e = err(rt.put_array(buf, &Array1::<f32>::zeros(17), pe));
        assert!(matches!(e, Error::NotAllocated { .. }), "{e}");
        // Not a symmetric address, a PE out of range.
        let local = [0f32; 4];
        let e = err(rt
            .get_array::<f32, _>(SymAddr::new(local.as_ptr() as usize), 4, pe)
            .map(drop));
        assert!(matches!(e, Error::NotSymmetric { .. }), "{e}");
        let e = err(rt.get_array::<f32, _>(buf, 4, n).map(drop));
        assert!(matches!(e, Error::PeOutOfRange { .. }), "{e}");
        let e = err(rt.put_array(buf, &Array1::<f32>::zeros(0), n));
        assert!(matches!(e, Error::PeOutOfRange { .. }), "{e}");
        // SAFETY: every view below is refused, so none is made.
        unsafe {
            let e = err(rt.array_view::<f32, _>(buf + 2, 4, pe).map(drop));
            assert!(
                matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("not aligned"),
                "{e}"
            );
            let e = err(rt.array_view::<f32, _>(buf, 17, pe).map(drop));
            assert!(matches!(e, Error::NotAllocated { .. }), "{e}");
            let e = err(rt.array_view_mut::<f32, _>(buf, 4, n).map(drop));
            assert!(matches!(e, Error::PeOutOfRange { .. }), "{e}");
        }
        rt.free(buf).unwrap();
        // SAFETY: refused, as the allocation is gone.
        let e = err(unsafe { rt.array_view::<f32, _>(buf, 4, pe) }.map(drop));
        assert!(
            matches!(e, Error::NotAllocated { .. } | Error::NotSymmetric { .. }),
            "{e}"
        );
        let e = err(rt.get_array::<f32, _>(buf, 4, pe).map(drop));
        assert!(
            matches!(e, Error::NotAllocated { .. } | Error::NotSymmetric { .. }),
            "{e}"
        );
        rt.finalize().unwrap();
    });
}
