//! `attnviz trace`: FlashAttention's block events as JSON (schema in DESIGN.md), from the
//! kernel's instrumented run on generated inputs or on one head's .npy tensors; with
//! `--backward`, the backward pass's tiles (key blocks outer) and the gradients.

use std::path::Path;

use ndarray::{Array2, Dimension};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::cli::{self, TraceArgs};
use crate::engine::flash::{self, FlashTrace, LoopOrder, TraceOptions};
use crate::engine::flash_backward::{self, BackwardTrace};
use crate::engine::mask::Mask;
use crate::engine::npy;
use crate::engine::problem::AttnSpec;
use crate::error::{Error, Result};

/// Refuse traces whose JSON would hold more numbers than this (about 0.5 GB of text):
/// every event repeats its block's outputs.
const MAX_TRACE_VALUES: usize = 25_000_000;

pub fn run(args: &TraceArgs) -> Result<()> {
    if args.backward {
        let trace = compute_backward(args)?;
        let text = serde_json::to_string(&backward_json(&trace))
            .map_err(|e| Error::Internal(format!("cannot write trace JSON: {e}")))?;
        println!("{text}");
        return Ok(());
    }
    let trace = compute(args)?;
    let text = serde_json::to_string(&to_json(&trace))
        .map_err(|e| Error::Internal(format!("cannot write trace JSON: {e}")))?;
    crate::output::println(&text)
}

/// The trace `args` ask for.
pub fn compute(args: &TraceArgs) -> Result<FlashTrace> {
    let (q, k, v, scale) = inputs(args)?;
    let (n_q, n_k) = (q.nrows(), k.nrows());
    let tiles = n_q.div_ceil(args.br) * n_k.div_ceil(args.bc);
    let values = tiles * args.br.min(n_q) * (v.ncols() + 3);
    if values > MAX_TRACE_VALUES {
        return Err(Error::usage(format!(
            "a trace of {n_q} x {n_k} with --br {} --bc {} has {tiles} tile events ({values} numbers); use larger blocks or shorter inputs",
            args.br, args.bc
        )));
    }
    let mask = Mask::resolve(&args.mask, 1, 1, n_q, n_k)?;
    let spec = AttnSpec {
        mask,
        alibi: None,
        scale,
    };
    let loop_order = match args.loop_order {
        cli::LoopOrder::Fa1 => LoopOrder::Fa1,
        cli::LoopOrder::Fa2 => LoopOrder::Fa2,
    };
    let opts = TraceOptions {
        br: args.br,
        bc: args.bc,
        loop_order,
        tier: None,
    };
    flash::trace(q.view(), k.view(), v.view(), &spec, opts)
}

type Head3 = (Array2<f32>, Array2<f32>, Array2<f32>, f64);

/// Q, K, V (read or generated) and the scale of a trace, checked.
fn inputs(args: &TraceArgs) -> Result<Head3> {
    if args.br == 0 || args.bc == 0 {
        return Err(Error::usage(format!(
            "--br and --bc must be at least 1 (got --br {} --bc {})",
            args.br, args.bc
        )));
    }
    let (q, k, v) = match (&args.q, &args.k, &args.v) {
        (Some(q), Some(k), Some(v)) => {
            if args.n.is_some() || args.nk.is_some() {
                return Err(Error::usage(
                    "--n and --nk size generated inputs; with --q/--k/--v the sizes come from the files",
                ));
            }
            (read_head(q, "Q")?, read_head(k, "K")?, read_head(v, "V")?)
        }
        (None, None, None) => generated(args)?,
        _ => {
            return Err(Error::usage(
                "give all of --q, --k and --v, or none of them",
            ));
        }
    };
    let scale = match args.scale {
        Some(s) if !s.is_finite() || s == 0.0 => {
            return Err(Error::usage(format!(
                "--scale {s} must be a finite, non-zero number"
            )));
        }
        Some(s) => s,
        None => 1.0 / (q.ncols() as f64).sqrt(),
    };
    Ok((q, k, v, scale))
}

