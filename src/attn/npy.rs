//! Reading and writing .npy tensors: little-endian f32 or f64, C order.
//!
//! The header is read and checked before any data is allocated: its dtype, its order,
//! and that the shape it claims is the data the file really holds (compared with the
//! file's size), so a corrupt or hostile header cannot make attnviz allocate gigabytes
//! or read garbage. Every refusal names the file and says what would be right.

use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::Path;

use ndarray::{ArrayD, Dimension, IxDyn};
use ndarray_npy::npy::header::{Header, Layout, ParseHeaderError, ReadHeaderError};
use ndarray_npy::{ReadableElement, WritableElement, WriteNpyExt};

use crate::attn::limits;
use crate::error::{Error, Result};

/// The element types attnviz reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NpyDtype {
    F32,
    F64,
}

impl NpyDtype {
    pub fn bytes(self) -> u64 {
        match self {
            NpyDtype::F32 => 4,
            NpyDtype::F64 => 8,
        }
    }

    /// NumPy's name, e.g. "float32".
    pub fn name(self) -> &'static str {
        match self {
            NpyDtype::F32 => "float32",
            NpyDtype::F64 => "float64",
        }
    }
}

/// What a checked header says: dtype and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyInfo {
    pub dtype: NpyDtype,
    pub shape: Vec<usize>,
}

/// An array as read: the values in f64 and the dtype the file had.
#[derive(Debug, Clone)]
pub struct NpyArray {
    pub data: ArrayD<f64>,
    pub dtype: NpyDtype,
}

/// The dtype of a header's descriptor, or why attnviz cannot read it.
fn dtype_of(descr: &str) -> std::result::Result<NpyDtype, String> {
    let fix = "save it as float32 or float64, e.g. np.save(path, a.astype(np.float32))";
    match descr {
        "<f4" => return Ok(NpyDtype::F32),
        "<f8" => return Ok(NpyDtype::F64),
        _ => {}
    }
    let (order, kind) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (Some(c), &descr[1..]),
        _ => (None, descr),
    };
    let letter = kind.chars().next().unwrap_or(' ');
    Err(match (order, letter) {
        (Some('>'), 'f') => format!(
            "dtype '{descr}' is big-endian; attnviz reads little-endian data: np.save(path, a.astype('<{kind}'))"
        ),
        (_, 'i' | 'u') => {
            format!("dtype '{descr}' is an integer type; attnviz reads float32 or float64: {fix}")
        }
        (_, 'b' | '?') => format!("dtype '{descr}' is boolean; {fix}"),
        (_, 'f') if kind == "f2" => format!("dtype '{descr}' is float16; {fix}"),
        _ => format!("dtype '{descr}' is not float32 or float64; {fix}"),
    })
}

fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| Error::file(path, format!("cannot open: {e}")))
}

/// Read and check the header; leaves `reader` at the first byte of data.
fn check_header(path: &Path, reader: &mut BufReader<File>) -> Result<(NpyInfo, Header)> {
    let file_len = reader
        .get_ref()
        .metadata()
        .map_err(|e| Error::file(path, format!("cannot read: {e}")))?
        .len();
    let header = Header::from_reader(reader).map_err(|e| match e {
        ReadHeaderError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => Error::file(
            path,
            format!(
                "truncated .npy header: the file ({file_len} bytes) ends inside the header; write it again with np.save"
            ),
        ),
        ReadHeaderError::Io(io) => Error::file(path, format!("cannot read: {io}")),
        ReadHeaderError::Parse(ParseHeaderError::MagicString) => Error::file(
            path,
            "not a .npy file (it does not start with \\x93NUMPY); save arrays with np.save",
        ),
        ReadHeaderError::Parse(p) => Error::file(
            path,
            format!("garbage in the .npy header ({p}); write it again with np.save"),
        ),
    })?;
    let descr = match header.type_descriptor.as_string() {
        Some(s) => s.clone(),
        None => {
            return Err(Error::file(
                path,
                format!(
                    "dtype {} is a structured type; save a plain float32 or float64 array",
                    header.type_descriptor
                ),
            ));
        }
    };
    let dtype = dtype_of(&descr).map_err(|msg| Error::file(path, msg))?;
    if header.layout.is_fortran() {
        return Err(Error::file(
            path,
            "the array is stored in Fortran order; save a C-ordered one: np.save(path, np.ascontiguousarray(a))",
        ));
    }
    let shape = header.shape.clone();
    let elements = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
    let Some(elements) = elements.filter(|&e| e <= limits::MAX_TENSOR_ELEMENTS) else {
        return Err(Error::file(
            path,
            format!(
                "shape {shape:?} has more than {} elements (MAX_TENSOR_ELEMENTS); split the tensor",
                limits::MAX_TENSOR_ELEMENTS
            ),
        ));
    };
    let data_start = reader
        .stream_position()
        .map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
    let held = file_len.saturating_sub(data_start);
    let claimed = elements * dtype.bytes();
    if claimed > held {
        return Err(Error::file(
            path,
            format!(
                "the header claims shape {shape:?} of {} ({claimed} bytes) but the file holds only {held} bytes of data: it is truncated",
                dtype.name()
            ),
        ));
    }
    if claimed < held {
        return Err(Error::file(
            path,
            format!(
                "the file holds {held} bytes of data but its header says shape {shape:?} of {} ({claimed} bytes); header and data disagree",
                dtype.name()
            ),
        ));
    }
    Ok((NpyInfo { dtype, shape }, header))
}

