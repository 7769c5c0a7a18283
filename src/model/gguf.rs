//! A small GGUF reader (llama.cpp's model format, versions 2 and 3).
//!
//! Why our own: crates.io has no maintained small GGUF reader that also dequantizes
//! without pulling in a whole ML framework (`candle-core` does, with its own tensor type;
//! `gguf` 0.1 and `gguf-rs-lib` read metadata only and are little used). The format is
//! small: a header, typed key/value metadata, tensor infos, then aligned tensor data.
//!
//! Layout (little-endian): magic "GGUF", u32 version, u64 tensor count, u64 metadata count;
//! each key/value: string key, u32 value type, value (strings are u64 length + UTF-8 bytes,
//! arrays are u32 element type + u64 count + elements); each tensor info: string name,
//! u32 n_dims, u64 ne[n_dims] (ne[0] varies fastest), u32 GGML type, u64 offset relative
//! to the data section; the data section starts at the next multiple of
//! `general.alignment` (default 32) after the tensor infos.
//!
//! The file is memory-mapped. Weight matrices stay in their type and in the map
//! ([`GgufFile::matrix`] hands out views that keep the map alive); other tensors are
//! dequantized from the map straight into their final `Vec<f32>`. The map is released
//! when the [`GgufFile`] and every matrix cut from it are dropped.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use super::matrix::{Matrix, QuantMatrix, SharedBytes};
use super::quant::{self, GgmlType};
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;

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

    fn type_name(&self) -> &'static str {
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

/// Where one tensor is and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// GGML order: ne[0] varies fastest (for a linear layer ne = [in, out]).
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    /// Absolute byte offset of the data in the file.
    pub start: u64,
    pub bytes: u64,
}

impl TensorInfo {
    pub fn elems(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// An open GGUF file: its metadata, tensor infos and the memory map.
pub struct GgufFile {
    pub path: PathBuf,
    pub version: u32,
    pub alignment: u64,
    /// Keys in file order.
    pub meta: Vec<(String, Value)>,
    index: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    tindex: HashMap<String, usize>,
    pub file_bytes: u64,
    map: Arc<Mmap>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

/// A bounds-checked little-endian cursor over the header; every read names what it reads.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
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

    fn arr<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        Ok(s.try_into().expect("length checked"))
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let n = self.u64(what)?;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| Error::file(self.path, format!("{} is not valid UTF-8", what())))
    }

