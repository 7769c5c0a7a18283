//! The per-head stages, from split heads to concat: shared by a model lesson and by
//! tensors loaded from files. Plain f64, one head at a time, in the order DESIGN.md
//! names the stages, so each intermediate is kept for the views.

use ndarray::{Array2, Axis, concatenate};

use super::num::num;
use super::stages::{Matrix, Stage, StageId, dim_labels};
use crate::engine::config::PeKind;
use crate::engine::mask::Mask;
use crate::engine::pe;

/// q per query head [Nq, d]; k [Nk, d] and v [Nk, dv] per KV group.
pub(super) struct HeadInputs {
    pub q: Vec<Array2<f64>>,
    pub k: Vec<Array2<f64>>,
    pub v: Vec<Array2<f64>>,
    /// True when q, k, v were loaded rather than projected (changes the formula).
    pub from_files: bool,
}

pub(super) struct Labels {
    pub queries: Vec<String>,
    pub keys: Vec<String>,
}

pub(super) struct AttendOptions<'a> {
    pub pe: PeKind,
    pub mask: &'a Mask,
    pub rope_base: Option<f64>,
    pub alibi: Option<Vec<f64>>,
    /// 1/sqrt(d_k) when scaling is on.
    pub scale: Option<f64>,
    pub d_k: usize,
}

impl<'a> AttendOptions<'a> {
    pub fn new(pe: PeKind, mask: &'a Mask, scaled: bool, heads: usize, d_k: usize) -> Self {
        AttendOptions {
            pe,
            mask,
            rope_base: match pe {
                PeKind::Rope { base } => Some(base),
                _ => None,
            },
            alibi: (pe == PeKind::Alibi).then(|| pe::alibi_slopes(heads)),
            scale: scaled.then(|| 1.0 / (d_k as f64).sqrt()),
            d_k,
        }
    }
}

fn per_head(name: &str, data: &[Array2<f64>], rows: &[String], cols: &[String]) -> Vec<Matrix> {
    data.iter()
        .enumerate()
        .map(|(h, a)| {
            Matrix::new(
                format!("{name} (head {})", h + 1),
                a.clone(),
                rows.to_vec(),
                cols.to_vec(),
            )
        })
        .collect()
}

/// Apply `f` to each head's matrix and keep the result as a stage, or pass the matrices
/// through unchanged (inactive) with `why` as the formula.
fn elementwise(
    id: StageId,
    name: &str,
    current: &mut [Array2<f64>],
    labels: &Labels,
    formula: Result<String, String>,
    previous: &Stage,
    f: impl Fn(usize, usize, usize, f64) -> f64,
) -> Stage {
    let active = formula.is_ok();
    if active {
        for (h, s) in current.iter_mut().enumerate() {
            for ((i, j), x) in s.indexed_iter_mut() {
                *x = f(h, i, j, *x);
            }
        }
    }
    let matrices = if active {
        per_head(name, current, &labels.queries, &labels.keys)
    } else {
        previous.matrices.clone()
    };
    Stage::new(id, formula.unwrap_or_else(|why| why), active, matrices)
}

