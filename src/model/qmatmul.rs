//! y = x W^T (+ b) for a quantized W [n, k] (GGUF blocks read in place from the map) and
//! x [m, k] f32, threads splitting W's rows. Three ways to run it:
//!
//! - [`QPath::Int8`]: each row of x quantized once to int8 blocks, then integer block dot
//!   products ([`super::qdot`]), llama.cpp's way. It reads every weight once and does the
//!   least work per weight: the path for a decode step (m = 1).
//! - [`QPath::Tiles`]: [`TILE_ROWS`] rows of W dequantized into a per-thread f32 buffer
//!   (it stays in L2), then the f32 register-blocked kernel of [`super::dense`] against all
//!   m rows of x, packed once per call. Exact: the same numbers as an f32 product with the
//!   dequantized matrix, and the dequantization is spread over the m rows.
//! - [`QPath::Amx`]: int8 activations on Intel's AMX tile unit ([`super::amx`]), many rows
//!   of x at once, for the 32-value block types; the other types go to the tiles.
//!
//! By default one row of x runs on int8 and several rows on AMX where the CPU has it, else
//! on the tiles. A forward over a text (what `model run` shows and the real-model tests
//! compare with transformers, attention within 2e-4) must be the exact product; int8
//! activations change attention weights by about 1e-3 on SmolLM2 (docs/performance.md).
//! [`exact`] puts every product of a closure on the tiles (the forward pass and the app's
//! decoding use it), so int8 activations are for `generate`: its decode steps and, on AMX,
//! its prefill. [`QMATMUL_ENV`] forces one path everywhere.

use std::cell::RefCell;

use super::dense;
use super::matrix::QuantMatrix;
use super::qdot::{ActFormat, Acts, QTier, RowDot, kernel};
use super::quant::GgmlType;
use crate::error::{Error, Result};
use crate::kernel::{Tier, team};

/// Environment variable forcing the path of every quantized product: `int8` or `f32`
/// (dequantized tiles, exact); unset or `auto`: int8 for one row, AMX (else tiles) for
/// more.
pub const QMATMUL_ENV: &str = "ATTNVIZ_QMATMUL";

/// Rows of W dequantized at a time on the tile path: a multiple of the f32 kernel's
/// register block (6 rows); 48 rows of k = 1536 are 288 KB, well inside L2.
pub const TILE_ROWS: usize = 48;

/// Rows of W per work unit on the int8 path.
const INT8_ROWS: usize = 16;

/// Rows of W per work unit on the AMX path: one panel of tiles.
const AMX_ROWS: usize = 16;

/// Below this many weights (summed over a call's products) a call stays on one thread.
const PAR_MIN: usize = 1 << 16;

/// How a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QPath {
    Int8,
    Tiles,
    /// Int8 activations on the AMX tile unit ([`super::amx`]) for the types it takes,
    /// the others on [`QPath::Tiles`]; where the CPU has no AMX, all on the tiles.
    Amx,
}

thread_local! {
    /// The path [`exact`] asks for on this thread while its closure runs.
    static FORCED: std::cell::Cell<Option<QPath>> = const { std::cell::Cell::new(None) };
}

impl QPath {
    /// The path for m rows of x: [`QMATMUL_ENV`] if set, else the tiles inside [`exact`],
    /// else int8 for one row.
    pub fn for_rows(m: usize) -> QPath {
        match std::env::var(QMATMUL_ENV).as_deref().map(str::trim) {
            Ok("int8") => QPath::Int8,
            Ok("f32") => QPath::Tiles,
            _ => match FORCED.get() {
                Some(path) => path,
                None if m <= 1 => QPath::Int8,
                None if amx_available() => QPath::Amx,
                None => QPath::Tiles,
            },
        }
    }
}

/// Run `f` with every quantized product this thread starts on the exact path (dequantized
/// tiles), one row or many: what a forward over a text and the app's decoding show must be
/// the model's own numbers, not int8 activations' (on SmolLM2 a greedy chat reply changes
/// from "The capital of France is Paris." to another answer with them, as in llama.cpp).
pub fn exact<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(Option<QPath>);
    impl Drop for Restore {
        fn drop(&mut self) {
            FORCED.set(self.0);
        }
    }
    let _restore = Restore(FORCED.replace(Some(QPath::Tiles)));
    f()
}

fn amx_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::amx::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether [`QPath::Amx`] runs W of type `ty` on the tile unit on this machine.
fn on_amx(ty: GgmlType) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::amx::available() && super::amx::supports(ty);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = ty;
        false
    }
}

