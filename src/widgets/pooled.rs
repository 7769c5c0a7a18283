//! Zoom and pan over a large matrix (an n x n attention map of 1,024 tokens does not fit a
//! terminal): a [`Viewport`] says which part of the matrix is on screen and how many of its
//! entries one screen cell covers, and [`pool`] summarises each cell's block by its mean or
//! its maximum. The view says which, so a person knows what a colour stands for.

/// How one screen cell summarises the block of entries it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Pool {
    /// The block's mean: row sums of an attention map stay comparable.
    #[default]
    Mean,
    /// The block's largest entry: a single strong weight stays visible when zoomed out.
    Max,
}

impl Pool {
    pub fn name(self) -> &'static str {
        match self {
            Pool::Mean => "mean",
            Pool::Max => "max",
        }
    }

    pub fn toggled(self) -> Pool {
        match self {
            Pool::Mean => Pool::Max,
            Pool::Max => Pool::Mean,
        }
    }
}

/// Which part of an `n_rows` x `n_cols` matrix is on screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Viewport {
    /// First matrix row and column shown.
    pub row0: usize,
    pub col0: usize,
    /// Matrix rows (and columns) one screen cell covers; 1 is full detail.
    pub per_cell: usize,
}

impl Viewport {
    /// The whole matrix in `out_rows` x `out_cols` cells: the smallest block size that fits.
    pub fn fit(n_rows: usize, n_cols: usize, out_rows: usize, out_cols: usize) -> Viewport {
        let need = |n: usize, out: usize| n.div_ceil(out.max(1)).max(1);
        Viewport {
            row0: 0,
            col0: 0,
            per_cell: need(n_rows, out_rows).max(need(n_cols, out_cols)),
        }
    }

    /// Screen cells the matrix needs from `row0`/`col0` on at this zoom: (rows, cols).
    pub fn cells(&self, n_rows: usize, n_cols: usize) -> (usize, usize) {
        let p = self.per_cell.max(1);
        (
            n_rows.saturating_sub(self.row0).div_ceil(p),
            n_cols.saturating_sub(self.col0).div_ceil(p),
        )
    }

    /// Keep the origin inside the matrix and, when the matrix fits, at 0; move it so the
    /// entry `focus` (row, col) is on screen.
    pub fn clamp(
        &mut self,
        n_rows: usize,
        n_cols: usize,
        out_rows: usize,
        out_cols: usize,
        focus: (usize, usize),
    ) {
        self.per_cell = self.per_cell.max(1);
        let p = self.per_cell;
        let fix = |origin: &mut usize, n: usize, out: usize, f: usize| {
            let span = out.max(1) * p;
            if n <= span {
                *origin = 0;
                return;
            }
            let f = f.min(n - 1);
            if f < *origin {
                *origin = f / p * p;
            } else if f >= *origin + span {
                *origin = (f + 1).saturating_sub(span).div_ceil(p) * p;
            }
            *origin = (*origin).min(n - span).min(n.saturating_sub(1));
        };
        fix(&mut self.row0, n_rows, out_rows, focus.0);
        fix(&mut self.col0, n_cols, out_cols, focus.1);
    }

    /// The screen cell (row, col) that entry (i, j) falls in, if it is on screen.
    pub fn cell_of(
        &self,
        i: usize,
        j: usize,
        out_rows: usize,
        out_cols: usize,
    ) -> Option<(usize, usize)> {
        let p = self.per_cell.max(1);
        if i < self.row0 || j < self.col0 {
            return None;
        }
        let (r, c) = ((i - self.row0) / p, (j - self.col0) / p);
        (r < out_rows && c < out_cols).then_some((r, c))
    }
}

