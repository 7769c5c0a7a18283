//! `attnviz compute`: attention on .npy tensors, no terminal.
//!
//! Q, K, V are read and checked, RoPE (if asked) rotates q and k in f64, then one
//! path computes softmax(scale * Q K^T + ALiBi + mask) V. The output O is written in
//! Q's rank and dtype with V's last dimension; `--lse` is shaped like Q without its last
//! axis, -inf for a row with no visible key. The reference and naive paths run on one
//! thread; `--threads` sets the flash kernel's worker threads.
//!
//! With `--grad-out dO.npy` and `--dq/--dk/--dv` it also runs the backward pass: the
//! gradients of sum(O * dO) by the f64 reference or the flash kernel's backward, dQ and
//! dK taken back through RoPE, each written in the rank and dtype of Q, K or V.

use std::path::{Path, PathBuf};

use ndarray::{Array4, ArrayView4, Axis};

use crate::attn::range::PathKind;
use crate::cli::{ComputeArgs, KernelChoice};
use crate::engine::config::MaskKind;
use crate::engine::limits;
use crate::engine::mask::Mask;
use crate::engine::problem::{AttnSpec, ProblemShape};
use crate::engine::tensors::{self, Qkv};
use crate::engine::{fit_f32, naive, pe, reference, reference_backward};
use crate::error::{Error, Result};
use crate::kernel;
use crate::output::{self, OutFile};

/// The paths that can run in this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Reference,
    Naive,
    Flash,
}

/// Below this many scores per head (a 128 x 128 tile, 64 KiB in f32) `auto` takes the
/// naive path: its whole matrix fits in L2 and the tiled kernel's per-tile work cannot
/// pay off. Above it, `auto` takes the flash kernel, which never holds the matrix.
pub const AUTO_NAIVE_MAX_SCORES: u64 = 128 * 128;

/// The path that runs for a `--kernel` choice; `auto` chooses by the size of one
/// head's score matrix.
pub fn choose_kernel(choice: KernelChoice, shape: &ProblemShape) -> Kernel {
    match choice {
        KernelChoice::Reference => Kernel::Reference,
        KernelChoice::Naive => Kernel::Naive,
        KernelChoice::Flash => Kernel::Flash,
        KernelChoice::Auto if (shape.n_q as u64) * (shape.n_k as u64) <= AUTO_NAIVE_MAX_SCORES => {
            Kernel::Naive
        }
        KernelChoice::Auto => Kernel::Flash,
    }
}

/// Refuse problems a path cannot run in reasonable time or memory.
pub fn check_size(kernel: Kernel, shape: &ProblemShape) -> Result<()> {
    let dims = format!(
        "B={} H={} Nq={} Nk={} d={} dv={}",
        shape.batch, shape.heads, shape.n_q, shape.n_k, shape.d, shape.dv
    );
    match kernel {
        Kernel::Reference => {
            let macs = [
                shape.batch,
                shape.heads,
                shape.n_q,
                shape.n_k,
                shape.d + shape.dv,
            ]
            .iter()
            .try_fold(1u64, |acc, &x| acc.checked_mul(x as u64));
            match macs {
                Some(m) if m <= limits::MAX_REFERENCE_MACS => Ok(()),
                _ => Err(Error::usage(format!(
                    "--kernel reference: {dims} needs B*H*Nq*Nk*(d+dv) = {} multiply-adds, over the limit of {} (MAX_REFERENCE_MACS) for the plain f64 loops; use --kernel naive or --kernel flash",
                    macs.map_or("more than 2^64".to_string(), |m| m.to_string()),
                    limits::MAX_REFERENCE_MACS
                ))),
            }
        }
        Kernel::Flash => Ok(()),
        Kernel::Naive => {
            let bytes = naive::score_bytes(shape);
            if bytes <= limits::MAX_NAIVE_SCORE_BYTES {
                Ok(())
            } else {
                Err(Error::usage(format!(
                    "--kernel naive materialises Nq x Nk = {} x {} f32 scores per head ({} MiB, {dims}), over the limit of {} MiB (MAX_NAIVE_SCORE_BYTES); use --kernel flash, which never holds the score matrix",
                    shape.n_q,
                    shape.n_k,
                    bytes >> 20,
                    limits::MAX_NAIVE_SCORE_BYTES >> 20
                )))
            }
        }
    }
}

