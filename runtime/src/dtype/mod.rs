//! Element types of typed RMA, waits and collectives, and the reduction operators.
//!
//! The dtypes themselves come from the one dtype table, `api/dtypes.toml`, through the generated
//! `table.rs` ([`DType`], its facts, [`crate::with_element`]); this file adds parsing, the
//! reduction operators and the host's arithmetic on elements.
//!
//! [`DType`] names the twelve SHMEM / NVSHMEM element types by their torch names, [`Element`] is
//! the matching Rust type (sealed: only those twelve), and [`ReduceOp`] the reductions of
//! `*_reduce` (`sum/prod/min/max` for every type, `and/or/xor` for integers only).
//! Values travel in native byte order: every PE of a job runs on the same kind of host.

use crate::error::{Error, Result};
use std::fmt;

impl DType {
    /// Parses a torch-style name: `"int8"`..`"uint64"`, `"float16"`, `"bfloat16"`, `"float32"`,
    /// `"float64"`, with or without a `torch.` prefix, and the torch aliases `half`, `float`,
    /// `double`, `short`, `int`, `long`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the text and listing the accepted names.
    pub fn parse(text: &str) -> Result<DType> {
        let t = text.trim();
        let t = t.strip_prefix("torch.").unwrap_or(t);
        let found = ALL_DTYPES
            .into_iter()
            .find(|d| d.name() == t)
            .or_else(|| DTYPE_ALIASES.into_iter().find(|(alias, _)| *alias == t).map(|(_, d)| d));
        found.ok_or_else(|| Error::InvalidArgument(format!("unknown dtype {text:?}; accepted: {}", names(&ALL_DTYPES))))
    }

    /// Checks that this is one of `accepted`, for the operation `what`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `what`, this dtype and the accepted ones.
    pub fn expect_one_of(self, what: &str, accepted: &[DType]) -> Result<()> {
        if accepted.contains(&self) {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "{what} does not take dtype {}; accepted: {}",
                self.name(),
                names(accepted)
            )))
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn names(list: &[DType]) -> String {
    list.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

/// A reduction operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (integers wrap).
    Sum,
    /// Product (integers wrap).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integers only).
    And,
    /// Bitwise or (integers only).
    Or,
    /// Bitwise xor (integers only).
    Xor,
}

/// Every reduction operator.
pub const ALL_REDUCE_OPS: [ReduceOp; 7] =
    [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::And, ReduceOp::Or, ReduceOp::Xor];

impl ReduceOp {
    /// The SHMEM name (`"sum"`, `"prod"`, `"min"`, `"max"`, `"and"`, `"or"`, `"xor"`).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::And => "and",
            ReduceOp::Or => "or",
            ReduceOp::Xor => "xor",
        }
    }

    /// Parses a name as given by [`ReduceOp::name`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] listing the accepted names.
    pub fn parse(text: &str) -> Result<ReduceOp> {
        let t = text.trim().to_ascii_lowercase();
        ALL_REDUCE_OPS.into_iter().find(|op| op.name() == t).ok_or_else(|| {
            Error::InvalidArgument(format!("unknown reduction {text:?}; accepted: sum, prod, min, max, and, or, xor"))
        })
    }

    /// The operator code the runtime's reduction kernel takes (`enum rshmemi_op` in
    /// `collective_device.h`).
    pub fn kernel_code(self) -> i32 {
        match self {
            ReduceOp::Sum => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Min => 2,
            ReduceOp::Max => 3,
            ReduceOp::And => 4,
            ReduceOp::Or => 5,
            ReduceOp::Xor => 6,
        }
    }

    /// Whether this operator is bitwise (integers only).
    pub fn is_bitwise(self) -> bool {
        matches!(self, ReduceOp::And | ReduceOp::Or | ReduceOp::Xor)
    }

    /// Checks that this operator takes `dtype`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the operator, the dtype and the accepted dtypes.
    pub fn check(self, dtype: DType) -> Result<()> {
        if self.is_bitwise() && !dtype.is_integer() {
            let ints: Vec<DType> = ALL_DTYPES.into_iter().filter(|d| d.is_integer()).collect();
            return Err(Error::InvalidArgument(format!(
                "reduction {} does not take dtype {}; it takes integers only: {}",
                self.name(),
                dtype.name(),
                names(&ints)
            )));
        }
        Ok(())
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is one of the twelve [`DType`]s. Sealed: implemented for `i8`..`u64`,
/// [`half::f16`], [`half::bf16`], `f32` and `f64` only.
pub trait Element: Copy + PartialOrd + fmt::Debug + Send + Sync + 'static + sealed::Sealed {
    /// The matching dtype.
    const DTYPE: DType;
    /// Reads one element from the first `size()` bytes of `bytes` (native byte order).
    fn read_ne(bytes: &[u8]) -> Self;
    /// Writes this element into the first `size()` bytes of `out` (native byte order).
    fn write_ne(self, out: &mut [u8]);
    /// `self <op> other`. Bitwise operators on floating types return `self` unchanged;
    /// callers check with [`ReduceOp::check`] first.
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    /// This element as a [`Scalar`] (exact: an `f64` holds every f16, bf16 and f32 value).
    fn to_scalar(self) -> Scalar;
    /// The element equal to `s`: `None` for an integer type given a float or an integer out of
    /// its range; a floating type rounds to its nearest value.
    fn from_scalar(s: Scalar) -> Option<Self>;
}

