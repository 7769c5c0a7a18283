//! Reading and writing .npy tensors (little-endian f32 or f64, C order).
//!
//! Minimal first version; hardened (header checks before allocation, dtype errors) in
//! the engine work.

use std::path::Path;

use ndarray::ArrayD;
use ndarray_npy::{ReadNpyExt, WriteNpyExt};

use crate::error::{Error, Result};

/// Read an f32 or f64 array of any rank as f64.
pub fn read_f64(path: &Path) -> Result<ArrayD<f64>> {
    let open =
        || std::fs::File::open(path).map_err(|e| Error::file(path, format!("cannot open: {e}")));
    if let Ok(a) = ArrayD::<f64>::read_npy(open()?) {
        return Ok(a);
    }
    let a = ArrayD::<f32>::read_npy(open()?)
        .map_err(|e| Error::file(path, format!("not a readable f32/f64 .npy file: {e}")))?;
    Ok(a.mapv(f64::from))
}

/// Write an f32 array.
pub fn write_f32(path: &Path, a: &ArrayD<f32>) -> Result<()> {
    let f = std::fs::File::create(path)
        .map_err(|e| Error::file(path, format!("cannot create: {e}")))?;
    a.write_npy(std::io::BufWriter::new(f))
        .map_err(|e| Error::file(path, format!("cannot write: {e}")))
}