/// The stages SplitHeads ..= Concat, and the concatenated output [Nq, H dv].
pub(super) fn stages(
    inputs: &HeadInputs,
    opt: &AttendOptions,
    labels: &Labels,
) -> (Vec<Stage>, Array2<f64>) {
    let heads = inputs.q.len();
    let groups = inputs.k.len();
    let per_group = heads / groups;
    let group_of = |h: usize| h / per_group;
    let (n_q, n_k) = (inputs.q[0].nrows(), inputs.k[0].nrows());
    let d = opt.d_k;
    let dv = inputs.v[0].ncols();
    let q_cols = dim_labels(d);
    let v_cols = dim_labels(dv);
    let mut stages = Vec::new();

    let kv_groups = |k: &[Array2<f64>], what: &str| -> Vec<Vec<Matrix>> {
        k.iter()
            .zip(&inputs.v)
            .enumerate()
            .map(|(g, (k, v))| {
                vec![
                    Matrix::new(
                        format!("k{what} (group {})", g + 1),
                        k.clone(),
                        labels.keys.clone(),
                        q_cols.clone(),
                    ),
                    Matrix::new(
                        format!("v (group {})", g + 1),
                        v.clone(),
                        labels.keys.clone(),
                        v_cols.clone(),
                    ),
                ]
            })
            .collect()
    };
    let sharing = match (groups, heads) {
        (g, h) if g == h => format!("MHA: each of the {h} heads has its own K/V"),
        (1, h) => format!("MQA: all {h} heads share one K/V"),
        (g, h) => format!(
            "GQA: {h} heads in {g} groups of {per_group}; head h reads K/V group ceil(h / {per_group}) (both from 1)"
        ),
    };
    let mut split = Stage::new(
        StageId::SplitHeads,
        if inputs.from_files {
            format!("q, k, v as loaded: {heads} query heads of d = {d}; {sharing}")
        } else {
            format!("q_h = Q[:, h*{d}..(h+1)*{d}], k and v likewise per KV group; {sharing}")
        },
        true,
        per_head("q", &inputs.q, &labels.queries, &q_cols),
    );
    split.kv_groups = kv_groups(&inputs.k, "");
    stages.push(split);

    // RoPE: queries stand at i + Nk - Nq (bottom-right aligned), keys at j.
    let mut q = inputs.q.clone();
    let mut k = inputs.k.clone();
    let rope = match opt.rope_base {
        Some(base) => {
            let first_q = n_k as f64 - n_q as f64;
            for qh in &mut q {
                pe::rope_rows(qh.view_mut(), first_q, base);
            }
            for kg in &mut k {
                pe::rope_rows(kg.view_mut(), 0.0, base);
            }
            let mut st = Stage::new(
                StageId::Rope,
                format!(
                    "q, k rotated: pair (2p, 2p+1) turns by pos * {base}^(-2p/{d}); keys at j, queries at i + Nk - Nq"
                ),
                true,
                per_head("q rotated", &q, &labels.queries, &q_cols),
            );
            st.kv_groups = kv_groups(&k, " rotated");
            st
        }
        None => {
            let mut st = Stage::new(
                StageId::Rope,
                format!(
                    "inactive: position encoding is {}, not RoPE; q and k pass unrotated",
                    opt.pe
                ),
                false,
                per_head("q", &q, &labels.queries, &q_cols),
            );
            st.kv_groups = kv_groups(&k, "");
            st
        }
    };
    stages.push(rope);

    // Scores
    let mut s: Vec<Array2<f64>> = (0..heads).map(|h| q[h].dot(&k[group_of(h)].t())).collect();
    stages.push(Stage::new(
        StageId::Scores,
        format!("S = q k^T: [{n_q} x {d}] x [{d} x {n_k}] per head"),
        true,
        per_head("scores", &s, &labels.queries, &labels.keys),
    ));

    // Scale
    let scale_formula = match opt.scale {
        Some(c) => Ok(format!("S / sqrt(d_k) = S / sqrt({d}) = S x {}", num(c))),
        None => Err(format!(
            "inactive: scaling is off; S is not divided by sqrt(d_k) = {}, so the softmax is sharper",
            num((d as f64).sqrt())
        )),
    };
    let c = opt.scale.unwrap_or(1.0);
    let st = elementwise(
        StageId::Scale,
        "scaled scores",
        &mut s,
        labels,
        scale_formula,
        last(&stages),
        |_, _, _, x| x * c,
    );
    stages.push(st);

    // ALiBi: -m_h * |i' - j|, i' the query's position on the key axis.
    let alibi_formula = match &opt.alibi {
        Some(_) => Ok(format!(
            "S + B, B[i,j] = -m_h |i' - j|, slopes {} (ALiBi paper)",
            crate::attn::alibi::alibi_slope_rule(heads)
        )),
        None => Err(format!(
            "inactive: position encoding is {}, not ALiBi; no distance bias",
            opt.pe
        )),
    };
    let slopes = opt.alibi.clone().unwrap_or_default();
    let mask = opt.mask;
    let st = elementwise(
        StageId::Alibi,
        "scores + ALiBi",
        &mut s,
        labels,
        alibi_formula,
        last(&stages),
        |h, i, j, x| {
            let dist = (mask.query_pos(i) - j as isize).unsigned_abs() as f64;
            x - slopes[h] * dist
        },
    );
    stages.push(st);

    // Mask
    let mask_formula = match mask.kind() {
        crate::engine::config::MaskKind::None => {
            Err("inactive: no mask (mask none); every query sees every key".to_string())
        }
        kind => Ok(format!(
            "S + M, M = 0 where the key is seen, -inf where masked ({kind})"
        )),
    };
    let st = elementwise(
        StageId::Mask,
        "masked scores",
        &mut s,
        labels,
        mask_formula,
        last(&stages),
        |h, i, j, x| {
            let b = mask.bias(0, h, i, j);
            if b == f64::NEG_INFINITY { b } else { x + b }
        },
    );
    stages.push(st);

    // Softmax, max-subtracted; a row with every key masked stays all zeros.
    let weights: Vec<Array2<f64>> = s.iter().map(softmax_rows).collect();
    stages.push(Stage::new(
        StageId::Softmax,
        "A = softmax(S) row by row: exp(s - max) / sum (a row with every key masked is all zeros)"
            .into(),
        true,
        per_head("weights", &weights, &labels.queries, &labels.keys),
    ));

    // Weighted sum
    let outs: Vec<Array2<f64>> = (0..heads)
        .map(|h| weights[h].dot(&inputs.v[group_of(h)]))
        .collect();
    stages.push(Stage::new(
        StageId::WeightedSum,
        format!("O_h = A_h v: [{n_q} x {n_k}] x [{n_k} x {dv}] per head"),
        true,
        per_head("output", &outs, &labels.queries, &v_cols),
    ));

    // Concat
    let views: Vec<_> = outs.iter().map(|o| o.view()).collect();
    let concat = concatenate(Axis(1), &views).expect("head outputs share Nq rows");
    let concat_cols = (0..heads * dv)
        .map(|c| format!("h{}.{}", c / dv + 1, c % dv))
        .collect();
    stages.push(Stage::new(
        StageId::Concat,
        format!("concat = [O_1 | ... | O_{heads}]: [{n_q} x {}]", heads * dv),
        true,
        vec![Matrix::new(
            "concat",
            concat.clone(),
            labels.queries.clone(),
            concat_cols,
        )],
    ));
    (stages, concat)
}

fn last(stages: &[Stage]) -> &Stage {
    stages.last().expect("the scores stage comes first")
}

/// Row-wise softmax, max-subtracted; a row whose scores are all -inf gives zeros.
pub(super) fn softmax_rows(s: &Array2<f64>) -> Array2<f64> {
    let mut a = s.clone();
    for mut row in a.axis_iter_mut(Axis(0)) {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if m == f64::NEG_INFINITY {
            row.fill(0.0);
            continue;
        }
        row.mapv_inplace(|x| (x - m).exp());
        let l = row.sum();
        row.mapv_inplace(|x| x / l);
    }
    a
}
