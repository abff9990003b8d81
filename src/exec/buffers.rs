//! Typed host buffer contents: initial values from [`Init`] and the final values a run
//! returns.
//!
//! # Initial contents (exact generation, the same on every machine)
//!
//! - `Zeros`: every element 0.
//! - `Iota`: element `i` is `i` converted with Rust `as` (so `u8` wraps modulo 256, `i32`
//!   wraps past `i32::MAX`, floats round to nearest).
//! - `Fill(v)`: every element is `v as T` (Rust `as`: floats round to nearest, integers
//!   truncate toward zero and saturate, NaN becomes 0).
//! - `Random(seed)`: a `rand_chacha::ChaCha8Rng` from `SeedableRng::seed_from_u64(seed)`
//!   (rand_core 0.6's PCG32 expansion of the seed into the 32-byte key); one `next_u64()`
//!   per element in index order, giving `u`:
//!   `f64`: `(u >> 11) as f64 * 2^-53` (uniform in `[0, 1)`);
//!   `f32`: `(u >> 40) as f32 * 2^-24` (uniform in `[0, 1)`);
//!   integers: `u % 100` (in `[0, 100)`).

use crate::model::{Buffer, Elem, ElemType, Init};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The elements of one buffer.
#[derive(Clone, Debug, PartialEq)]
pub enum BufferData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
}

/// Element generator for [`Init`]: one value per index, in index order (the rules of
/// the module docs). Shared by [`BufferData::init`] and [`init_bytes`], so both give the
/// same values.
enum Gen {
    Zeros,
    Iota,
    Fill(f64),
    Random(Box<ChaCha8Rng>),
}

