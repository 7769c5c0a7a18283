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
//! - [`QPath::Panels`]: int8 activations against W's levels unpacked 16 rows at a time
//!   ([`super::i8panel`]), many rows of x at once: on Intel's AMX tile unit
//!   ([`super::amx`]) where the CPU has it, else on AVX-512 VNNI or AVX2 vectors
//!   ([`super::i8vec`]), for every quantized type; f16, bf16 and f32 matrices go to the
//!   tiles.
//!
//! By default one row of x runs on int8 and several rows on the panels, whose types the
//! CPU cannot run there on the tiles. A forward over a text (what `model run` shows and the real-model tests
//! compare with transformers, attention within 2e-4) must be the exact product; int8
//! activations change attention weights by about 1e-3 on SmolLM2 (docs/performance.md).
//! [`exact`] puts every product of a closure on the tiles (the forward pass and the app's
//! decoding use it), so int8 activations are for `generate`: its decode steps and its
//! prefill. [`QMATMUL_ENV`] forces one path everywhere.

use std::cell::RefCell;

use super::dense;
use super::matrix::QuantMatrix;
use super::qdot::{self, ActFormat, Acts, QTier, RowDot};
use super::quant::GgmlType;
use crate::error::{Error, Result};
use crate::kernel::{Tier, team};

/// Environment variable forcing the path of every quantized product: `int8` or `f32`
/// (dequantized tiles, exact); unset or `auto`: int8 for one row, the panels for more.
pub const QMATMUL_ENV: &str = "ATTNVIZ_QMATMUL";

/// Rows of W dequantized at a time on the tile path: a multiple of the f32 kernel's
/// register block (6 rows); 48 rows of k = 1536 are 288 KB, well inside L2.
pub const TILE_ROWS: usize = 48;

/// Rows of W per work unit on the int8 path.
const INT8_ROWS: usize = 16;

/// Rows of W per work unit on the panel path: one panel.
const PANEL_ROWS: usize = super::i8panel::TILE;

/// Below this many weights (summed over a call's products) a call stays on one thread.
const PAR_MIN: usize = 1 << 16;

/// How a call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QPath {
    Int8,
    Tiles,
    /// Int8 activations against unpacked panels of W: on the AMX tile unit for the types
    /// it takes, else on the vectors of the integer tier for the types they take, the
    /// others on [`QPath::Tiles`].
    Panels,
    /// [`QPath::Panels`] without the tile unit (tests cover the vector kernels with it).
    VecPanels,
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
                None => QPath::Panels,
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

#[cfg(test)]
fn amx_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::amx::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether [`QPath::Panels`] runs W of type `ty` on the tile unit on this machine.
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
    match path {
        QPath::Int8 => run(Kernel::Int8(tier), x, m, k, &jobs, threads, None),
        QPath::Tiles => run(Kernel::Tiles, x, m, k, &jobs, threads, None),
        QPath::Panels | QPath::VecPanels => {
            let amx = path == QPath::Panels;
            let mut by_kernel: Vec<(Kernel, Vec<Job>)> = Vec::new();
            for job in jobs {
                let kernel = panel_kernel(job.w.ty(), tier, amx);
                match by_kernel.iter_mut().find(|(kn, _)| *kn == kernel) {
                    Some((_, js)) => js.push(job),
                    None => by_kernel.push((kernel, vec![job])),
                }
            }
            let packed = packed_x(&by_kernel, x, m, k, threads)?;
            for (kernel, js) in &by_kernel {
                run(*kernel, x, m, k, js, threads, packed.as_ref())?;
            }
            Ok(())
        }
    }
}

/// What runs the units of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    Int8(QTier),
    Tiles,
    #[cfg(target_arch = "x86_64")]
    Amx,
    #[cfg(target_arch = "x86_64")]
    Vec(super::i8vec::VecTier),
}

/// The kernel of [`QPath::Panels`] (or, without `amx`, [`QPath::VecPanels`]) for W of type
/// `ty` on integer tier `tier`: the tile unit, else the tier's vectors, else the tiles.
fn panel_kernel(ty: GgmlType, tier: QTier, amx: bool) -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        use super::i8vec::{VecTier, supports};
        if amx && on_amx(ty) {
            return Kernel::Amx;
        }
        if let Some(vt) = VecTier::for_tier(tier)
            && tier.is_available()
            && supports(ty)
        {
            return Kernel::Vec(vt);
        }
    }
    let _ = (ty, tier, amx);
    Kernel::Tiles
}

#[cfg(target_arch = "x86_64")]
type PackedI8 = super::i8panel::PackedX;
#[cfg(not(target_arch = "x86_64"))]
type PackedI8 = ();