/// One product of a call: y [m, n] = x W^T (+ bias), W [n, k], bias [n].
pub struct QProduct<'a> {
    pub w: &'a QuantMatrix,
    pub bias: Option<&'a [f32]>,
    pub y: &'a mut [f32],
}

/// Every product of x [m, k] in `prods`, with `threads` workers, on the detected tiers
/// and the path [`QPath::for_rows`] picks.
pub fn products(
    x: &[f32],
    m: usize,
    k: usize,
    prods: &mut [QProduct<'_>],
    threads: usize,
) -> Result<()> {
    products_on(QTier::detect(), QPath::for_rows(m), x, m, k, prods, threads)
}

/// [`products`] on a given integer tier and path (tests cover each).
pub fn products_on(
    tier: QTier,
    path: QPath,
    x: &[f32],
    m: usize,
    k: usize,
    prods: &mut [QProduct<'_>],
    threads: usize,
) -> Result<()> {
    if x.len() != m * k {
        return Err(Error::Internal(format!(
            "quantized product: x holds {} values for [{m}, {k}]",
            x.len()
        )));
    }
    for p in prods.iter() {
        let n = p.w.rows();
        if p.w.cols() != k || p.y.len() != m * n || p.bias.is_some_and(|b| b.len() != n) {
            return Err(Error::Internal(format!(
                "quantized product: W is [{n}, {}] for k = {k}, y holds {} for [{m}, {n}], bias {:?}",
                p.w.cols(),
                p.y.len(),
                p.bias.map(<[f32]>::len)
            )));
        }
    }
    if m == 0 || prods.iter().all(|p| p.w.rows() == 0) {
        return Ok(());
    }
    if k == 0 {
        for p in prods.iter_mut() {
            for row in p.y.chunks_mut(p.w.rows()) {
                match p.bias {
                    Some(b) => row.copy_from_slice(b),
                    None => row.fill(0.0),
                }
            }
        }
        return Ok(());
    }
    let jobs: Vec<Job> = prods
        .iter_mut()
        .map(|p| Job {
            w: p.w,
            bias: p.bias,
            y: YPtr(p.y.as_mut_ptr()),
        })
        .collect();
    if path == QPath::Amx {
        let (amx, rest): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| on_amx(j.w.ty()));
        run(tier, QPath::Amx, x, m, k, &amx, threads)?;
        return run(tier, QPath::Tiles, x, m, k, &rest, threads);
    }
    run(tier, path, x, m, k, &jobs, threads)
}

/// The jobs of one call on one path, split over up to `threads` workers by units of rows.
fn run(
    tier: QTier,
    path: QPath,
    x: &[f32],
    m: usize,
    k: usize,
    jobs: &[Job],
    threads: usize,
) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let unit_rows = match path {
        QPath::Int8 => INT8_ROWS,
        QPath::Tiles => TILE_ROWS,
        QPath::Amx => AMX_ROWS,
    };
    let units: usize = jobs.iter().map(|j| j.w.rows().div_ceil(unit_rows)).sum();
    let weights: usize = jobs.iter().map(|j| j.w.rows() * k).sum();
    let threads = if weights < PAR_MIN {
        1
    } else {
        threads.clamp(1, units)
    };
    // Int8 units are equal and tiny (16 rows of one dot each): fixed shares. Tile and
    // AMX units are many microseconds each: handed out as threads come free.
    let range = |t: usize| units * t / threads..units * (t + 1) / threads;
    let shares =
        |run: &(dyn Fn(std::ops::Range<usize>) + Sync)| team::fork(threads, &|t| run(range(t)));
    let one_by_one = |run: &(dyn Fn(std::ops::Range<usize>) + Sync)| {
        team::for_each(threads, units, &|u| run(u..u + 1))
    };
    match path {
        QPath::Int8 => {
            // One quantization of x per activation format the products need.
            let kernels: Vec<(ActFormat, RowDot)> =
                jobs.iter().map(|j| kernel(j.w.ty(), tier)).collect();
            let mut acts: Vec<Acts> = Vec::new();
            for &(f, _) in &kernels {
                if !acts.iter().any(|a| a.format == f) {
                    acts.push(Acts::new(f, x, k));
                }
            }
            shares(&|r| int8_units(jobs, &kernels, &acts, m, r))?;
        }
        QPath::Tiles => {
            let packed = dense::pack_x(Tier::detect(), x, m, k);
            one_by_one(&|r| tile_units(jobs, &packed, k, r))?;
        }
        #[cfg(target_arch = "x86_64")]
        QPath::Amx => {
            let packed = super::amx::PackedX::new(x, m, k, threads)?;
            one_by_one(&|r| amx_units(jobs, &packed, r))?;
        }
        #[cfg(not(target_arch = "x86_64"))]
        QPath::Amx => unreachable!("no job is on_amx off x86_64"),
    }
    Ok(())
}