/// Rotate q [B,H,Nq,d] and k [B,G,Nk,d] by RoPE; queries stand at i + Nk - Nq.
pub fn apply_rope(q: &mut Array4<f64>, k: &mut Array4<f64>, base: f64) {
    let first_q = k.dim().2 as f64 - q.dim().2 as f64;
    for mut b in q.axis_iter_mut(Axis(0)) {
        for h in b.axis_iter_mut(Axis(0)) {
            pe::rope_rows(h, first_q, base);
        }
    }
    for mut b in k.axis_iter_mut(Axis(0)) {
        for g in b.axis_iter_mut(Axis(0)) {
            pe::rope_rows(g, 0.0, base);
        }
    }
}

fn check_options(args: &ComputeArgs, shape: &ProblemShape) -> Result<()> {
    if let Some(t) = args.threads
        && !(1..=limits::max_threads()).contains(&t)
    {
        return Err(Error::usage(format!(
            "--threads {t}: give between 1 and {} (MAX_THREADS: {} per core here)",
            limits::max_threads(),
            limits::THREADS_PER_CORE
        )));
    }
    if let Some(s) = args.scale
        && !s.is_finite()
    {
        return Err(Error::usage(format!(
            "--scale {s}: the scale must be a finite number, e.g. --scale 0.125"
        )));
    }
    if let Some(base) = args.rope {
        if !(base.is_finite() && base > 1.0) {
            return Err(Error::usage(format!(
                "--rope={base}: the RoPE base must be a number above 1, e.g. --rope=10000"
            )));
        }
        if !shape.d.is_multiple_of(2) {
            return Err(Error::usage(format!(
                "--rope rotates pairs of dimensions, but Q and K have d = {} (odd); RoPE needs an even d",
                shape.d
            )));
        }
    }
    if let Some(lse) = &args.lse
        && output::future_path(lse) == output::future_path(&args.out)
    {
        return Err(Error::usage(format!(
            "--out and --lse name the same file {}; give two different paths",
            args.out.display()
        )));
    }
    Ok(())
}

/// Refuse an output that is one of the inputs (Q, K, V, the `file:` mask), through a
/// symlink or a hard link too, before anything is read or written.
fn check_outputs(args: &ComputeArgs) -> Result<()> {
    let mut inputs: Vec<(&str, &std::path::Path)> =
        vec![("--q", &args.q), ("--k", &args.k), ("--v", &args.v)];
    if let MaskKind::File(path) = &args.mask {
        inputs.push(("--mask file:", path));
    }
    output::refuse_overwrite("--out", &args.out, &inputs)?;
    if let Some(lse) = &args.lse {
        output::refuse_overwrite("--lse", lse, &inputs)?;
        output::refuse_overwrite("--lse", lse, &[("--out", &args.out)])?;
    }
    Ok(())
}

