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
//! ([`GgufFile::matrix`] hands out views that keep the map alive), or in a copy of the
//! tensor data on huge pages ([`GgufFile::make_resident`], what a model load does where
//! the kernel offers them); other tensors are dequantized straight into their final
//! `Vec<f32>`. The map (or copy) is released when the [`GgufFile`] and every matrix cut
//! from it are dropped.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use super::gguf_header::Cursor;
pub use super::gguf_header::Value;
pub use super::gguf_layout::TensorInfo;
use super::gguf_layout::{check_layout, tensor_info};
use super::matrix::{Matrix, QuantMatrix, SharedBytes};
use super::quant::{self, GgmlType};
use crate::error::{Error, Result};

const MAGIC: &[u8; 4] = b"GGUF";
const DEFAULT_ALIGNMENT: u64 = 32;

/// Largest `general.alignment` read: llama.cpp writes 32; a larger power of two is legal,
/// but past 1 MiB it is a damaged header (and rounding up to it could overflow).
const MAX_ALIGNMENT: u64 = 1 << 20;

/// Fewest bytes of one metadata entry: key length (8), value type (4), a 1-byte value.
const MIN_KV_BYTES: u64 = 13;

/// Fewest bytes of one tensor info: name length (8), n_dims (4), one dim (8), type (4),
/// offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 32;

/// Metadata entries and tensors a header may claim: real models have some dozens of
/// keys and a few thousand tensors.
const MAX_KV: u64 = 1 << 16;
const MAX_TENSORS: u64 = 1 << 20;

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
    /// Where the tensor data starts in the file.
    data_start: u64,
    /// The tensor data copied to huge pages ([`GgufFile::make_resident`]), read instead of
    /// the map when present.
    resident: Option<Arc<Mmap>>,
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