/// One value of any [`Element`] type, for the layers that receive untyped numbers (Python's
/// `p` / `g`) and pick the type by a [`DType`] at run time ([`crate::with_element`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// An integer.
    Int(i128),
    /// A floating-point number.
    Float(f64),
}

macro_rules! int_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl $crate::dtype::sealed::Sealed for $t {}
        impl $crate::dtype::Element for $t {
            const DTYPE: $crate::dtype::DType = $crate::dtype::DType::$d;
            fn read_ne(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_ne_bytes(b)
            }
            fn write_ne(self, out: &mut [u8]) {
                out[..std::mem::size_of::<$t>()].copy_from_slice(&self.to_ne_bytes());
            }
            fn to_scalar(self) -> $crate::dtype::Scalar {
                $crate::dtype::Scalar::Int(self.into())
            }
            fn from_scalar(s: $crate::dtype::Scalar) -> Option<Self> {
                match s {
                    $crate::dtype::Scalar::Int(v) => <$t>::try_from(v).ok(),
                    $crate::dtype::Scalar::Float(_) => None,
                }
            }
            fn combine(self, other: Self, op: $crate::dtype::ReduceOp) -> Self {
                match op {
                    $crate::dtype::ReduceOp::Sum => self.wrapping_add(other),
                    $crate::dtype::ReduceOp::Prod => self.wrapping_mul(other),
                    $crate::dtype::ReduceOp::Min => self.min(other),
                    $crate::dtype::ReduceOp::Max => self.max(other),
                    $crate::dtype::ReduceOp::And => self & other,
                    $crate::dtype::ReduceOp::Or => self | other,
                    $crate::dtype::ReduceOp::Xor => self ^ other,
                }
            }
        }
    )*};
}


macro_rules! float_element {
    // `$from`: the rounding conversion from f64 (half's `from_f64`, an `as` cast for f32).
    ($($t:ty => $d:ident | $from:expr),* $(,)?) => {$(
        impl $crate::dtype::sealed::Sealed for $t {}
        impl $crate::dtype::Element for $t {
            const DTYPE: $crate::dtype::DType = $crate::dtype::DType::$d;
            fn read_ne(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_ne_bytes(b)
            }
            fn write_ne(self, out: &mut [u8]) {
                out[..std::mem::size_of::<$t>()].copy_from_slice(&self.to_ne_bytes());
            }
            fn to_scalar(self) -> $crate::dtype::Scalar {
                $crate::dtype::Scalar::Float(f64::from(self))
            }
            fn from_scalar(s: $crate::dtype::Scalar) -> Option<Self> {
                let from: fn(f64) -> $t = $from;
                Some(match s {
                    $crate::dtype::Scalar::Float(v) => from(v),
                    $crate::dtype::Scalar::Int(v) => from(v as f64),
                })
            }
            fn combine(self, other: Self, op: $crate::dtype::ReduceOp) -> Self {
                // half's f16/bf16 arithmetic goes through f32 and rounds once per step, as a
                // device reduction in fp16 does.
                match op {
                    $crate::dtype::ReduceOp::Sum => self + other,
                    $crate::dtype::ReduceOp::Prod => self * other,
                    $crate::dtype::ReduceOp::Min => self.min(other),
                    $crate::dtype::ReduceOp::Max => self.max(other),
                    $crate::dtype::ReduceOp::And | $crate::dtype::ReduceOp::Or | $crate::dtype::ReduceOp::Xor => self,
                }
            }
        }
    )*};
}

// The element types come from the dtype table (after the macros above, which it invokes).
mod table;
pub use half::{bf16, f16};
pub use table::{DType, ALL_DTYPES, ATOMIC_DTYPES, DTYPE_ALIASES, SYNC_DTYPES};