/// O [B,H,Nq,dv] and lse [B,H,Nq] by `kernel`, as f64. Every path first checks that
/// the numbers of this problem fit it (`attn::range`): the f32 paths take f64 inputs
/// through [`fit_f32::fit`], exactly, and refuse scores that would overflow f32.
pub fn attend(
    kernel: Kernel,
    shape: &ProblemShape,
    q: ArrayView4<f64>,
    k: ArrayView4<f64>,
    v: ArrayView4<f64>,
    spec: &AttnSpec,
    threads: Option<usize>,
) -> Result<(Array4<f64>, ndarray::Array3<f64>)> {
    match kernel {
        Kernel::Reference => {
            fit_f32::check_reference(shape, q, k, v, spec)?;
            let o = reference::attention(shape, q, k, v, spec);
            Ok((o.out, o.lse))
        }
        Kernel::Naive => {
            let p = fit_f32::fit(PathKind::Naive, shape, q, k, v, spec)?;
            let o = naive::attention(shape, p.q.view(), p.k.view(), p.v.view(), &p.spec)?;
            Ok((o.out.mapv(|x| p.output(x)), o.lse.mapv(f64::from)))
        }
        Kernel::Flash => {
            let p = fit_f32::fit(PathKind::Flash, shape, q, k, v, spec)?;
            // The kernel takes row-major slices: borrowed when the array is laid out that
            // way (as `fit` makes it), copied otherwise.
            fn flat(a: &Array4<f32>) -> std::borrow::Cow<'_, [f32]> {
                match a.as_slice() {
                    Some(s) => std::borrow::Cow::Borrowed(s),
                    None => std::borrow::Cow::Owned(a.iter().copied().collect()),
                }
            }
            let opts = kernel::KernelOptions {
                threads,
                ..Default::default()
            };
            let o =
                kernel::attention(shape, &flat(&p.q), &flat(&p.k), &flat(&p.v), &p.spec, &opts)?;
            let output = p.into_output();
            let dims = (shape.batch, shape.heads, shape.n_q);
            let out = Array4::from_shape_vec((dims.0, dims.1, dims.2, shape.dv), o.out)
                .map_err(|e| Error::Internal(format!("kernel output shape: {e}")))?;
            let lse = ndarray::Array3::from_shape_vec(dims, o.lse)
                .map_err(|e| Error::Internal(format!("kernel lse shape: {e}")))?;
            Ok((out.mapv(output), lse.mapv(f64::from)))
        }
    }
}

/// `auto`'s path for these numbers: the f32 path it chose by size if the numbers fit f32
/// (see `attn::range`), else the f64 reference path when that is within its size limit,
/// so that `auto` gives the right answer for any finite input it can.
fn auto_for_range(
    kernel: Kernel,
    shape: &ProblemShape,
    q: ArrayView4<f64>,
    k: ArrayView4<f64>,
    v: ArrayView4<f64>,
    spec: &AttnSpec,
) -> Kernel {
    let path = match kernel {
        Kernel::Reference => return kernel,
        Kernel::Naive => PathKind::Naive,
        Kernel::Flash => PathKind::Flash,
    };
    let fits = fit_f32::fit(path, shape, q, k, v, spec).is_ok();
    if fits || check_size(Kernel::Reference, shape).is_err() {
        kernel
    } else {
        Kernel::Reference
    }
}

pub fn run(args: &ComputeArgs) -> Result<()> {
    check_outputs(args)?;
    let Qkv {
        mut q,
        mut k,
        v,
        shape,
    } = tensors::load_qkv(&args.q, &args.k, &args.v)?;
    check_options(args, &shape)?;
    let grads = grad_request(args, &q, &shape)?;
    let kernel = match &grads {
        Some(_) => backward_kernel(args.kernel)?,
        None => choose_kernel(args.kernel, &shape),
    };
    check_size(kernel, &shape)?;
    if grads.is_some() {
        check_backward_size(kernel, &shape)?;
    }
    let mask = Mask::resolve(&args.mask, shape.batch, shape.heads, shape.n_q, shape.n_k)?;
    // Both outputs are created before the work and before either is written, and renamed
    // into place only once both are written: a --lse that cannot be created leaves no
    // fresh --out (and an error on the way removes both).
    let out_file = OutFile::create(&args.out)?;
    let lse_file = args.lse.as_deref().map(OutFile::create).transpose()?;
    // The gradients too: every output is written, or none is.
    let mut grad_files = Vec::new();
    if let Some(req) = &grads {
        for path in [&req.dq, &req.dk, &req.dv].into_iter().flatten() {
            grad_files.push(OutFile::create(path)?);
        }
    }
    let spec = AttnSpec::new(&shape, mask, args.alibi, args.scale);
    if let Some(base) = args.rope {
        apply_rope(&mut q.data, &mut k.data, base);
    }
    let kernel = if args.kernel == KernelChoice::Auto {
        auto_for_range(
            kernel,
            &shape,
            q.data.view(),
            k.data.view(),
            v.data.view(),
            &spec,
        )
    } else {
        kernel
    };
    let (out, lse) = attend(
        kernel,
        &shape,
        q.data.view(),
        k.data.view(),
        v.data.view(),
        &spec,
        args.threads,
    )?;
    if let Some(req) = grads {
        let mut g = gradients(
            kernel,
            &shape,
            Forward {
                q: q.data.view(),
                k: k.data.view(),
                v: v.data.view(),
                out: out.view(),
                lse: lse.view(),
            },
            req.dout.data.view(),
            &spec,
            args.threads,
        )?;
        if let Some(base) = args.rope {
            reference_backward::rope_backward(&mut g.dq, &mut g.dk, base);
        }
        let mut files = grad_files.iter();
        for (path, grad, like) in [
            (&req.dq, g.dq, &q),
            (&req.dk, g.dk, &k),
            (&req.dv, g.dv, &v),
        ] {
            if let (Some(path), Some(file)) = (path, files.next()) {
                file.write(&tensors::encode_like(path, grad, like)?)?;
            }
        }
    }
    out_file.write(&tensors::encode_like(&args.out, out, &q)?)?;
    if let (Some(file), Some(path)) = (&lse_file, &args.lse) {
        file.write(&tensors::encode_rows_like(path, lse, &q)?)?;
    }
    out_file.commit()?;
    if let Some(file) = lse_file {
        file.commit()?;
    }
    for file in grad_files {
        file.commit()?;
    }
    Ok(())
}

