//! The element-wise and per-row steps between a block's products (norms, the MLP's
//! activation, splitting rows into heads, RoPE, residual additions) shared out over the
//! same team as the products when they are big enough to pay for it. Without this the
//! workers wait while the calling thread does them alone: on a prefill of 128 tokens of
//! SmolLM2 on two threads they were about a sixth of a block's time.
//!
//! Each step's result is the same however its rows are split: every row (or element) is
//! computed by the same code on one thread.

use std::ops::Range;

use crate::error::Result;
use crate::kernel::team;

/// Fewer elements than this run on the calling thread: below it, handing the step to
/// the team costs about what it saves (a job is a few microseconds to publish and join).
const PAR_MIN: usize = 1 << 14;

/// Parts per thread when shared out, so a thread that is late to start takes fewer.
const PARTS_PER_THREAD: usize = 4;

/// `threads` for a step over `elems` elements whose output slice is bigger than that
/// (writing into part of a buffer), so [`rows_mut`] goes by the work, not the slice.
pub(crate) fn threads_for(threads: usize, elems: usize) -> usize {
    if elems < PAR_MIN { 1 } else { threads }
}

/// `f(rows, chunk)` over `out` [rows, row_len] split into runs of whole rows, on up to
/// `threads` threads when `out` is big enough, else in one call over every row.
pub(crate) fn rows_mut(
    threads: usize,
    out: &mut [f32],
    row_len: usize,
    f: &(dyn Fn(Range<usize>, &mut [f32]) + Sync),
) -> Result<()> {
    let rows = out.len().checked_div(row_len).unwrap_or(0);
    let parts = if threads <= 1 || out.len() < PAR_MIN {
        1
    } else {
        (threads * PARTS_PER_THREAD).min(rows)
    };
    if parts <= 1 {
        f(0..rows, out);
        return Ok(());
    }
    let span = |p: usize| rows * p / parts..rows * (p + 1) / parts;
    let mut chunks: Vec<&mut [f32]> = Vec::with_capacity(parts);
    let mut rest = out;
    for p in 0..parts {
        let (chunk, tail) = rest.split_at_mut(span(p).len() * row_len);
        chunks.push(chunk);
        rest = tail;
    }
    team::for_each_mut(threads, &mut chunks, &|p, chunk| f(span(p), chunk))
}

/// x += y, element by element, shared out as [`rows_mut`] does.
pub(crate) fn add_into(threads: usize, x: &mut [f32], y: &[f32]) -> Result<()> {
    const SPAN: usize = 1024;
    let whole = x.len() / SPAN * SPAN;
    let (body, tail) = x.split_at_mut(whole);
    rows_mut(threads, body, SPAN, &|r, chunk| {
        let y = &y[r.start * SPAN..r.end * SPAN];
        chunk.iter_mut().zip(y).for_each(|(a, b)| *a += b);
    })?;
    tail.iter_mut().zip(&y[whole..]).for_each(|(a, b)| *a += b);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_given_once_whole() {
        for threads in [1, 2, 3] {
            for (rows, row_len) in [(0, 5), (1, 7), (5, 3), (37, 576), (200, 100), (3, 20_000)] {
                let mut out = vec![0.0f32; rows * row_len];
                rows_mut(threads, &mut out, row_len, &|r, chunk| {
                    assert_eq!(chunk.len(), r.len() * row_len);
                    for (i, row) in r.zip(chunk.chunks_exact_mut(row_len)) {
                        for v in row {
                            *v += i as f32 + 1.0;
                        }
                    }
                })
                .unwrap();
                for (i, row) in out.chunks_exact(row_len.max(1)).enumerate() {
                    assert!(row.iter().all(|&v| v == i as f32 + 1.0), "row {i}");
                }
            }
        }
    }

    #[test]
    fn add_into_adds_every_element_once() {
        for threads in [1, 2] {
            for len in [0, 3, 1024, 1025, 70_001] {
                let mut x: Vec<f32> = (0..len).map(|i| i as f32).collect();
                let y: Vec<f32> = (0..len).map(|i| 0.5 * i as f32 + 1.0).collect();
                add_into(threads, &mut x, &y).unwrap();
                for (i, v) in x.iter().enumerate() {
                    assert_eq!(*v, 1.5 * i as f32 + 1.0, "len {len} at {i}");
                }
            }
        }
    }
}