impl Gen {
    fn new(init: &Init) -> Gen {
        match init {
            Init::Zeros => Gen::Zeros,
            Init::Iota => Gen::Iota,
            Init::Fill(v) => Gen::Fill(*v),
            Init::Random(seed) => Gen::Random(Box::new(ChaCha8Rng::seed_from_u64(*seed))),
        }
    }
    /// `(float, int)`: the value of element `i` before the per-type conversion (for
    /// `Random`, the float is unused: each type takes its bits from the integer draw).
    fn draw(&mut self, i: usize) -> (f64, u64) {
        match self {
            Gen::Zeros => (0.0, 0),
            Gen::Iota => (i as f64, i as u64),
            Gen::Fill(v) => (*v, 0),
            Gen::Random(rng) => (0.0, rng.next_u64()),
        }
    }
    fn f32(&mut self, i: usize) -> f32 {
        match self {
            Gen::Fill(v) => *v as f32,
            Gen::Random(_) => {
                let u = self.draw(i).1;
                (u >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
            }
            _ => self.draw(i).0 as f32,
        }
    }
    fn f64(&mut self, i: usize) -> f64 {
        match self {
            Gen::Random(_) => {
                let u = self.draw(i).1;
                (u >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
            }
            _ => self.draw(i).0,
        }
    }
    fn int(&mut self, i: usize) -> IntVal {
        match self {
            Gen::Fill(v) => IntVal::Float(*v),
            Gen::Random(_) => IntVal::Int(self.draw(i).1 % 100),
            _ => IntVal::Int(self.draw(i).1),
        }
    }
}

/// An integer element before its `as` conversion: from an integer (Iota, Random) or
/// from a float (Fill: `v as T` truncates and saturates).
#[derive(Clone, Copy)]
enum IntVal {
    Int(u64),
    Float(f64),
}

impl IntVal {
    fn i32(self) -> i32 {
        match self {
            IntVal::Int(u) => u as i32,
            IntVal::Float(v) => v as i32,
        }
    }
    fn i64(self) -> i64 {
        match self {
            IntVal::Int(u) => u as i64,
            IntVal::Float(v) => v as i64,
        }
    }
    fn u8(self) -> u8 {
        match self {
            IntVal::Int(u) => u as u8,
            IntVal::Float(v) => v as u8,
        }
    }
}

/// Elements per chunk handed to the sink of [`init_bytes`] (256 KiB of `f32`).
const CHUNK: usize = 1 << 16;

/// The initial contents of `buf` as native-endian bytes, exactly
/// `BufferData::init(buf).to_ne_bytes()`, passed to `sink` in order as consecutive chunks
/// of at most `CHUNK` elements — without building the whole buffer (so writing a
/// large buffer into host memory is one pass over it; a constant fill converts one chunk
/// once and hands it out repeatedly).
pub fn init_bytes(buf: &Buffer, mut sink: impl FnMut(&[u8])) {
    fn emit<const N: usize>(
        n: usize,
        constant: bool,
        mut elem: impl FnMut(usize) -> [u8; N],
        sink: &mut dyn FnMut(&[u8]),
    ) {
        let mut chunk: Vec<u8> = Vec::with_capacity(CHUNK.min(n) * N);
        let mut i = 0;
        while i < n {
            let m = CHUNK.min(n - i);
            if !(constant && chunk.len() == m * N) {
                chunk.clear();
                for j in i..i + m {
                    chunk.extend_from_slice(&elem(j));
                }
            }
            sink(&chunk[..m * N]);
            i += m;
        }
    }
    let n = buf.len as usize;
    let constant = matches!(buf.init, Init::Zeros | Init::Fill(_));
    let mut g = Gen::new(&buf.init);
    let sink: &mut dyn FnMut(&[u8]) = &mut sink;
    match buf.ty {
        ElemType::F32 => emit(n, constant, |i| g.f32(i).to_ne_bytes(), sink),
        ElemType::F64 => emit(n, constant, |i| g.f64(i).to_ne_bytes(), sink),
        ElemType::I32 => emit(n, constant, |i| g.int(i).i32().to_ne_bytes(), sink),
        ElemType::I64 => emit(n, constant, |i| g.int(i).i64().to_ne_bytes(), sink),
        ElemType::U8 => emit(n, constant, |i| [g.int(i).u8()], sink),
    }
}

impl BufferData {
    /// The initial contents of `buf` (see the module docs).
    pub fn init(buf: &Buffer) -> BufferData {
        let n = buf.len as usize;
        let mut g = Gen::new(&buf.init);
        match buf.ty {
            ElemType::F32 => BufferData::F32((0..n).map(|i| g.f32(i)).collect()),
            ElemType::F64 => BufferData::F64((0..n).map(|i| g.f64(i)).collect()),
            ElemType::I32 => BufferData::I32((0..n).map(|i| g.int(i).i32()).collect()),
            ElemType::I64 => BufferData::I64((0..n).map(|i| g.int(i).i64()).collect()),
            ElemType::U8 => BufferData::U8((0..n).map(|i| g.int(i).u8()).collect()),
        }
    }

    /// [`BufferData::init`] with its vector allocated fallibly: `None` if the memory
    /// cannot be had (instead of an abort).
    pub fn try_init(buf: &Buffer) -> Option<BufferData> {
        fn make<T>(n: usize, f: impl FnMut(usize) -> T) -> Option<Vec<T>> {
            let mut v = crate::runtime::memory::try_vec(n)?;
            v.extend((0..n).map(f));
            Some(v)
        }
        let n = usize::try_from(buf.len).ok()?;
        let mut g = Gen::new(&buf.init);
        Some(match buf.ty {
            ElemType::F32 => BufferData::F32(make(n, |i| g.f32(i))?),
            ElemType::F64 => BufferData::F64(make(n, |i| g.f64(i))?),
            ElemType::I32 => BufferData::I32(make(n, |i| g.int(i).i32())?),
            ElemType::I64 => BufferData::I64(make(n, |i| g.int(i).i64())?),
            ElemType::U8 => BufferData::U8(make(n, |i| g.int(i).u8())?),
        })
    }

    /// A copy, allocated fallibly: `None` if the memory cannot be had.
    pub(crate) fn try_clone(&self) -> Option<BufferData> {
        fn copy<T: Copy>(v: &[T]) -> Option<Vec<T>> {
            let mut c = crate::runtime::memory::try_vec(v.len())?;
            c.extend_from_slice(v);
            Some(c)
        }
        Some(match self {
            BufferData::F32(v) => BufferData::F32(copy(v)?),
            BufferData::F64(v) => BufferData::F64(copy(v)?),
            BufferData::I32(v) => BufferData::I32(copy(v)?),
            BufferData::I64(v) => BufferData::I64(copy(v)?),
            BufferData::U8(v) => BufferData::U8(copy(v)?),
        })
    }

    /// The first element's address as a byte pointer, for code that writes the elements
    /// through raw pointers (the reference interpreter). Creates no reference to the
    /// elements ([`Vec::as_mut_ptr`]), so the pointer stays valid while the vector is
    /// neither touched through a reference nor resized.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        match self {
            BufferData::F32(v) => v.as_mut_ptr() as *mut u8,
            BufferData::F64(v) => v.as_mut_ptr() as *mut u8,
            BufferData::I32(v) => v.as_mut_ptr() as *mut u8,
            BufferData::I64(v) => v.as_mut_ptr() as *mut u8,
            BufferData::U8(v) => v.as_mut_ptr(),
        }
    }