fn generated(args: &TraceArgs) -> Result<(Array2<f32>, Array2<f32>, Array2<f32>)> {
    let n = args
        .n
        .ok_or_else(|| Error::usage("give --n (or --q/--k/--v files)"))?;
    let nk = args.nk.unwrap_or(n);
    if n == 0 || nk == 0 || args.d == 0 {
        return Err(Error::usage(format!(
            "--n, --nk and --d must be at least 1 (got {n}, {nk}, {})",
            args.d
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut fill =
        |rows: usize| Array2::from_shape_fn((rows, args.d), |_| rng.random_range(-1.0f32..1.0));
    let q = fill(n);
    let k = fill(nk);
    let v = fill(nk);
    Ok((q, k, v))
}

/// One head's tensor [N, d] from a .npy file.
fn read_head(path: &Path, name: &str) -> Result<Array2<f32>> {
    let a = npy::read_f64(path)?;
    let shape = a.shape().to_vec();
    if shape.len() != 2 {
        return Err(Error::file(
            path,
            format!("{name} has shape {shape:?}; trace takes one head, shaped [N, d]"),
        ));
    }
    if a.iter().any(|x| !x.is_finite()) {
        return Err(Error::file(
            path,
            format!("{name} holds NaN or infinite values"),
        ));
    }
    // The trace shows the kernel's own f32 state, so its inputs must be f32 numbers.
    if let Some((index, x)) = a.indexed_iter().find(|(_, x)| !(**x as f32).is_finite()) {
        return Err(Error::file(
            path,
            format!(
                "{name} holds {x:e} at index {:?}, beyond the float32 range (±{:e}) the kernel traces in; scale the tensor into that range",
                index.slice(),
                f32::MAX
            ),
        ));
    }
    let a = a
        .into_dimensionality::<ndarray::Ix2>()
        .map_err(|e| Error::Internal(e.to_string()))?;
    Ok(a.mapv(|x| x as f32))
}

#[derive(Serialize)]
struct TraceJson<'a> {
    n_q: usize,
    n_k: usize,
    d: usize,
    dv: usize,
    br: usize,
    bc: usize,
    #[serde(rename = "loop")]
    loop_order: &'static str,
    scale: f64,
    simd: String,
    events: Vec<EventJson<'a>>,
    out: &'a [Vec<f64>],
    lse: Vec<Option<f64>>,
}

#[derive(Serialize)]
struct EventJson<'a> {
    q_block: usize,
    k_block: usize,
    skipped: bool,
    rows: [usize; 2],
    m: Vec<Option<f64>>,
    l: &'a [f64],
    alpha: &'a [f64],
    o: &'a [Vec<f64>],
}

/// -inf (a row that has seen no unmasked key) is written as null.
fn finite_or_null(xs: &[f64]) -> Vec<Option<f64>> {
    xs.iter().map(|&x| x.is_finite().then_some(x)).collect()
}

fn to_json(t: &FlashTrace) -> TraceJson<'_> {
    TraceJson {
        n_q: t.n_q,
        n_k: t.n_k,
        d: t.d,
        dv: t.dv,
        br: t.br,
        bc: t.bc,
        loop_order: match t.loop_order {
            LoopOrder::Fa1 => "fa1",
            LoopOrder::Fa2 => "fa2",
        },
        scale: t.scale,
        simd: t.tier.to_string(),
        events: t
            .events
            .iter()
            .map(|e| EventJson {
                q_block: e.q_block,
                k_block: e.k_block,
                skipped: e.skipped,
                rows: [e.rows.start, e.rows.end],
                m: finite_or_null(&e.m),
                l: &e.l,
                alpha: &e.alpha,
                o: &e.o,
            })
            .collect(),
        out: &t.out,
        lse: finite_or_null(&t.lse),
    }
}

/// The backward trace `args` ask for: the same inputs as the forward trace, dO from
/// `--grad-out` or generated from the seed.
pub fn compute_backward(args: &TraceArgs) -> Result<BackwardTrace> {
    if args.loop_order != cli::LoopOrder::Fa2 {
        return Err(Error::usage(
            "--loop applies to the forward; the backward runs key blocks outer (FlashAttention-2's backward)",
        ));
    }
    let (q, k, v, scale) = inputs(args)?;
    let (n_q, n_k, d, dv) = (q.nrows(), k.nrows(), q.ncols(), v.ncols());
    if (k.ncols(), v.nrows()) != (d, n_k) {
        return Err(Error::usage(format!(
            "Q is [{n_q}, {d}], K [{}, {}] and V [{}, {dv}]: K needs Q's d and V K's length",
            k.nrows(),
            k.ncols(),
            v.nrows()
        )));
    }
    let tiles = n_q.div_ceil(args.br) * n_k.div_ceil(args.bc);
    let per_tile = args.br.min(n_q) * (d + 2 * args.bc.min(n_k)) + args.bc.min(n_k) * (d + dv);
    if tiles * per_tile > MAX_TRACE_VALUES {
        return Err(Error::usage(format!(
            "a backward trace of {n_q} x {n_k} with --br {} --bc {} has {tiles} tile events ({} numbers); use larger blocks or shorter inputs",
            args.br,
            args.bc,
            tiles * per_tile
        )));
    }
    let dout = match &args.grad_out {
        Some(path) => {
            let g = read_head(path, "dO")?;
            if g.dim() != (n_q, dv) {
                return Err(Error::file(
                    path,
                    format!(
                        "--grad-out has shape {:?}; dO must be shaped like the output O, [{n_q}, {dv}]",
                        g.dim()
                    ),
                ));
            }
            g
        }
        None => flash_backward::seeded_grad_out(n_q, dv, args.seed),
    };
    let spec = AttnSpec {
        mask: Mask::resolve(&args.mask, 1, 1, n_q, n_k)?,
        alibi: None,
        scale,
    };
    flash_backward::trace_backward(
        q.view(),
        k.view(),
        v.view(),
        dout.view(),
        &spec,
        args.br,
        args.bc,
        None,
    )
}

#[derive(Serialize)]
struct BackwardJson<'a> {
    pass: &'static str,
    n_q: usize,
    n_k: usize,
    d: usize,
    d_v: usize,
    br: usize,
    bc: usize,
    #[serde(rename = "loop")]
    loop_order: &'static str,
    scale: f64,
    simd: String,
    events: Vec<BackwardEventJson<'a>>,
    dq: &'a [Vec<f64>],
    dk: &'a [Vec<f64>],
    /// The gradient dV (the contract's `dv`); V's head dimension is `d_v` here.
    dv: &'a [Vec<f64>],
    #[serde(rename = "D")]
    d_rows: &'a [f64],
    out: &'a [Vec<f64>],
    lse: Vec<Option<f64>>,
}

