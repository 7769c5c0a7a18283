//! Where each GGUF tensor's bytes lie, checked before any is read.
//!
//! A tensor info is a name, a shape, a type and an offset; nothing in the file repeats
//! the byte size, so a damaged offset or type would silently read other bytes as weights
//! (header bytes, or the next tensor's) and every result would be garbage with exit 0.
//! Two checks close that: each tensor's range is computed with checked arithmetic and
//! must lie in the data section, and the ranges must tile the data section the way every
//! GGUF writer lays them out (in order, each padded to the alignment, no gap, no
//! overlap). A type swapped for one of another size breaks the tiling even when the
//! bytes it claims still fit in the file.

use std::path::Path;

use super::quant::{self, GgmlType};
use crate::error::{Error, Result};

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

/// One tensor's info from its header fields, its byte range checked against the file.
pub(super) fn tensor_info(
    path: &Path,
    name: String,
    dims: Vec<u64>,
    ty_id: u32,
    off: u64,
    data_start: u64,
    alignment: u64,
) -> Result<TensorInfo> {
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
    if dims.contains(&0) {
        return Err(Error::file(
            path,
            format!("tensor {name}: shape {dims:?} has a dimension of 0"),
        ));
    }
    let elems = dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .filter(|&e| e <= usize::MAX as u64 / 4)
        .ok_or_else(|| Error::file(path, format!("tensor {name}: shape {dims:?} is too large")))?;
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
    let bytes = (elems / ty.block_elems() as u64)
        .checked_mul(ty.block_bytes() as u64)
        .ok_or_else(|| Error::file(path, format!("tensor {name}: shape {dims:?} is too large")))?;
    if !off.is_multiple_of(alignment) {
        return Err(Error::file(
            path,
            format!(
                "tensor {name}: data offset {off} is not a multiple of the alignment {alignment}"
            ),
        ));
    }
    Ok(TensorInfo {
        start: data_start
            .checked_add(off)
            .ok_or_else(|| past_end(path, &name, off, bytes))?,
        name,
        dims,
        ty,
        bytes,
    })
}

fn past_end(path: &Path, name: &str, off: u64, bytes: u64) -> Error {
    Error::file(
        path,
        format!(
            "tensor {name}: data offset {off} + {bytes} bytes runs past the end of the file: a damaged offset, or a truncated file?"
        ),
    )
}

/// Check that the tensors' ranges lie in the file and tile its data section: sorted by
/// offset, each starts where the one before ends (rounded up to the alignment), and the
/// last ends the file.
pub(super) fn check_layout(
    path: &Path,
    tensors: &[TensorInfo],
    data_start: u64,
    file_bytes: u64,
    alignment: u64,
) -> Result<()> {
    for t in tensors {
        if t.start
            .checked_add(t.bytes)
            .is_none_or(|end| end > file_bytes)
        {
            return Err(Error::file(
                path,
                format!(
                    "tensor {}: data [{}, {}) runs past the end of the file ({file_bytes} bytes): truncated file?",
                    t.name,
                    t.start,
                    t.start.saturating_add(t.bytes)
                ),
            ));
        }
    }
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.start);
    let describe = |t: &TensorInfo| {
        format!(
            "tensor {} ({} {:?}, {} bytes at {})",
            t.name,
            t.ty.name(),
            t.dims,
            t.bytes,
            t.start
        )
    };
    let mismatch = "a tensor's type, shape or offset does not match the data (a damaged header)";
    let mut expected = data_start;
    let mut before: Option<&TensorInfo> = None;
    for t in order {
        if t.start != expected {
            let amount = t.start.abs_diff(expected);
            let prev = before.map_or("the start of the data section".to_string(), describe);
            let how = if t.start < expected {
                format!("overlaps the last {amount} bytes of {prev}")
            } else {
                format!("starts {amount} bytes after the end of {prev}")
            };
            return Err(Error::file(
                path,
                format!("{} {how}: {mismatch}", describe(t)),
            ));
        }
        let end = t.start + t.bytes;
        expected = end.div_ceil(alignment).saturating_mul(alignment);
        before = Some(t);
    }
    // The last tensor may or may not be padded to the alignment.
    if let Some(last) = before {
        let end = last.start + last.bytes;
        if file_bytes > expected {
            return Err(Error::file(
                path,
                format!(
                    "{} bytes follow the last {} (the file has {file_bytes} bytes, the tensors end at {end}): {mismatch}",
                    file_bytes - expected,
                    describe(last)
                ),
            ));
        }
    }
    Ok(())
}