    /// Decodes native-endian bytes (trailing bytes short of an element are ignored).
    pub fn from_ne_bytes(ty: ElemType, bytes: &[u8]) -> BufferData {
        macro_rules! dec {
            ($v:ident, $t:ty) => {
                BufferData::$v(
                    bytes
                        .chunks_exact(std::mem::size_of::<$t>())
                        .map(|c| <$t>::from_ne_bytes(c.try_into().unwrap_or_default()))
                        .collect(),
                )
            };
        }
        match ty {
            ElemType::F32 => dec!(F32, f32),
            ElemType::F64 => dec!(F64, f64),
            ElemType::I32 => dec!(I32, i32),
            ElemType::I64 => dec!(I64, i64),
            ElemType::U8 => BufferData::U8(bytes.to_vec()),
        }
    }

    /// Native-endian bytes.
    pub fn to_ne_bytes(&self) -> Vec<u8> {
        fn enc<const N: usize, T: Copy>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
            let mut out = vec![0u8; v.len() * N];
            for (c, x) in out.chunks_exact_mut(N).zip(v) {
                c.copy_from_slice(&f(*x));
            }
            out
        }
        match self {
            BufferData::F32(v) => enc(v, f32::to_ne_bytes),
            BufferData::F64(v) => enc(v, f64::to_ne_bytes),
            BufferData::I32(v) => enc(v, i32::to_ne_bytes),
            BufferData::I64(v) => enc(v, i64::to_ne_bytes),
            BufferData::U8(v) => v.clone(),
        }
    }

    pub fn ty(&self) -> ElemType {
        match self {
            BufferData::F32(_) => ElemType::F32,
            BufferData::F64(_) => ElemType::F64,
            BufferData::I32(_) => ElemType::I32,
            BufferData::I64(_) => ElemType::I64,
            BufferData::U8(_) => ElemType::U8,
        }
    }

    /// Length in elements.
    pub fn len(&self) -> usize {
        match self {
            BufferData::F32(v) => v.len(),
            BufferData::F64(v) => v.len(),
            BufferData::I32(v) => v.len(),
            BufferData::I64(v) => v.len(),
            BufferData::U8(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as `f64` (exact for every type but large `i64`).
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match self {
            BufferData::F32(v) => v.get(i).map(|x| *x as f64),
            BufferData::F64(v) => v.get(i).copied(),
            BufferData::I32(v) => v.get(i).map(|x| *x as f64),
            BufferData::I64(v) => v.get(i).map(|x| *x as f64),
            BufferData::U8(v) => v.get(i).map(|x| *x as f64),
        }
    }
}

/// Named buffers in program order (the buffers of an OpGraph).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Buffers {
    entries: Vec<(String, BufferData)>,
}

impl Buffers {
    pub fn new(entries: Vec<(String, BufferData)>) -> Buffers {
        Buffers { entries }
    }

    /// The initial contents of every buffer.
    pub fn initial(buffers: &[Buffer]) -> Buffers {
        Buffers::new(
            buffers
                .iter()
                .map(|b| (b.name.clone(), BufferData::init(b)))
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&BufferData> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, d)| d)
    }

    /// `(name, data)` in program order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &BufferData)> {
        self.entries.iter().map(|(n, d)| (n.as_str(), d))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The contents of buffer `name` as `&[T]` (`T` one of `f32 f64 i32 i64 u8`), or why
    /// not: no buffer of that name (the error lists the known names), or the buffer holds
    /// another element type (the error names both). [`Report::read`](super::Report::read)
    /// is the same on a run's results.
    ///
    /// Errors: [`ReadError::Unknown`], [`ReadError::WrongType`].
    ///
    /// ```
    /// # use offload_sched::exec::{BufferData, Buffers};
    /// let b = Buffers::new(vec![("y".into(), BufferData::F32(vec![1.0, 2.0]))]);
    /// assert_eq!(b.read::<f32>("y").unwrap(), &[1.0, 2.0]);
    /// assert_eq!(
    ///     b.read::<f64>("y").unwrap_err().to_string(),
    ///     "buffer \"y\" holds f32 elements, not f64: read it as f32"
    /// );
    /// assert_eq!(
    ///     b.read::<f32>("x").unwrap_err().to_string(),
    ///     "no buffer \"x\" in the results; the buffers are \"y\""
    /// );
    /// ```
    pub fn read<T: Elem>(&self, name: &str) -> Result<&[T], ReadError> {
        let Some(data) = self.get(name) else {
            return Err(ReadError::Unknown {
                name: name.to_string(),
                known: self.entries.iter().map(|(n, _)| n.clone()).collect(),
            });
        };
        data.as_slice::<T>().ok_or_else(|| ReadError::WrongType {
            name: name.to_string(),
            actual: data.ty(),
            asked: T::TYPE,
        })
    }

    /// Buffer `name` as `&[f32]`; `None` for an unknown name and for another element type
    /// alike ([`Buffers::read`] says which).
    pub fn as_f32(&self, name: &str) -> Option<&[f32]> {
        self.read(name).ok()
    }
    /// As [`Buffers::as_f32`], for `f64`.
    pub fn as_f64(&self, name: &str) -> Option<&[f64]> {
        self.read(name).ok()
    }
    /// As [`Buffers::as_f32`], for `i32`.
    pub fn as_i32(&self, name: &str) -> Option<&[i32]> {
        self.read(name).ok()
    }
    /// As [`Buffers::as_f32`], for `i64`.
    pub fn as_i64(&self, name: &str) -> Option<&[i64]> {
        self.read(name).ok()
    }
    /// As [`Buffers::as_f32`], for `u8`.
    pub fn as_u8(&self, name: &str) -> Option<&[u8]> {
        self.read(name).ok()
    }
}

