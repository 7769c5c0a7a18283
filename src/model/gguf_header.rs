//! GGUF header values and the cursor that reads them.
//!
//! Every count in a header (string lengths, array lengths) becomes an allocation, so each
//! is checked before anything is allocated: against the bytes the file has left (an
//! element takes at least its encoded size) and against a ceiling on the array elements a
//! whole header may hold. A damaged or hostile file is then an error naming what it
//! claims, never an abort in the allocator.

use std::path::Path;

use crate::error::{Error, Result};

/// Bytes of one string: a key, a token or a chat template. The longest real ones are
/// chat templates of some tens of KB.
pub const MAX_STRING_BYTES: u64 = 16 << 20;

/// Array elements of a whole header. Each element is held as a [`Value`] of 32 bytes, so
/// 2^23 elements is 256 MiB; real vocabularies (262,144 tokens with scores and types, or
/// 151,000 tokens and as many merges) use under a tenth of it.
pub const MAX_ARRAY_ELEMENTS: u64 = 1 << 23;

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(String),
    Array(Vec<Value>),
}

impl Value {
    /// An integer value of any width, if it is one and is not negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any number as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => self.as_u64().map(|v| v as f64).or(match *self {
                Value::I8(v) => Some(v as f64),
                Value::I16(v) => Some(v as f64),
                Value::I32(v) => Some(v as f64),
                Value::I64(v) => Some(v as f64),
                _ => None,
            }),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub(super) fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Bool(_) => "bool",
            Value::Str(_) => "string",
            Value::Array(_) => "array",
        }
    }
}

/// A bounds-checked little-endian cursor over the header; every read names what it reads.
pub(super) struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    pub path: &'a Path,
    /// Array elements the rest of the header may still hold ([`MAX_ARRAY_ELEMENTS`]).
    pub elements_left: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8], path: &'a Path) -> Self {
        Cursor {
            buf,
            pos: 0,
            path,
            elements_left: MAX_ARRAY_ELEMENTS,
        }
    }

    /// Bytes after the cursor.
    pub fn left(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        let end = (self.pos as u64).checked_add(n);
        match end {
            Some(end) if end <= self.buf.len() as u64 => {
                let s = &self.buf[self.pos..end as usize];
                self.pos = end as usize;
                Ok(s)
            }
            _ => Err(Error::file(
                self.path,
                format!(
                    "truncated GGUF header: {} needs {n} bytes at offset {} but the file has {} bytes",
                    what(),
                    self.pos,
                    self.buf.len()
                ),
            )),
        }
    }

    pub fn arr<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        Ok(s.try_into().expect("length checked"))
    }

    pub fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }

    pub fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    pub fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let n = self.u64(what)?;
        if n > MAX_STRING_BYTES {
            return Err(Error::file(
                self.path,
                format!(
                    "{} claims a string of {n} bytes at offset {}; attnviz reads strings of up to {MAX_STRING_BYTES} bytes",
                    what(),
                    self.pos - 8
                ),
            ));
        }
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| Error::file(self.path, format!("{} is not valid UTF-8", what())))
    }

    pub fn value(&mut self, ty: u32, what: &dyn Fn() -> String, depth: u32) -> Result<Value> {
        Ok(match ty {
            0 => Value::U8(self.arr::<1>(what)?[0]),
            1 => Value::I8(self.arr::<1>(what)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.arr(what)?)),
            3 => Value::I16(i16::from_le_bytes(self.arr(what)?)),
            4 => Value::U32(u32::from_le_bytes(self.arr(what)?)),
            5 => Value::I32(i32::from_le_bytes(self.arr(what)?)),
            6 => Value::F32(f32::from_le_bytes(self.arr(what)?)),
            7 => match self.arr::<1>(what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => {
                    return Err(Error::file(
                        self.path,
                        format!("{}: bool byte {b}, expected 0 or 1", what()),
                    ));
                }
            },
            8 => Value::Str(self.string(what)?),
            9 => {
                if depth > 4 {
                    return Err(Error::file(
                        self.path,
                        format!("{}: arrays nested deeper than 4", what()),
                    ));
                }
                let ety = self.u32(what)?;
                let n = self.u64(what)?;
                // Every element takes at least its encoded size: refuse counts past the
                // file, and past what a header may hold, before allocating for them.
                let need = n.checked_mul(min_encoded_bytes(ety));
                if need.is_none_or(|b| b > self.left()) {
                    return Err(Error::file(
                        self.path,
                        format!(
                            "truncated GGUF header: {} claims {n} array elements of type {ety}, more than the {} bytes left hold",
                            what(),
                            self.left()
                        ),
                    ));
                }
                if n > self.elements_left {
                    return Err(Error::file(
                        self.path,
                        format!(
                            "{} claims {n} array elements; attnviz reads headers of up to {MAX_ARRAY_ELEMENTS} array elements in all",
                            what()
                        ),
                    ));
                }
                self.elements_left -= n;
                let mut v = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    v.push(self.value(ety, what, depth + 1)?);
                }
                Value::Array(v)
            }
            10 => Value::U64(u64::from_le_bytes(self.arr(what)?)),
            11 => Value::I64(i64::from_le_bytes(self.arr(what)?)),
            12 => Value::F64(f64::from_le_bytes(self.arr(what)?)),
            t => {
                return Err(Error::file(
                    self.path,
                    format!("{}: unknown GGUF value type {t} (known: 0..=12)", what()),
                ));
            }
        })
    }
}

/// The fewest bytes one value of GGUF type `ty` takes (a string or an array: its length;
/// an unknown type: 1, and reading it fails).
fn min_encoded_bytes(ty: u32) -> u64 {
    match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        _ => 1,
    }
}