    fn value(&mut self, ty: u32, what: &dyn Fn() -> String, depth: u32) -> Result<Value> {
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
                // Every element takes at least one byte: refuse counts past the file.
                if n > (self.buf.len() - self.pos) as u64 {
                    return Err(Error::file(
                        self.path,
                        format!(
                            "truncated GGUF header: {} claims {n} array elements, more than the {} bytes left",
                            what(),
                            self.buf.len() - self.pos
                        ),
                    ));
                }
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

impl GgufFile {
    /// Open and parse the header and tensor infos; no tensor data is read.
    pub fn open(path: &Path) -> Result<GgufFile> {
        let file = File::open(path).map_err(|e| Error::file(path, format!("cannot open: {e}")))?;
        // SAFETY: the map is read-only; attnviz never writes the file. A file truncated
        // by another process while mapped would fault, as with any reader of a mapped file.
        let map = unsafe { Mmap::map(&file) }
            .map_err(|e| Error::file(path, format!("cannot memory-map: {e}")))?;
        let file_bytes = map.len() as u64;
        let mut c = Cursor {
            buf: &map,
            pos: 0,
            path,
        };
        let magic = c.arr::<4>(&|| "the magic".into())?;
        if &magic != MAGIC {
            return Err(Error::file(
                path,
                format!(
                    "not a GGUF file: magic {:?}, expected \"GGUF\"",
                    String::from_utf8_lossy(&magic)
                ),
            ));
        }
        let version = c.u32(&|| "the version".into())?;
        if !(2..=3).contains(&version) {
            return Err(Error::file(
                path,
                format!("unsupported GGUF version {version} (attnviz reads versions 2 and 3)"),
            ));
        }
        let n_tensors = c.u64(&|| "the tensor count".into())?;
        let n_kv = c.u64(&|| "the metadata count".into())?;
        let mut meta = Vec::new();
        let mut index = HashMap::new();
        for i in 0..n_kv {
            let key = c.string(&|| format!("metadata key {i}"))?;
            let what = || format!("metadata value of {key}");
            let ty = c.u32(&what)?;
            let v = c.value(ty, &what, 0)?;
            index.insert(key.clone(), meta.len());
            meta.push((key, v));
        }
        let alignment = match index.get("general.alignment").map(|&i| &meta[i].1) {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() => a,
                _ => {
                    return Err(Error::file(
                        path,
                        format!("general.alignment is {v:?}, expected a power of two"),
                    ));
                }
            },
        };
        let mut raw = Vec::new();
        for i in 0..n_tensors {
            let name = c.string(&|| format!("tensor info {i}"))?;
            let what = || format!("tensor info of {name}");
            let nd = c.u32(&what)?;
            if nd == 0 || nd > 4 {
                return Err(Error::file(
                    path,
                    format!("tensor {name}: {nd} dimensions, expected 1 to 4"),
                ));
            }
            let mut dims = Vec::new();
            for _ in 0..nd {
                dims.push(c.u64(&what)?);
            }
            let ty = c.u32(&what)?;
            let off = c.u64(&what)?;
            raw.push((name, dims, ty, off));
        }
        let data_start = (c.pos as u64).div_ceil(alignment) * alignment;
        let mut tensors = Vec::new();
        let mut tindex = HashMap::new();
        for (name, dims, ty_id, off) in raw {
            let ty = GgmlType::from_id(ty_id).ok_or_else(|| {
                Error::file(
                    path,
                    format!(
                        "tensor {name} has type {}, which attnviz cannot load (supported: {})",
                        GgmlType::name_of_id(ty_id),
                        quant::SUPPORTED
                    ),
                )
            })?;
            let elems = dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .filter(|&e| e <= usize::MAX as u64 / 4)
                .ok_or_else(|| {
                    Error::file(path, format!("tensor {name}: shape {dims:?} is too large"))
                })?;
            if !dims[0].is_multiple_of(ty.block_elems() as u64) {
                return Err(Error::file(
                    path,
                    format!(
                        "tensor {name}: row length {} is not a multiple of the {} block size {}",
                        dims[0],
                        ty.name(),
                        ty.block_elems()
                    ),
                ));
            }
            let bytes = ty
                .tensor_bytes(elems as usize)
                .expect("rows are whole blocks") as u64;
            let start = data_start + off;
            if !off.is_multiple_of(alignment) {
                return Err(Error::file(
                    path,
                    format!(
                        "tensor {name}: data offset {off} is not a multiple of the alignment {alignment}"
                    ),
                ));
            }
            if start.checked_add(bytes).is_none_or(|end| end > file_bytes) {
                return Err(Error::file(
                    path,
                    format!(
                        "tensor {name}: data [{start}, {}) runs past the end of the file ({file_bytes} bytes): truncated file?",
                        start.saturating_add(bytes)
                    ),
                ));
            }
            tindex.insert(name.clone(), tensors.len());
            tensors.push(TensorInfo {
                name,
                dims,
                ty,
                start,
                bytes,
            });
        }
        Ok(GgufFile {
            path: path.to_path_buf(),
            version,
            alignment,
            meta,
            index,
            tensors,
            tindex,
            file_bytes,
            map: Arc::new(map),
        })
    }

    /// A metadata value, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.meta[i].1)
    }

    fn missing(&self, key: &str) -> Error {
        Error::file(&self.path, format!("missing required metadata key {key}"))
    }