impl GgufFile {
    /// Open and parse the header and tensor infos; no tensor data is read.
    pub fn open(path: &Path) -> Result<GgufFile> {
        crate::input::check_regular(path)?;
        let file = File::open(path).map_err(|e| Error::file(path, format!("cannot open: {e}")))?;
        // SAFETY: the map is read-only; attnviz never writes the file. A file truncated
        // by another process while mapped would fault, as with any reader of a mapped file.
        let map = unsafe { Mmap::map(&file) }
            .map_err(|e| Error::file(path, format!("cannot memory-map: {e}")))?;
        let file_bytes = map.len() as u64;
        let mut c = Cursor::new(&map, path);
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
        // Counts are checked against the bytes left before anything is read for them.
        let too_many = |n: u64, what: &str, min: u64, max: u64, left: u64| {
            (n > left / min || n > max).then(|| {
                Error::file(
                    path,
                    format!(
                        "the header claims {n} {what}, but the {left} bytes left hold at most {} (and attnviz reads at most {max})",
                        left / min
                    ),
                )
            })
        };
        if let Some(e) = too_many(n_kv, "metadata entries", MIN_KV_BYTES, MAX_KV, c.left()) {
            return Err(e);
        }
        let mut meta = Vec::new();
        let mut index = HashMap::new();
        for i in 0..n_kv {
            let key = c.string(&|| format!("metadata key {i} of {n_kv}"))?;
            let what = || format!("metadata value of {key}");
            let ty = c.u32(&what)?;
            let v = c.value(ty, &what, 0)?;
            if index.insert(key.clone(), meta.len()).is_some() {
                return Err(Error::file(
                    path,
                    format!(
                        "metadata key {key} appears twice; a damaged or hand-edited header (each key once)"
                    ),
                ));
            }
            meta.push((key, v));
        }
        let alignment = match index.get("general.alignment").map(|&i| &meta[i].1) {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() && a <= MAX_ALIGNMENT => a,
                _ => {
                    return Err(Error::file(
                        path,
                        format!(
                            "general.alignment is {v:?}, expected a power of two up to {MAX_ALIGNMENT}"
                        ),
                    ));
                }
            },
        };
        if let Some(e) = too_many(
            n_tensors,
            "tensors",
            MIN_TENSOR_INFO_BYTES,
            MAX_TENSORS,
            c.left(),
        ) {
            return Err(e);
        }
        let mut raw = Vec::new();
        for i in 0..n_tensors {
            let name = c.string(&|| format!("tensor info {i} of {n_tensors}"))?;
            let claimed = || format!("tensor info {i} of the {n_tensors} the header claims");
            if name.is_empty() {
                return Err(Error::file(
                    path,
                    format!(
                        "{} has an empty name: the tensor count {n_tensors} is more than the file holds, or the header is damaged",
                        claimed()
                    ),
                ));
            }
            let what = || format!("tensor info of {name}");
            let nd = c.u32(&what)?;
            if nd == 0 || nd > 4 {
                return Err(Error::file(
                    path,
                    format!(
                        "tensor {name} ({}): {nd} dimensions, expected 1 to 4",
                        claimed()
                    ),
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
        let mut tensors = Vec::with_capacity(raw.len());
        let mut tindex = HashMap::new();
        for (name, dims, ty_id, off) in raw {
            let t = tensor_info(path, name, dims, ty_id, off, data_start, alignment)?;
            if tindex.insert(t.name.clone(), tensors.len()).is_some() {
                return Err(Error::file(
                    path,
                    format!(
                        "tensor {} appears twice in the header; each tensor name must be unique",
                        t.name
                    ),
                ));
            }
            tensors.push(t);
        }
        check_layout(path, &tensors, data_start, file_bytes, alignment)?;
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
            data_start,
            resident: None,
        })
    }

    /// Copy the tensor data to memory backed by huge pages where the kernel offers them
    /// ([`super::resident`]); matrices cut afterwards read the copy. A no-op otherwise.
    pub fn make_resident(&mut self) -> Result<()> {
        if self.resident.is_some() || !super::resident::wanted() {
            return Ok(());
        }
        let file = File::open(&self.path)
            .map_err(|e| Error::file(&self.path, format!("cannot open: {e}")))?;
        let len = self.file_bytes.saturating_sub(self.data_start) as usize;
        let copy = super::resident::copy(&file, &self.path, self.data_start, len)?;
        self.resident = Some(Arc::new(copy));
        Ok(())
    }

    /// The bytes of tensor data `start..start + len` (absolute file offsets, checked
    /// when the file was opened) and the buffer that holds them.
    fn data(&self, start: u64, len: u64) -> (&Arc<Mmap>, usize) {
        let (buf, at) = match &self.resident {
            Some(r) => (r, (start - self.data_start) as usize),
            None => (&self.map, start as usize),
        };
        debug_assert!(at + len as usize <= buf.len());
        (buf, at)
    }

    fn tensor_bytes(&self, t: &TensorInfo) -> &[u8] {
        let (buf, at) = self.data(t.start, t.bytes);
        &buf[at..at + t.bytes as usize]
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
    /// Non-finite values are refused, naming the tensor.
    pub fn read(&self, name: &str, want: &[usize], what: &str) -> Result<Vec<f32>> {
        let v = self.dequantize(self.check(name, want, what)?);
        super::checks::finite(&self.path, name, &v)?;
        Ok(v)
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
            let v = self.dequantize(t);
            super::checks::finite(&self.path, name, &v)?;
            return Ok(Matrix::F32(v));
        }
        let (cols, rows) = (t.dims[0] as usize, t.dims[1] as usize);
        let (buf, at) = self.data(t.start, t.bytes);
        let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = buf.clone();
        let bytes = SharedBytes::new(owner, at, t.bytes as usize).ok_or_else(|| {
            Error::file(
                &self.path,
                format!("tensor {name} lies past the file's end"),
            )
        })?;
        let q = QuantMatrix::new(t.ty, bytes, rows, cols)
            .map_err(|e| Error::file(&self.path, format!("tensor {name}: {e}")))?;
        Ok(Matrix::Quant(q))
    }

    /// Refuse the first tensor that holds a NaN or an infinity, naming it. Tensors read as
    /// f32 are checked as they are read; the matrices kept in their type are not (reading
    /// every block's scales at load cost 10-15% of SmolLM2's load time), so a run whose
    /// numbers come out non-finite calls this to find the culprit.
    pub fn check_finite(&self) -> Result<()> {
        for t in &self.tensors {
            let data = self.tensor_bytes(t);
            if t.ty == GgmlType::F32 {
                let v: Vec<f32> = data
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                super::checks::finite(&self.path, &t.name, &v)?;
            } else if let Some(block) = super::quant_scales::first_non_finite_block(t.ty, data) {
                return Err(Error::file(
                    &self.path,
                    format!(
                        "tensor {}{} ({}) has a NaN or infinite value or scale in block {block}; every weight must be a finite number (a damaged file?)",
                        t.name,
                        super::checks::layer_of(&t.name),
                        t.ty.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Dequantize one tensor (its bounds were checked when the file was opened).
    pub fn dequantize(&self, t: &TensorInfo) -> Vec<f32> {
        let src = self.tensor_bytes(t);
        let mut out = vec![0f32; t.elems() as usize];
        quant::dequantize(t.ty, src, &mut out);
        out
    }
}