/// Combines `src` into `acc` element-wise: `acc[i] = acc[i] <op> src[i]`, both holding
/// elements of `dtype` in native byte order.
///
/// # Errors
/// [`Error::InvalidArgument`] when `op` does not take `dtype`, or when the slices have different
/// lengths or a length that is not a multiple of the element size.
pub fn reduce_bytes(dtype: DType, op: ReduceOp, acc: &mut [u8], src: &[u8]) -> Result<()> {
    op.check(dtype)?;
    if acc.len() != src.len() || acc.len() % dtype.size() != 0 {
        return Err(Error::InvalidArgument(format!(
            "reduce_bytes: buffers of {} and {} bytes do not hold whole {} elements of equal count",
            acc.len(),
            src.len(),
            dtype.name()
        )));
    }
    crate::with_element!(dtype, T => reduce_typed::<T>(op, acc, src));
    Ok(())
}

fn reduce_typed<T: Element>(op: ReduceOp, acc: &mut [u8], src: &[u8]) {
    let n = T::DTYPE.size();
    for (a, s) in acc.chunks_exact_mut(n).zip(src.chunks_exact(n)) {
        T::read_ne(a).combine(T::read_ne(s), op).write_ne(a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_round_trip_and_refuse_what_does_not_fit() {
        for d in ALL_DTYPES {
            crate::with_element!(d, T => {
                let one = T::from_scalar(Scalar::Int(1)).unwrap();
                assert_eq!(T::from_scalar(one.to_scalar()), Some(one), "{d}");
                if d.is_integer() {
                    let (lo, hi) = d.int_range().unwrap();
                    assert_eq!(T::from_scalar(Scalar::Int(hi)).map(|v| v.to_scalar()), Some(Scalar::Int(hi)), "{d}");
                    assert_eq!(T::from_scalar(Scalar::Int(hi + 1)), None, "{d}");
                    assert_eq!(T::from_scalar(Scalar::Int(lo - 1)), None, "{d}");
                    assert_eq!(T::from_scalar(Scalar::Float(1.0)), None, "{d}");
                } else {
                    assert_eq!(T::from_scalar(Scalar::Float(-2.5)).map(|v| v.to_scalar()), Some(Scalar::Float(-2.5)), "{d}");
                }
            });
        }
        // Rounding to the dtype, as torch does: 1/3 in float16 is 0.333251953125.
        assert_eq!(f16::from_scalar(Scalar::Float(1.0 / 3.0)).unwrap().to_scalar(), Scalar::Float(0.333251953125));
    }

    #[test]
    fn names_round_trip_and_sizes() {
        for d in ALL_DTYPES {
            assert_eq!(DType::parse(d.name()).unwrap(), d);
            assert_eq!(DType::parse(&format!("torch.{}", d.name())).unwrap(), d);
        }
        assert_eq!(DType::parse("half").unwrap(), DType::F16);
        assert_eq!(DType::parse("long").unwrap(), DType::I64);
        let sizes: Vec<usize> = ALL_DTYPES.iter().map(|d| d.size()).collect();
        assert_eq!(sizes, [1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8]);
        let err = DType::parse("complex64").unwrap_err().to_string();
        assert!(err.contains("complex64") && err.contains("bfloat16"), "{err}");
    }

    #[test]
    fn element_dtypes_match_sizes() {
        fn check<T: Element>() {
            assert_eq!(std::mem::size_of::<T>(), T::DTYPE.size(), "{}", T::DTYPE);
        }
        check::<i8>();
        check::<i16>();
        check::<i32>();
        check::<i64>();
        check::<u8>();
        check::<u16>();
        check::<u32>();
        check::<u64>();
        check::<f16>();
        check::<bf16>();
        check::<f32>();
        check::<f64>();
    }

    #[test]
    fn integer_reductions_wrap_and_are_bitwise() {
        let mut acc = Vec::new();
        let mut src = Vec::new();
        for (a, s) in [(i8::MAX, 1i8), (-3, 5), (0b0110, 0b0011)] {
            acc.push(a as u8);
            src.push(s as u8);
        }
        let run = |op| {
            let mut a = acc.clone();
            reduce_bytes(DType::I8, op, &mut a, &src).unwrap();
            a.iter().map(|&b| b as i8).collect::<Vec<_>>()
        };
        assert_eq!(run(ReduceOp::Sum), [i8::MIN, 2, 9]);
        assert_eq!(run(ReduceOp::Prod), [i8::MAX, -15, 18]);
        assert_eq!(run(ReduceOp::Min), [1, -3, 3]);
        assert_eq!(run(ReduceOp::Max), [i8::MAX, 5, 6]);
        assert_eq!(run(ReduceOp::And), [1, 5 & -3, 2]);
        assert_eq!(run(ReduceOp::Or), [i8::MAX, -3 | 5, 7]);
        assert_eq!(run(ReduceOp::Xor), [i8::MAX ^ 1, -3 ^ 5, 5]);
    }

    #[test]
    fn unsigned_min_max_compare_unsigned() {
        let mut acc = u64::MAX.to_ne_bytes().to_vec();
        let src = 1u64.to_ne_bytes();
        reduce_bytes(DType::U64, ReduceOp::Min, &mut acc, &src).unwrap();
        assert_eq!(u64::read_ne(&acc), 1);
        let mut acc = u32::MAX.to_ne_bytes().to_vec();
        reduce_bytes(DType::U32, ReduceOp::Max, &mut acc, &2u32.to_ne_bytes()).unwrap();
        assert_eq!(u32::read_ne(&acc), u32::MAX);
    }

    #[test]
    fn float_reductions() {
        let mut acc = Vec::new();
        for v in [1.5f32, -2.0] {
            acc.extend_from_slice(&f16::from_f32(v).to_ne_bytes());
        }
        let mut src = Vec::new();
        for v in [2.0f32, 4.0] {
            src.extend_from_slice(&f16::from_f32(v).to_ne_bytes());
        }
        let read = |b: &[u8]| b.chunks(2).map(|c| f16::read_ne(c).to_f32()).collect::<Vec<_>>();
        let mut a = acc.clone();
        reduce_bytes(DType::F16, ReduceOp::Sum, &mut a, &src).unwrap();
        assert_eq!(read(&a), [3.5, 2.0]);
        let mut a = acc.clone();
        reduce_bytes(DType::F16, ReduceOp::Prod, &mut a, &src).unwrap();
        assert_eq!(read(&a), [3.0, -8.0]);
        let mut a = acc.clone();
        reduce_bytes(DType::F16, ReduceOp::Min, &mut a, &src).unwrap();
        assert_eq!(read(&a), [1.5, -2.0]);

        let mut a = 0.25f64.to_ne_bytes().to_vec();
        reduce_bytes(DType::F64, ReduceOp::Max, &mut a, &(-1.0f64).to_ne_bytes()).unwrap();
        assert_eq!(f64::read_ne(&a), 0.25);
        let mut a = bf16::from_f32(3.0).to_ne_bytes().to_vec();
        reduce_bytes(DType::BF16, ReduceOp::Sum, &mut a, &bf16::from_f32(5.0).to_ne_bytes()).unwrap();
        assert_eq!(bf16::read_ne(&a).to_f32(), 8.0);
    }

    #[test]
    fn bitwise_on_floats_is_refused_with_names() {
        for op in [ReduceOp::And, ReduceOp::Or, ReduceOp::Xor] {
            for d in [DType::F16, DType::BF16, DType::F32, DType::F64] {
                let mut a = vec![0u8; d.size()];
                let err = reduce_bytes(d, op, &mut a, &vec![0u8; d.size()]).unwrap_err().to_string();
                assert!(err.contains(op.name()) && err.contains(d.name()) && err.contains("int32"), "{err}");
            }
        }
        assert!(ReduceOp::Sum.check(DType::F32).is_ok());
        assert!(ReduceOp::Xor.check(DType::U8).is_ok());
    }

    #[test]
    fn mismatched_lengths_are_refused() {
        let mut a = vec![0u8; 8];
        assert!(reduce_bytes(DType::I32, ReduceOp::Sum, &mut a, &[0u8; 4]).is_err());
        let mut a = vec![0u8; 6];
        assert!(reduce_bytes(DType::I32, ReduceOp::Sum, &mut a, &[0u8; 6]).is_err());
    }

    #[test]
    fn int_bits_and_ranges() {
        assert_eq!(DType::I32.int_from_bits(0xffff_ffff), Some(-1));
        assert_eq!(DType::U32.int_from_bits(0xffff_ffff), Some(0xffff_ffff));
        assert_eq!(DType::I64.int_from_bits(u64::MAX), Some(-1));
        assert_eq!(DType::U64.int_from_bits(u64::MAX), Some(u64::MAX as i128));
        assert_eq!(DType::F32.int_from_bits(0), None);
        assert_eq!(DType::U16.int_range(), Some((0, 65535)));
        assert!(DType::F64.int_range().is_none());
        let err = DType::F32.expect_one_of("wait_until", &SYNC_DTYPES).unwrap_err().to_string();
        assert!(err.contains("wait_until") && err.contains("float32") && err.contains("uint64"), "{err}");
    }
}
