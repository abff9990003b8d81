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

use crate::model::{Buffer, ElemType, Init};
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

impl BufferData {
    /// The initial contents of `buf` (see the module docs).
    pub fn init(buf: &Buffer) -> BufferData {
        let n = buf.len as usize;
        match &buf.init {
            Init::Zeros => BufferData::from_fn(buf.ty, n, |_| 0.0, |_| 0),
            Init::Iota => BufferData::from_fn(buf.ty, n, |i| i as f64, |i| i as u64),
            Init::Fill(v) => {
                let v = *v;
                match buf.ty {
                    ElemType::F32 => BufferData::F32(vec![v as f32; n]),
                    ElemType::F64 => BufferData::F64(vec![v; n]),
                    ElemType::I32 => BufferData::I32(vec![v as i32; n]),
                    ElemType::I64 => BufferData::I64(vec![v as i64; n]),
                    ElemType::U8 => BufferData::U8(vec![v as u8; n]),
                }
            }
            Init::Random(seed) => {
                let mut rng = ChaCha8Rng::seed_from_u64(*seed);
                let draws: Vec<u64> = (0..n).map(|_| rng.next_u64()).collect();
                match buf.ty {
                    ElemType::F64 => BufferData::F64(
                        draws
                            .iter()
                            .map(|u| (u >> 11) as f64 * (1.0 / (1u64 << 53) as f64))
                            .collect(),
                    ),
                    ElemType::F32 => BufferData::F32(
                        draws
                            .iter()
                            .map(|u| (u >> 40) as f32 * (1.0 / (1u32 << 24) as f32))
                            .collect(),
                    ),
                    ElemType::I32 => {
                        BufferData::I32(draws.iter().map(|u| (u % 100) as i32).collect())
                    }
                    ElemType::I64 => {
                        BufferData::I64(draws.iter().map(|u| (u % 100) as i64).collect())
                    }
                    ElemType::U8 => BufferData::U8(draws.iter().map(|u| (u % 100) as u8).collect()),
                }
            }
        }
    }

    /// Element `i` from `float(i)` for floats, `int(i)` (then `as`) for integers.
    fn from_fn(
        ty: ElemType,
        n: usize,
        float: impl Fn(usize) -> f64,
        int: impl Fn(usize) -> u64,
    ) -> BufferData {
        match ty {
            ElemType::F32 => BufferData::F32((0..n).map(|i| float(i) as f32).collect()),
            ElemType::F64 => BufferData::F64((0..n).map(float).collect()),
            ElemType::I32 => BufferData::I32((0..n).map(|i| int(i) as i32).collect()),
            ElemType::I64 => BufferData::I64((0..n).map(|i| int(i) as i64).collect()),
            ElemType::U8 => BufferData::U8((0..n).map(|i| int(i) as u8).collect()),
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
        match self {
            BufferData::F32(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            BufferData::F64(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            BufferData::I32(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            BufferData::I64(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
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

    pub fn as_f32(&self, name: &str) -> Option<&[f32]> {
        match self.get(name)? {
            BufferData::F32(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_f64(&self, name: &str) -> Option<&[f64]> {
        match self.get(name)? {
            BufferData::F64(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_i32(&self, name: &str) -> Option<&[i32]> {
        match self.get(name)? {
            BufferData::I32(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_i64(&self, name: &str) -> Option<&[i64]> {
        match self.get(name)? {
            BufferData::I64(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_u8(&self, name: &str) -> Option<&[u8]> {
        match self.get(name)? {
            BufferData::U8(v) => Some(v),
            _ => None,
        }
    }
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
}