/// The backward pass a `compute` run asks for: dO, read and checked, and where each
/// gradient goes.
pub struct GradRequest {
    pub dout: tensors::Tensor,
    pub dq: Option<PathBuf>,
    pub dk: Option<PathBuf>,
    pub dv: Option<PathBuf>,
}

/// Check the gradient flags and read dO; None if no gradient is asked for.
fn grad_request(
    args: &ComputeArgs,
    q: &tensors::Tensor,
    shape: &ProblemShape,
) -> Result<Option<GradRequest>> {
    let outputs = [("--dq", &args.dq), ("--dk", &args.dk), ("--dv", &args.dv)];
    let Some(grad_out) = &args.grad_out else {
        if let Some((flag, _)) = outputs.iter().find(|(_, p)| p.is_some()) {
            return Err(Error::usage(format!(
                "{flag} needs --grad-out dO.npy: the gradients are those of sum(O * dO), so give dO (shaped like the output O)"
            )));
        }
        return Ok(None);
    };
    if outputs.iter().all(|(_, p)| p.is_none()) {
        return Err(Error::usage(
            "--grad-out is given but no gradient is asked for; add --dq, --dk and/or --dv with the files to write",
        ));
    }
    // No output may overwrite an input or another output.
    let mut named: Vec<(&str, &Path)> = vec![
        ("--q", &args.q),
        ("--k", &args.k),
        ("--v", &args.v),
        ("--grad-out", grad_out),
        ("--out", &args.out),
    ];
    if let Some(lse) = &args.lse {
        named.push(("--lse", lse));
    }
    for (flag, path) in outputs {
        let Some(path) = path else { continue };
        if let Some((other, _)) = named.iter().find(|(_, p)| *p == path.as_path()) {
            return Err(Error::usage(format!(
                "{flag} and {other} name the same file {}; give every output its own path",
                path.display()
            )));
        }
        named.push((flag, path));
    }
    let dout = tensors::load(grad_out, "--grad-out")?;
    let want = [shape.batch, shape.heads, shape.n_q, shape.dv];
    if dout.dims() != want || dout.rank != q.rank {
        return Err(Error::file(
            grad_out,
            format!(
                "--grad-out has shape {:?} (rank {}) but dO must be shaped like the output O: rank {} with shape {:?} (Q's leading axes, V's last)",
                &dout.dims()[4 - dout.rank..],
                dout.rank,
                q.rank,
                &want[4 - q.rank..]
            ),
        ));
    }
    Ok(Some(GradRequest {
        dout,
        dq: args.dq.clone(),
        dk: args.dk.clone(),
        dv: args.dv.clone(),
    }))
}