impl BufferData {
    /// The elements as `&[T]` when `T` is this buffer's element type.
    fn as_slice<T: Elem>(&self) -> Option<&[T]> {
        let any: &dyn std::any::Any = match self {
            BufferData::F32(v) => v,
            BufferData::F64(v) => v,
            BufferData::I32(v) => v,
            BufferData::I64(v) => v,
            BufferData::U8(v) => v,
        };
        any.downcast_ref::<Vec<T>>().map(Vec::as_slice)
    }
}

/// Why [`Buffers::read`] (or [`Report::read`](super::Report::read)) cannot give a buffer
/// as `&[T]`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// No buffer has this name; `known` holds every buffer's name in program order.
    #[error(
        "no buffer \"{}\" in the results; {}",
        crate::model::escape_quoted(name),
        known_names(known)
    )]
    Unknown { name: String, known: Vec<String> },
    /// The buffer holds `actual` elements and `asked` was asked for.
    #[error(
        "buffer \"{}\" holds {actual} elements, not {asked}: read it as {actual}",
        crate::model::escape_quoted(name)
    )]
    WrongType {
        name: String,
        actual: ElemType,
        asked: ElemType,
    },
}

/// `the buffers are "a", "b"` (the first 16, then how many more), or `there are none`.
fn known_names(known: &[String]) -> String {
    const SHOWN: usize = 16;
    if known.is_empty() {
        return "there are none".into();
    }
    let mut s = known
        .iter()
        .take(SHOWN)
        .map(|n| format!("\"{}\"", crate::model::escape_quoted(n)))
        .collect::<Vec<_>>()
        .join(", ");
    if known.len() > SHOWN {
        s += &format!(" and {} more", known.len() - SHOWN);
    }
    format!("the buffers are {s}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(ty: ElemType, len: u64, init: Init) -> Buffer {
        Buffer {
            name: "b".into(),
            ty,
            len,
            init,
        }
    }

    #[test]
    fn init_values() {
        assert_eq!(
            BufferData::init(&buf(ElemType::U8, 3, Init::Iota)),
            BufferData::U8(vec![0, 1, 2])
        );
        assert_eq!(
            BufferData::init(&buf(ElemType::U8, 258, Init::Iota)).get_f64(257),
            Some(1.0)
        );
        assert_eq!(
            BufferData::init(&buf(ElemType::I32, 2, Init::Fill(-2.7))),
            BufferData::I32(vec![-2, -2])
        );
        let r = BufferData::init(&buf(ElemType::F64, 1000, Init::Random(7)));
        let again = BufferData::init(&buf(ElemType::F64, 1000, Init::Random(7)));
        assert_eq!(r, again);
        let BufferData::F64(v) = r else {
            unreachable!()
        };
        assert!(v.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = v.iter().sum::<f64>() / 1000.0;
        assert!((0.4..0.6).contains(&mean), "{mean}");
        let BufferData::I64(v) = BufferData::init(&buf(ElemType::I64, 1000, Init::Random(1)))
        else {
            unreachable!()
        };
        assert!(v.iter().all(|x| (0..100).contains(x)));
        assert!(v.iter().any(|x| *x != v[0]));
    }

    #[test]
    fn init_bytes_equals_init_to_ne_bytes() {
        let inits = [
            Init::Zeros,
            Init::Iota,
            Init::Fill(-2.7),
            Init::Fill(1e12),
            Init::Fill(f64::NAN),
            Init::Random(9),
        ];
        let tys = [
            ElemType::F32,
            ElemType::F64,
            ElemType::I32,
            ElemType::I64,
            ElemType::U8,
        ];
        for init in &inits {
            for ty in tys {
                // Lengths around the chunk size, so partial and repeated chunks are hit.
                for len in [0, 1, 7, CHUNK as u64, CHUNK as u64 * 2 + 3] {
                    let b = buf(ty, len, init.clone());
                    let mut got = Vec::new();
                    let mut chunks = 0;
                    init_bytes(&b, |c| {
                        got.extend_from_slice(c);
                        chunks += 1;
                    });
                    assert_eq!(
                        got,
                        BufferData::init(&b).to_ne_bytes(),
                        "{ty} {init:?} {len}"
                    );
                    assert_eq!(
                        chunks,
                        (len as usize).div_ceil(CHUNK),
                        "{ty} {init:?} {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn try_init_equals_init_and_fails_cleanly() {
        for ty in [
            ElemType::F32,
            ElemType::F64,
            ElemType::I32,
            ElemType::I64,
            ElemType::U8,
        ] {
            for init in [Init::Iota, Init::Fill(2.5), Init::Random(4)] {
                let b = buf(ty, 1000, init);
                assert_eq!(BufferData::try_init(&b), Some(BufferData::init(&b)));
            }
        }
        // 2^62 f64: more bytes than the address space.
        assert_eq!(
            BufferData::try_init(&buf(ElemType::F64, 1 << 62, Init::Zeros)),
            None
        );
        let _fail = crate::runtime::memory::fail::allocations_of(1 << 10);
        assert_eq!(
            BufferData::try_init(&buf(ElemType::I32, 256, Init::Zeros)),
            None
        );
    }

    #[test]
    fn init_values_unchanged() {
        // Values fixed before the generator was shared (regression guard).
        let BufferData::F32(v) = BufferData::init(&buf(ElemType::F32, 3, Init::Random(1))) else {
            unreachable!()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for x in v {
            let u = rng.next_u64();
            assert_eq!(x, (u >> 40) as f32 * (1.0 / (1u32 << 24) as f32));
        }
        assert_eq!(
            BufferData::init(&buf(ElemType::I64, 3, Init::Fill(1e30))),
            BufferData::I64(vec![i64::MAX; 3])
        );
        assert_eq!(
            BufferData::init(&buf(ElemType::F32, 3, Init::Iota)),
            BufferData::F32(vec![0.0, 1.0, 2.0])
        );
        assert_eq!(
            BufferData::init(&buf(ElemType::U8, 2, Init::Fill(f64::NAN))),
            BufferData::U8(vec![0, 0])
        );
    }

    #[test]
    fn bytes_round_trip() {
        let d = BufferData::init(&buf(ElemType::F32, 5, Init::Random(3)));
        assert_eq!(
            BufferData::from_ne_bytes(ElemType::F32, &d.to_ne_bytes()),
            d
        );
        let bs = Buffers::new(vec![("x".into(), d.clone())]);
        assert_eq!(bs.as_f32("x").map(|s| s.len()), Some(5));
        assert!(bs.as_i32("x").is_none());
        assert!(bs.get("y").is_none());
    }

    #[test]
    fn read_names_an_unknown_buffer_or_both_element_types() {
        let bs = Buffers::new(vec![
            ("x".into(), BufferData::F64(vec![1.0, 2.0])),
            ("n\"q".into(), BufferData::U8(vec![7])),
        ]);
        assert_eq!(bs.read::<f64>("x"), Ok(&[1.0, 2.0][..]));
        assert_eq!(bs.read::<u8>("n\"q"), Ok(&[7u8][..]));
        assert_eq!(
            bs.read::<f32>("x"),
            Err(ReadError::WrongType {
                name: "x".into(),
                actual: ElemType::F64,
                asked: ElemType::F32
            })
        );
        assert_eq!(
            bs.read::<i64>("x").unwrap_err().to_string(),
            "buffer \"x\" holds f64 elements, not i64: read it as f64"
        );
        assert_eq!(
            bs.read::<i32>("y").unwrap_err().to_string(),
            "no buffer \"y\" in the results; the buffers are \"x\", \"n\\\"q\""
        );
        assert_eq!(
            Buffers::default().read::<i32>("y").unwrap_err().to_string(),
            "no buffer \"y\" in the results; there are none"
        );
        let many = Buffers::new(
            (0..20)
                .map(|i| (format!("b{i}"), BufferData::I32(vec![])))
                .collect(),
        );
        let e = many.read::<i32>("z").unwrap_err().to_string();
        assert!(e.ends_with("\"b14\", \"b15\" and 4 more"), "{e}");
    }
}