#[derive(Serialize)]
struct BackwardEventJson<'a> {
    q_block: usize,
    k_block: usize,
    skipped: bool,
    rows: [usize; 2],
    cols: [usize; 2],
    dq: &'a [Vec<f64>],
    dk: &'a [Vec<f64>],
    dv: &'a [Vec<f64>],
    p: Option<&'a [Vec<f64>]>,
    ds: Option<&'a [Vec<f64>]>,
}

fn backward_json(t: &BackwardTrace) -> BackwardJson<'_> {
    BackwardJson {
        pass: "backward",
        n_q: t.n_q,
        n_k: t.n_k,
        d: t.d,
        d_v: t.d_v,
        br: t.br,
        bc: t.bc,
        loop_order: "kv-outer",
        scale: t.scale,
        simd: t.tier.to_string(),
        events: t
            .events
            .iter()
            .map(|e| BackwardEventJson {
                q_block: e.q_block,
                k_block: e.k_block,
                skipped: e.skipped,
                rows: [e.rows.start, e.rows.end],
                cols: [e.cols.start, e.cols.end],
                dq: &e.dq,
                dk: &e.dk,
                dv: &e.dv,
                p: e.p.as_deref(),
                ds: e.ds.as_deref(),
            })
            .collect(),
        dq: &t.dq,
        dk: &t.dk,
        dv: &t.dv,
        d_rows: &t.d_rows,
        out: &t.out,
        lse: finite_or_null(&t.lse),
    }
}