/// Summarise the part of `data` (`n_rows` x `n_cols`, row-major) that `vp` shows in
/// `out_rows` x `out_cols` cells, row-major; a cell past the matrix's edge is None.
/// The mean is over the block's finite entries (a masked score of -inf does not make
/// its whole block -inf); a block with none is -inf.
/// Cost: one read per entry on screen, so a 1,024 x 1,024 map pools in about a millisecond.
pub fn pool<T: Copy + Into<f64>>(
    data: &[T],
    n_rows: usize,
    n_cols: usize,
    vp: &Viewport,
    out_rows: usize,
    out_cols: usize,
    how: Pool,
) -> Vec<Option<f64>> {
    debug_assert_eq!(data.len(), n_rows * n_cols);
    let p = vp.per_cell.max(1);
    let mut out = vec![None; out_rows * out_cols];
    for r in 0..out_rows {
        let i0 = vp.row0 + r * p;
        if i0 >= n_rows {
            break;
        }
        let i1 = (i0 + p).min(n_rows);
        for c in 0..out_cols {
            let j0 = vp.col0 + c * p;
            if j0 >= n_cols {
                break;
            }
            let j1 = (j0 + p).min(n_cols);
            let block = (i0..i1).flat_map(|i| data[i * n_cols + j0..i * n_cols + j1].iter());
            let v = match how {
                Pool::Mean => {
                    let (mut sum, mut count) = (0.0f64, 0usize);
                    for &x in block {
                        let x: f64 = x.into();
                        if x.is_finite() {
                            sum += x;
                            count += 1;
                        }
                    }
                    if count == 0 {
                        f64::NEG_INFINITY
                    } else {
                        sum / count as f64
                    }
                }
                Pool::Max => block.fold(f64::NEG_INFINITY, |m, &x| m.max(x.into())),
            };
            out[r * out_cols + c] = Some(v);
        }
    }
    out
}

