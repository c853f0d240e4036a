//! Element types of typed RMA, waits and collectives, and the reduction operators.
//!
//! [`DType`] names the twelve SHMEM / NVSHMEM element types by their torch names, [`Element`] is
//! the matching Rust type (sealed: only those twelve), and [`ReduceOp`] the reductions of
//! `*_reduce` (`sum/prod/min/max` for every type, `and/or/xor` for integers only).
//! Values travel in native byte order: every PE of a job runs on the same kind of host.

use crate::error::{Error, Result};
use half::{bf16, f16};
use std::fmt;

/// An element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `int8`
    I8,
    /// `int16`
    I16,
    /// `int32`
    I32,
    /// `int64`
    I64,
    /// `uint8`
    U8,
    /// `uint16`
    U16,
    /// `uint32`
    U32,
    /// `uint64`
    U64,
    /// `float16` (IEEE binary16)
    F16,
    /// `bfloat16`
    BF16,
    /// `float32`
    F32,
    /// `float64`
    F64,
}

/// Every dtype, in the order the docs list them.
pub const ALL_DTYPES: [DType; 12] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// The torch name (`"int8"`, ..., `"bfloat16"`, `"float64"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Parses a torch-style name: `"int8"`..`"uint64"`, `"float16"`, `"bfloat16"`, `"float32"`,
    /// `"float64"`, with or without a `torch.` prefix, and the torch aliases `half`, `float`,
    /// `double`, `short`, `int`, `long`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the text and listing the accepted names.
    pub fn parse(text: &str) -> Result<DType> {
        let t = text.trim();
        let t = t.strip_prefix("torch.").unwrap_or(t);
        let found = match t {
            "half" => Some(DType::F16),
            "float" => Some(DType::F32),
            "double" => Some(DType::F64),
            "short" => Some(DType::I16),
            "int" => Some(DType::I32),
            "long" => Some(DType::I64),
            _ => ALL_DTYPES.into_iter().find(|d| d.name() == t),
        };
        found.ok_or_else(|| Error::InvalidArgument(format!("unknown dtype {text:?}; accepted: {}", names(&ALL_DTYPES))))
    }

    /// Whether this is an integer type.
    pub fn is_integer(self) -> bool {
        !matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Whether this is a signed integer type.
    pub fn is_signed_integer(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// The range of an integer type as `i128` (`None` for floating types).
    pub fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            DType::I8 => (i8::MIN.into(), i8::MAX.into()),
            DType::I16 => (i16::MIN.into(), i16::MAX.into()),
            DType::I32 => (i32::MIN.into(), i32::MAX.into()),
            DType::I64 => (i64::MIN.into(), i64::MAX.into()),
            DType::U8 => (0, u8::MAX.into()),
            DType::U16 => (0, u16::MAX.into()),
            DType::U32 => (0, u32::MAX.into()),
            DType::U64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }

    /// Interprets the low `size()` bytes of `bits` as an integer of this type.
    /// `None` for floating types.
    pub fn int_from_bits(self, bits: u64) -> Option<i128> {
        Some(match self {
            DType::I8 => (bits as u8 as i8).into(),
            DType::I16 => (bits as u16 as i16).into(),
            DType::I32 => (bits as u32 as i32).into(),
            DType::I64 => (bits as i64).into(),
            DType::U8 => (bits as u8).into(),
            DType::U16 => (bits as u16).into(),
            DType::U32 => (bits as u32).into(),
            DType::U64 => bits.into(),
            _ => return None,
        })
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

/// The dtypes of point-to-point synchronization (`wait_until`, `test`, ...).
pub const SYNC_DTYPES: [DType; 4] = [DType::I32, DType::I64, DType::U32, DType::U64];

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
}

macro_rules! int_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn read_ne(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_ne_bytes(b)
            }
            fn write_ne(self, out: &mut [u8]) {
                out[..std::mem::size_of::<$t>()].copy_from_slice(&self.to_ne_bytes());
            }
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum => self.wrapping_add(other),
                    ReduceOp::Prod => self.wrapping_mul(other),
                    ReduceOp::Min => self.min(other),
                    ReduceOp::Max => self.max(other),
                    ReduceOp::And => self & other,
                    ReduceOp::Or => self | other,
                    ReduceOp::Xor => self ^ other,
                }
            }
        }
    )*};
}

int_element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);

macro_rules! float_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn read_ne(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(&bytes[..std::mem::size_of::<$t>()]);
                <$t>::from_ne_bytes(b)
            }
            fn write_ne(self, out: &mut [u8]) {
                out[..std::mem::size_of::<$t>()].copy_from_slice(&self.to_ne_bytes());
            }
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                // half's f16/bf16 arithmetic goes through f32 and rounds once per step, as a
                // device reduction in fp16 does.
                match op {
                    ReduceOp::Sum => self + other,
                    ReduceOp::Prod => self * other,
                    ReduceOp::Min => self.min(other),
                    ReduceOp::Max => self.max(other),
                    ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => self,
                }
            }
        }
    )*};
}

float_element!(f16 => F16, bf16 => BF16, f32 => F32, f64 => F64);

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
    match dtype {
        DType::I8 => reduce_typed::<i8>(op, acc, src),
        DType::I16 => reduce_typed::<i16>(op, acc, src),
        DType::I32 => reduce_typed::<i32>(op, acc, src),
        DType::I64 => reduce_typed::<i64>(op, acc, src),
        DType::U8 => reduce_typed::<u8>(op, acc, src),
        DType::U16 => reduce_typed::<u16>(op, acc, src),
        DType::U32 => reduce_typed::<u32>(op, acc, src),
        DType::U64 => reduce_typed::<u64>(op, acc, src),
        DType::F16 => reduce_typed::<f16>(op, acc, src),
        DType::BF16 => reduce_typed::<bf16>(op, acc, src),
        DType::F32 => reduce_typed::<f32>(op, acc, src),
        DType::F64 => reduce_typed::<f64>(op, acc, src),
    }
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