    fn wrong(&self, key: &str, v: &Value, want: &str) -> Error {
        Error::file(
            &self.path,
            format!(
                "metadata key {key} is a {} ({v:?}), expected {want}",
                v.type_name()
            ),
        )
    }

    /// A required string.
    pub fn str(&self, key: &str) -> Result<&str> {
        let v = self.get(key).ok_or_else(|| self.missing(key))?;
        v.as_str().ok_or_else(|| self.wrong(key, v, "a string"))
    }

    /// An optional non-negative integer (None when absent, an error when of another type).
    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong(key, v, "a non-negative integer")),
        }
    }

    /// A required non-negative integer.
    pub fn u64(&self, key: &str) -> Result<u64> {
        self.opt_u64(key)?.ok_or_else(|| self.missing(key))
    }

    /// An optional number.
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.wrong(key, v, "a number")),
        }
    }

    /// An optional bool.
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_bool()
                .map(Some)
                .ok_or_else(|| self.wrong(key, v, "a bool")),
        }
    }

    /// An optional array.
    pub fn opt_array(&self, key: &str) -> Result<Option<&[Value]>> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_array()
                .map(Some)
                .ok_or_else(|| self.wrong(key, v, "an array")),
        }
    }

    /// A tensor's info, if present.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tindex.get(name).map(|&i| &self.tensors[i])
    }

    /// A required tensor, checked against its expected shape in GGML order (ne[0] first),
    /// dequantized to f32 in row-major order of the reversed shape.
    pub fn read(&self, name: &str, want: &[usize], what: &str) -> Result<Vec<f32>> {
        Ok(self.dequantize(self.check(name, want, what)?))
    }

    /// A required tensor's info, checked against its expected shape (GGML order).
    pub fn check(&self, name: &str, want: &[usize], what: &str) -> Result<&TensorInfo> {
        let t = self
            .tensor(name)
            .ok_or_else(|| Error::file(&self.path, format!("missing required tensor {name}")))?;
        let got: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
        if got != want {
            return Err(Error::file(
                &self.path,
                format!(
                    "tensor {name} has shape {got:?} (GGML order, ne[0] first), expected {want:?} from {what}"
                ),
            ));
        }
        Ok(t)
    }

    /// A required 2-D tensor [ne1 rows, ne0 cols] checked against its expected shape (GGML
    /// order, `want` = [cols, rows]), as a matrix: quantized types (F16 and BF16 too) stay
    /// in the map; F32 is copied out as f32 values.
    pub fn matrix(&self, name: &str, want: &[usize], what: &str) -> Result<Matrix> {
        let t = self.check(name, want, what)?;
        if t.dims.len() != 2 {
            return Err(Error::file(
                &self.path,
                format!(
                    "tensor {name} has {} dimensions; a matrix has 2",
                    t.dims.len()
                ),
            ));
        }
        if t.ty == GgmlType::F32 {
            return Ok(Matrix::F32(self.dequantize(t)));
        }
        let (cols, rows) = (t.dims[0] as usize, t.dims[1] as usize);
        let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = self.map.clone();
        let bytes =
            SharedBytes::new(owner, t.start as usize, t.bytes as usize).ok_or_else(|| {
                Error::file(
                    &self.path,
                    format!("tensor {name} lies past the file's end"),
                )
            })?;
        let q = QuantMatrix::new(t.ty, bytes, rows, cols)
            .map_err(|e| Error::file(&self.path, format!("tensor {name}: {e}")))?;
        Ok(Matrix::Quant(q))
    }

    /// Dequantize one tensor (its bounds were checked when the file was opened).
    pub fn dequantize(&self, t: &TensorInfo) -> Vec<f32> {
        let src = &self.map[t.start as usize..(t.start + t.bytes) as usize];
        let mut out = vec![0f32; t.elems() as usize];
        quant::dequantize(t.ty, src, &mut out);
        out
    }
}