/// [`pool`] of a matrix given row by row: `fill(i, row)` writes the first entries of
/// row i into `row` (n_cols long) and returns how many; the rest of the row is 0 (a
/// causal map keeps only j <= i). The same numbers as [`pool`] on the whole matrix, in
/// the same order of addition, without making it: a 1,024-token head's map pools from
/// its half that is stored.
pub fn pool_rows(
    n_rows: usize,
    n_cols: usize,
    vp: &Viewport,
    out_rows: usize,
    out_cols: usize,
    how: Pool,
    mut fill: impl FnMut(usize, &mut [f32]) -> usize,
) -> Vec<Option<f64>> {
    let p = vp.per_cell.max(1);
    let mut out = vec![None; out_rows * out_cols];
    let mut row = vec![0.0f32; n_cols];
    let mut sum = vec![0.0f64; out_cols];
    let mut count = vec![0usize; out_cols];
    let mut max = vec![f64::NEG_INFINITY; out_cols];
    for r in 0..out_rows {
        let i0 = vp.row0 + r * p;
        if i0 >= n_rows {
            break;
        }
        let i1 = (i0 + p).min(n_rows);
        sum.fill(0.0);
        count.fill(0);
        max.fill(f64::NEG_INFINITY);
        for i in i0..i1 {
            let len = fill(i, &mut row).min(n_cols);
            for c in 0..out_cols {
                let j0 = vp.col0 + c * p;
                if j0 >= n_cols {
                    break;
                }
                let j1 = (j0 + p).min(n_cols);
                for &x in &row[j0.min(len)..j1.min(len)] {
                    let x: f64 = x.into();
                    if x.is_finite() {
                        sum[c] += x;
                        count[c] += 1;
                    }
                    max[c] = max[c].max(x);
                }
                // The zeros past the stored part: finite, adding nothing to the sum.
                let zeros = j1 - j0.max(len).min(j1);
                if zeros > 0 {
                    count[c] += zeros;
                    max[c] = max[c].max(0.0);
                }
            }
        }
        for c in 0..out_cols {
            if vp.col0 + c * p >= n_cols {
                break;
            }
            out[r * out_cols + c] = Some(match how {
                Pool::Mean if count[c] == 0 => f64::NEG_INFINITY,
                Pool::Mean => sum[c] / count[c] as f64,
                Pool::Max => max[c],
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_row_by_row_gives_the_same_numbers_as_the_whole_matrix() {
        // A lower-triangular 37 x 37 map, pooled at several zooms and origins.
        let n = 37;
        let full: Vec<f32> = (0..n * n)
            .map(|x| {
                if x % n <= x / n {
                    ((x * 7919) % 101) as f32 / 101.0
                } else {
                    0.0
                }
            })
            .collect();
        for (per_cell, row0, col0) in [(1, 0, 0), (4, 0, 0), (5, 10, 5), (9, 0, 18), (40, 0, 0)] {
            let vp = Viewport {
                row0,
                col0,
                per_cell,
            };
            for how in [Pool::Mean, Pool::Max] {
                let whole = pool(&full, n, n, &vp, 6, 7, how);
                let rows = pool_rows(n, n, &vp, 6, 7, how, |i, row| {
                    row[..=i].copy_from_slice(&full[i * n..i * n + i + 1]);
                    i + 1
                });
                assert_eq!(whole, rows, "{per_cell} {row0} {col0} {how:?}");
            }
        }
    }

    fn ramp(n: usize, m: usize) -> Vec<f32> {
        (0..n * m).map(|x| x as f32).collect()
    }

    #[test]
    fn full_detail_is_the_matrix_itself() {
        let d = ramp(3, 4);
        let vp = Viewport {
            row0: 0,
            col0: 0,
            per_cell: 1,
        };
        let got = pool(&d, 3, 4, &vp, 3, 4, Pool::Max);
        assert_eq!(got, d.iter().map(|&x| Some(x as f64)).collect::<Vec<_>>());
    }

    #[test]
    fn blocks_at_the_edge_are_partial_and_cells_past_it_empty() {
        // 5 x 5, 2 per cell: blocks rows {0,1},{2,3},{4}.
        let d = ramp(5, 5);
        let vp = Viewport {
            row0: 0,
            col0: 0,
            per_cell: 2,
        };
        let mean = pool(&d, 5, 5, &vp, 4, 4, Pool::Mean);
        assert_eq!(mean[0], Some((0.0 + 1.0 + 5.0 + 6.0) / 4.0));
        // Bottom-right block is the single entry 24.
        assert_eq!(mean[2 * 4 + 2], Some(24.0));
        // Column 2 of the output covers column 4 only: rows 0,1 -> (4 + 9) / 2.
        assert_eq!(mean[2], Some(6.5));
        assert_eq!(mean[3], None);
        assert_eq!(mean[3 * 4], None);
        let max = pool(&d, 5, 5, &vp, 3, 3, Pool::Max);
        assert_eq!(max[0], Some(6.0));
        assert_eq!(max[4], Some(18.0));
    }

    #[test]
    fn the_mean_skips_masked_entries() {
        let d = [1.0f64, f64::NEG_INFINITY, 3.0, f64::NEG_INFINITY];
        let vp = Viewport {
            row0: 0,
            col0: 0,
            per_cell: 2,
        };
        assert_eq!(pool(&d, 2, 2, &vp, 1, 1, Pool::Mean), vec![Some(2.0)]);
        let all = [f64::NEG_INFINITY; 4];
        assert_eq!(
            pool(&all, 2, 2, &vp, 1, 1, Pool::Mean),
            vec![Some(f64::NEG_INFINITY)]
        );
    }

    #[test]
    fn fit_covers_the_whole_matrix() {
        for (n, out) in [(1024, 100), (7, 7), (8, 7), (1, 1), (300, 3)] {
            let vp = Viewport::fit(n, n, out, out);
            let (r, c) = vp.cells(n, n);
            assert!(r <= out && c <= out, "{n} in {out}: {r}x{c} cells");
            assert!(vp.per_cell == 1 || n.div_ceil(vp.per_cell - 1) > out);
        }
    }

    #[test]
    fn clamp_keeps_the_focus_on_screen() {
        let n = 1000;
        let mut vp = Viewport {
            row0: 0,
            col0: 0,
            per_cell: 4,
        };
        for focus in [(999, 0), (0, 999), (500, 500), (3, 997), (0, 0)] {
            vp.clamp(n, n, 30, 40, focus);
            assert!(
                vp.cell_of(focus.0, focus.1, 30, 40).is_some(),
                "{focus:?} not on screen with {vp:?}"
            );
            assert!(vp.row0 + 30 * 4 <= n.max(120) && vp.col0 + 40 * 4 <= n.max(160));
        }
        // A matrix that fits sits at the origin.
        vp.row0 = 10;
        vp.clamp(20, 20, 30, 40, (19, 19));
        assert_eq!((vp.row0, vp.col0), (0, 0));
    }
}