/// x quantized and packed once for the panel kernels, if any job needs it.
fn packed_x(
    by_kernel: &[(Kernel, Vec<Job>)],
    x: &[f32],
    m: usize,
    k: usize,
    threads: usize,
) -> Result<Option<PackedI8>> {
    #[cfg(target_arch = "x86_64")]
    {
        // The most parts any panel job's type has (none: no job runs on the panels).
        let parts = by_kernel
            .iter()
            .filter(|(kn, _)| matches!(kn, Kernel::Amx | Kernel::Vec(_)))
            .flat_map(|(_, js)| js)
            .filter_map(|j| super::i8panel::kind(j.w.ty()))
            .map(|kd| kd.parts)
            .max();
        if let Some(parts) = parts {
            return super::i8panel::PackedX::new(x, m, k, threads, parts > 1).map(Some);
        }
    }
    let _ = (by_kernel, x, m, k, threads);
    Ok(None)
}

/// The jobs of one call on one kernel, split over up to `threads` workers by units of
/// rows; `packed` is x for the panel kernels.
fn run(
    kernel: Kernel,
    x: &[f32],
    m: usize,
    k: usize,
    jobs: &[Job],
    threads: usize,
    packed: Option<&PackedI8>,
) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let unit_rows = match kernel {
        Kernel::Int8(_) => INT8_ROWS,
        Kernel::Tiles => TILE_ROWS,
        #[cfg(target_arch = "x86_64")]
        Kernel::Amx | Kernel::Vec(_) => PANEL_ROWS,
    };
    let units: usize = jobs.iter().map(|j| j.w.rows().div_ceil(unit_rows)).sum();
    let weights: usize = jobs.iter().map(|j| j.w.rows() * k).sum();
    let threads = if weights < PAR_MIN {
        1
    } else {
        threads.clamp(1, units)
    };
    // Int8 units are equal and tiny (16 rows of one dot each): fixed shares. Tile and
    // panel units are many microseconds each: handed out as threads come free.
    let range = |t: usize| units * t / threads..units * (t + 1) / threads;
    let shares =
        |run: &(dyn Fn(std::ops::Range<usize>) + Sync)| team::fork(threads, &|t| run(range(t)));
    let one_by_one = |run: &(dyn Fn(std::ops::Range<usize>) + Sync)| {
        team::for_each(threads, units, &|u| run(u..u + 1))
    };
    match kernel {
        Kernel::Int8(tier) => {
            // One quantization of x per activation format the products need.
            let kernels: Vec<(ActFormat, RowDot)> =
                jobs.iter().map(|j| qdot::kernel(j.w.ty(), tier)).collect();
            let mut acts: Vec<Acts> = Vec::new();
            for &(f, _) in &kernels {
                if !acts.iter().any(|a| a.format == f) {
                    acts.push(Acts::new(f, x, k));
                }
            }
            shares(&|r| int8_units(jobs, &kernels, &acts, m, r))?;
        }
        Kernel::Tiles => {
            let packed = dense::pack_x(Tier::detect(), x, m, k);
            one_by_one(&|r| tile_units(jobs, &packed, k, r))?;
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Amx | Kernel::Vec(_) => {
            let packed = packed.ok_or_else(|| {
                Error::Internal("quantized product: the panel kernels need x packed".into())
            })?;
            one_by_one(&|r| panel_units(kernel, jobs, packed, r))?;
        }
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
    /// A worker's unpacked panel of W for the panel kernels, kept between calls.
    static PANEL: RefCell<super::i8panel::Panel> = RefCell::new(Default::default());
}

#[cfg(target_arch = "x86_64")]
fn panel_units(
    kernel: Kernel,
    jobs: &[Job],
    packed: &super::i8panel::PackedX,
    range: std::ops::Range<usize>,
) {
    PANEL.with_borrow_mut(|panel| {
        for_units(jobs, PANEL_ROWS, range, |i, j0, r| {
            let job = &jobs[i];
            let (w, n) = (job.w, job.w.rows());
            let bias = job.bias.map(|b| &b[j0..j0 + r]);
            let rb = w.row_bytes();
            let rows = &w.bytes()[j0 * rb..(j0 + r) * rb];
            let y = job.y.0.wrapping_add(j0);
            // SAFETY: jobs reach a panel kernel only when `panel_kernel` found it available
            // for their type; columns j0..j0 + r of y [m, n] belong to this unit.
            unsafe {
                match kernel {
                    Kernel::Amx => {
                        super::amx::panel_product(w.ty(), rows, rb, r, packed, bias, y, n, panel)
                    }
                    Kernel::Vec(vt) => super::i8vec::panel_product(
                        vt,
                        w.ty(),
                        rows,
                        rb,
                        r,
                        packed,
                        bias,
                        y,
                        n,
                        panel,
                    ),
                    _ => unreachable!("panel_units runs the panel kernels only"),
                }
            };
        });
    });
}

#[cfg(test)]
#[path = "qmatmul_tests.rs"]
mod tests;