/// y's base pointer, shared by the workers, each writing the columns of its own rows.
#[derive(Clone, Copy)]
struct YPtr(*mut f32);

// SAFETY: the workers write disjoint columns of y (the rows of W their units cover) while
// `products_on` holds y's borrow; nobody reads y during the call.
unsafe impl Send for YPtr {}
unsafe impl Sync for YPtr {}

struct Job<'a> {
    w: &'a QuantMatrix,
    bias: Option<&'a [f32]>,
    y: YPtr,
}

/// The units (numbered across the jobs in order) of `range`, each calling `f(job index,
/// first row, rows)`.
fn for_units(
    jobs: &[Job],
    unit_rows: usize,
    range: std::ops::Range<usize>,
    mut f: impl FnMut(usize, usize, usize),
) {
    let mut first = 0;
    for (i, job) in jobs.iter().enumerate() {
        let n = job.w.rows();
        let blocks = n.div_ceil(unit_rows);
        for u in range.start.max(first)..range.end.min(first + blocks) {
            let j0 = (u - first) * unit_rows;
            f(i, j0, unit_rows.min(n - j0));
        }
        first += blocks;
    }
}

fn int8_units(
    jobs: &[Job],
    kernels: &[(ActFormat, RowDot)],
    acts: &[Acts],
    m: usize,
    range: std::ops::Range<usize>,
) {
    for_units(jobs, INT8_ROWS, range, |i, j0, r| {
        let job = &jobs[i];
        let (format, dot) = kernels[i];
        let a = acts
            .iter()
            .find(|a| a.format == format)
            .expect("quantized above");
        let (ty, n, rb) = (job.w.ty(), job.w.rows(), job.w.row_bytes());
        let rows = &job.w.bytes()[j0 * rb..(j0 + r) * rb];
        let mut out = [0.0f32; INT8_ROWS];
        for t in 0..m {
            dot(ty, rows, a.row(t), &mut out[..r]);
            for (i, &v) in out[..r].iter().enumerate() {
                let j = j0 + i;
                let v = v + job.bias.map_or(0.0, |b| b[j]);
                // SAFETY: t < m, j < n: inside y [m, n]; column j belongs to this unit.
                unsafe { *job.y.0.add(t * n + j) = v };
            }
        }
    });
}

thread_local! {
    /// A worker's dequantized tile of W, kept between calls.
    static TILE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

fn tile_units(jobs: &[Job], packed: &dense::PackedX, k: usize, range: std::ops::Range<usize>) {
    TILE.with_borrow_mut(|tile| {
        tile.resize(TILE_ROWS * k, 0.0);
        for_units(jobs, TILE_ROWS, range, |i, j0, r| {
            let job = &jobs[i];
            let buf = &mut tile[..r * k];
            job.w.dequantize_rows(j0, buf);
            let bias = job.bias.map(|b| &b[j0..j0 + r]);
            // SAFETY: columns j0..j0 + r of y [m, n] (stride n) belong to this unit.
            unsafe { dense::rows_into(packed, buf, bias, job.y.0.add(j0), job.w.rows()) };
        });
    });
}

#[cfg(target_arch = "x86_64")]
thread_local! {
    /// A worker's unpacked panel of W for the AMX path, kept between calls.
    static PANEL: RefCell<super::amx::Panel> = RefCell::new(super::amx::Panel::default());
}

#[cfg(target_arch = "x86_64")]
fn amx_units(jobs: &[Job], packed: &super::amx::PackedX, range: std::ops::Range<usize>) {
    PANEL.with_borrow_mut(|panel| {
        for_units(jobs, AMX_ROWS, range, |i, j0, r| {
            let job = &jobs[i];
            let (w, n) = (job.w, job.w.rows());
            let bias = job.bias.map(|b| &b[j0..j0 + r]);
            let rb = w.row_bytes();
            // SAFETY: jobs reach this path only when `amx::available()` (on_amx); columns
            // j0..j0 + r of y [m, n] belong to this unit.
            unsafe {
                super::amx::panel_product(
                    w.ty(),
                    &w.bytes()[j0 * rb..(j0 + r) * rb],
                    rb,
                    r,
                    packed,
                    bias,
                    job.y.0.add(j0),
                    n,
                    panel,
                )
            };
        });
    });
}

#[cfg(test)]
#[path = "qmatmul_tests.rs"]
mod tests;