/// The path of a run with gradients: the f64 reference, or the flash kernel (also for
/// `auto`, whatever the size: only those two have a backward).
pub fn backward_kernel(choice: KernelChoice) -> Result<Kernel> {
    match choice {
        KernelChoice::Reference => Ok(Kernel::Reference),
        KernelChoice::Flash | KernelChoice::Auto => Ok(Kernel::Flash),
        KernelChoice::Naive => Err(Error::usage(
            "--kernel naive has no backward pass; with --grad-out use --kernel flash or --kernel reference",
        )),
    }
}

/// The reference backward is about 2.5x the forward's work: refuse it past the same
/// budget of f64 multiply-adds.
fn check_backward_size(kernel: Kernel, shape: &ProblemShape) -> Result<()> {
    if kernel != Kernel::Reference {
        return Ok(());
    }
    let macs = [
        shape.batch,
        shape.heads,
        shape.n_q,
        shape.n_k,
        2 * shape.d + 3 * shape.dv,
    ]
    .iter()
    .try_fold(1u64, |acc, &x| acc.checked_mul(x as u64));
    match macs {
        Some(m) if m <= limits::MAX_REFERENCE_MACS => Ok(()),
        _ => Err(Error::usage(format!(
            "--kernel reference with --grad-out: B*H*Nq*Nk*(2d+3dv) = {} f64 multiply-adds is over the limit of {} (MAX_REFERENCE_MACS); use --kernel flash",
            macs.map_or("more than 2^64".to_string(), |m| m.to_string()),
            limits::MAX_REFERENCE_MACS
        ))),
    }
}

/// What the backward reads of the forward: its inputs (after RoPE) and results.
pub struct Forward<'a> {
    pub q: ArrayView4<'a, f64>,
    pub k: ArrayView4<'a, f64>,
    pub v: ArrayView4<'a, f64>,
    pub out: ArrayView4<'a, f64>,
    pub lse: ndarray::ArrayView3<'a, f64>,
}

/// dQ, dK, dV (with respect to q and k as given, i.e. after RoPE) and D by `kernel`.
pub fn gradients(
    kernel: Kernel,
    shape: &ProblemShape,
    fwd: Forward<'_>,
    dout: ArrayView4<f64>,
    spec: &AttnSpec,
    threads: Option<usize>,
) -> Result<reference_backward::Grads> {
    match kernel {
        Kernel::Reference => Ok(reference_backward::attention_backward(
            shape, fwd.q, fwd.k, fwd.v, dout, spec,
        )),
        Kernel::Naive => Err(Error::usage(
            "--kernel naive has no backward pass; use --kernel flash or --kernel reference",
        )),
        Kernel::Flash => {
            let f = |a: ndarray::ArrayViewD<f64>| a.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            let (q, k, v) = (
                f(fwd.q.into_dyn()),
                f(fwd.k.into_dyn()),
                f(fwd.v.into_dyn()),
            );
            let (out, lse, g) = (
                f(fwd.out.into_dyn()),
                f(fwd.lse.into_dyn()),
                f(dout.into_dyn()),
            );
            let opts = kernel::KernelOptions {
                threads,
                ..Default::default()
            };
            let inp = kernel::BackwardInputs {
                q: &q,
                k: &k,
                v: &v,
                out: &out,
                lse: &lse,
                dout: &g,
            };
            let r = kernel::attention_backward(shape, &inp, spec, &opts)?;
            drop((q, k, v, out, lse, g));
            let s = shape;
            let as4 = |x: Vec<f32>, dims: (usize, usize, usize, usize)| {
                Array4::from_shape_vec(dims, x)
                    .map(|a| a.mapv(f64::from))
                    .map_err(|e| Error::Internal(format!("backward output shape: {e}")))
            };
            Ok(reference_backward::Grads {
                dq: as4(r.dq, (s.batch, s.heads, s.n_q, s.d))?,
                dk: as4(r.dk, (s.batch, s.kv_heads, s.n_k, s.d))?,
                dv: as4(r.dv, (s.batch, s.kv_heads, s.n_k, s.dv))?,
                d: ndarray::Array3::from_shape_vec((s.batch, s.heads, s.n_q), r.d)
                    .map_err(|e| Error::Internal(format!("backward D shape: {e}")))?
                    .mapv(f64::from),
            })
        }
    }
}