/// Read only the header (checked as [`read`] does).
pub fn read_info(path: &Path) -> Result<NpyInfo> {
    let mut reader = BufReader::new(open(path)?);
    check_header(path, &mut reader).map(|(info, _)| info)
}

fn read_vec<T: ReadableElement>(
    path: &Path,
    reader: &mut BufReader<File>,
    header: &Header,
) -> Result<Vec<T>> {
    let len = header.shape.iter().product();
    T::read_to_end_exact_vec(reader, &header.type_descriptor, len)
        .map_err(|e| Error::file(path, format!("cannot read the data: {e}")))
}

/// Read an f32 or f64 array of any rank; values come back as f64.
pub fn read(path: &Path) -> Result<NpyArray> {
    let mut reader = BufReader::new(open(path)?);
    let (info, header) = check_header(path, &mut reader)?;
    let data: Vec<f64> = match info.dtype {
        NpyDtype::F64 => read_vec::<f64>(path, &mut reader, &header)?,
        NpyDtype::F32 => read_vec::<f32>(path, &mut reader, &header)?
            .into_iter()
            .map(f64::from)
            .collect(),
    };
    let data = ArrayD::from_shape_vec(IxDyn(&info.shape), data)
        .map_err(|e| Error::Internal(format!("{}: shape and data: {e}", path.display())))?;
    Ok(NpyArray {
        data,
        dtype: info.dtype,
    })
}

/// Read an f32 or f64 array of any rank as f64.
pub fn read_f64(path: &Path) -> Result<ArrayD<f64>> {
    read(path).map(|a| a.data)
}

fn encode_any<T: WritableElement>(a: &ArrayD<T>) -> std::result::Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    a.write_npy(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes)
}

/// The bytes of a .npy file holding `a` as `dtype`. A finite value that float32 cannot
/// hold (|x| > 3.4e38) is refused, naming its index, rather than written as infinity.
pub fn encode(a: &ArrayD<f64>, dtype: NpyDtype) -> std::result::Result<Vec<u8>, String> {
    match dtype {
        NpyDtype::F64 => encode_any(a),
        NpyDtype::F32 => {
            if let Some((index, x)) = a
                .indexed_iter()
                .find(|(_, x)| x.is_finite() && !(**x as f32).is_finite())
            {
                return Err(format!(
                    "the value {x:e} at index {:?} is beyond the float32 range (±{:e}) of this output",
                    index.slice(),
                    f32::MAX
                ));
            }
            encode_any(&a.mapv(|x| x as f32))
        }
    }
}

/// Write an f32 array.
pub fn write_f32(path: &Path, a: &ArrayD<f32>) -> Result<()> {
    let bytes = encode_any(a).map_err(|e| Error::file(path, format!("cannot write: {e}")))?;
    crate::output::write_file(path, &bytes)
}

/// The header of a .npy file holding little-endian f32 of `shape` in C order, for a
/// writer that streams the data after it in parts (a layer at a time).
pub fn f32_header(shape: &[usize]) -> Result<Vec<u8>> {
    Header {
        type_descriptor: <f32 as WritableElement>::type_descriptor(),
        layout: Layout::Standard,
        shape: shape.to_vec(),
    }
    .to_bytes()
    .map_err(|e| Error::Internal(format!("cannot format a .npy header: {e}")))
}

/// Write an f64 array.
pub fn write_f64(path: &Path, a: &ArrayD<f64>) -> Result<()> {
    write(path, a, NpyDtype::F64)
}

/// Write f64 values as `dtype`, whole or not at all ([`crate::output::write_file`]).
pub fn write(path: &Path, a: &ArrayD<f64>, dtype: NpyDtype) -> Result<()> {
    let bytes = encode(a, dtype).map_err(|e| Error::file(path, e))?;
    crate::output::write_file(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_header_reads_back_as_the_whole_array() {
        for shape in [vec![3usize], vec![2, 3, 1, 4]] {
            let len: usize = shape.iter().product();
            let data: Vec<f32> = (0..len).map(|x| x as f32 * 0.5 - 1.0).collect();
            let mut bytes = f32_header(&shape).unwrap();
            assert_eq!(bytes.len() % 64, 0);
            bytes.extend(data.iter().flat_map(|x| x.to_le_bytes()));
            let whole = ArrayD::from_shape_vec(IxDyn(&shape), data).unwrap();
            assert_eq!(bytes, encode_any(&whole).unwrap());
        }
    }

    #[test]
    fn dtypes_are_named_with_their_fix() {
        assert_eq!(dtype_of("<f4"), Ok(NpyDtype::F32));
        assert_eq!(dtype_of("<f8"), Ok(NpyDtype::F64));
        assert!(dtype_of(">f8").unwrap_err().contains("big-endian"));
        assert!(dtype_of("<i8").unwrap_err().contains("integer"));
        assert!(dtype_of("|u1").unwrap_err().contains("integer"));
        assert!(dtype_of("|b1").unwrap_err().contains("boolean"));
        assert!(dtype_of("<f2").unwrap_err().contains("float16"));
        assert!(dtype_of("<c16").unwrap_err().contains("float32 or float64"));
    }
}
