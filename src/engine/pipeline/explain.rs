//! The inspector's arithmetic: for any cell of any stage, the terms that made it, with
//! numbers written compactly (4 significant digits).

use super::Pipeline;
use super::num::{num, products};
use super::stages::{Explanation, Source, Stage, StageId};
use crate::engine::config::PeKind;
use crate::engine::embed;
use crate::engine::pe;

/// A number to subtract: negative ones in parentheses, "x - (-0.5)".
fn paren(x: f64) -> String {
    if x < 0.0 {
        format!("({})", num(x))
    } else {
        num(x)
    }
}

/// "label = a*b + ... = value".
fn dot_line(label: &str, a: &[f64], b: &[f64]) -> (String, f64) {
    let value: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    (
        format!("{label} = {} = {}", products(a, b), num(value)),
        value,
    )
}

fn cell(stage: &Stage, m: usize, row: usize, col: usize) -> Option<f64> {
    stage.matrices.get(m)?.data.get((row, col)).copied()
}

impl Pipeline {
    /// The arithmetic of cell (row, col) of `matrices[m]` of stage `id`: for per-head
    /// stages `m` is the query head; otherwise the alternative (e.g. 0 = Q, 1 = K, 2 = V,
    /// 3 = W_qkv for the projection). None if any index is out of range.
    pub fn explain(&self, id: StageId, m: usize, row: usize, col: usize) -> Option<Explanation> {
        explain(self, id, m, row, col)
    }
}

fn explain(p: &Pipeline, id: StageId, m: usize, row: usize, col: usize) -> Option<Explanation> {
    if p.source == Source::Block
        && let Some(e) = super::block::explain_block(p, id, m, row, col)
    {
        return e;
    }
    let stage = p.stage(id)?;
    let matrix = stage.matrices.get(m)?;
    let value = cell(stage, m, row, col)?;
    // per-head matrices carry their head in the name, e.g. "scores (head 1)[2,0]"
    let title = format!("{}[{row},{col}]", matrix.name);
    let done = |lines: Vec<String>| {
        Some(Explanation {
            title: title.clone(),
            lines,
            value,
        })
    };
    if !stage.active {
        return done(vec![
            stage.formula.clone(),
            format!("value passes through unchanged: {}", num(value)),
        ]);
    }
    let prev = |id: StageId| p.stage(id).and_then(|s| cell(s, m, row, col));
    let q_pos = p.mask.query_pos(row);
    match id {
        StageId::Tokens => {
            let t = &p.query_labels[row];
            done(vec![
                format!("token '{t}' at position {row}"),
                format!(
                    "id = FNV-1a('{t}') mod {} = {}",
                    embed::VOCAB_SIZE,
                    embed::token_id(t)
                ),
            ])
        }
        StageId::Embeddings => {
            let t = &p.query_labels[row];
            done(vec![
                format!(
                    "dimension {col} of the seeded vector of '{t}' (seed {})",
                    p.config.seed
                ),
                "the same word gets the same vector wherever it stands".into(),
                format!("X[{row},{col}] = {}", num(value)),
            ])
        }
        StageId::PositionEncoding => {
            let x = cell(p.stage(StageId::Embeddings)?, 0, row, col)?;
            let pe_v = cell(stage, 1, row, col)?;
            let source = match p.config.pe {
                PeKind::Sinusoidal => {
                    let i = col / 2;
                    let f = if col.is_multiple_of(2) { "sin" } else { "cos" };
                    format!(
                        "PE[{row},{col}] = {f}({row} / {}^({}/{})) = {}",
                        pe::SINUSOIDAL_BASE,
                        2 * i,
                        p.config.d_model,
                        num(pe_v)
                    )
                }
                _ => format!(
                    "P[{row},{col}] = {} (row {row} of the seeded position table)",
                    num(pe_v)
                ),
            };
            if m == 1 {
                return done(vec![source]);
            }
            done(vec![
                source,
                format!("X + PE = {} + {} = {}", num(x), num(pe_v), num(value)),
            ])
        }
        StageId::QkvProjection => {
            let w = &stage.matrices[3].data;
            if m == 3 {
                return done(vec![format!(
                    "seeded weight, uniform in +-1/sqrt(d_model) = +-{}",
                    num(1.0 / (p.config.d_model as f64).sqrt())
                )]);
            }
            let x_in = &p.stage(StageId::PositionEncoding)?.matrices[0].data;
            let (d, kv_width) = (p.config.d_model, p.config.kv_heads * p.config.d_head());
            let (name, w_col) = match m {
                0 => ("Q", col),
                1 => ("K", d + col),
                _ => ("V", d + kv_width + col),
            };
            let xs: Vec<f64> = x_in.row(row).to_vec();
            let ws: Vec<f64> = w.column(w_col).to_vec();
            let (line, _) = dot_line(&format!("{name}[{row},{col}]"), &xs, &ws);
            done(vec![
                format!("row {row} of X + PE times column {w_col} of W_qkv"),
                line,
            ])
        }
        StageId::SplitHeads => {
            let g = p.kv_group_for(m);
            let d = p.shape.d;
            let from = match p.source {
                Source::Tensors => format!(
                    "loaded from the Q file: head {}, index {m} of its head axis",
                    m + 1
                ),
                _ => format!("q_{}[{row},{col}] = Q[{row},{}]", m + 1, m * d + col),
            };
            done(vec![
                from,
                format!("head {} reads K/V group {}", m + 1, g + 1),
                format!("= {}", num(value)),
            ])
        }
        StageId::Rope => {
            let base = p.rope_base?;
            let q = &p.stage(StageId::SplitHeads)?.matrices[m].data;
            let d = q.ncols();
            let pair = col / 2;
            if 2 * pair + 1 >= d {
                return done(vec![format!(
                    "odd last dimension: not rotated, {}",
                    num(value)
                )]);
            }
            let theta = pe::rope_angle(q_pos as f64, pair, d, base);
            let (a, b) = (q[[row, 2 * pair]], q[[row, 2 * pair + 1]]);
            let (sn, cs) = theta.sin_cos();
            let rot = if col.is_multiple_of(2) {
                format!(
                    "q'[{col}] = q[{}] cos t - q[{}] sin t = {}*{} - {}*{} = {}",
                    2 * pair,
                    2 * pair + 1,
                    num(a),
                    num(cs),
                    paren(b),
                    num(sn),
                    num(value)
                )
            } else {
                format!(
                    "q'[{col}] = q[{}] sin t + q[{}] cos t = {}*{} + {}*{} = {}",
                    2 * pair,
                    2 * pair + 1,
                    num(a),
                    num(sn),
                    num(b),
                    num(cs),
                    num(value)
                )
            };
            done(vec![
                format!(
                    "query {row} stands at position {q_pos}; pair ({}, {}) turns by t = {q_pos} * {base}^(-{}/{d}) = {}",
                    2 * pair,
                    2 * pair + 1,
                    2 * pair,
                    num(theta)
                ),
                rot,
            ])
        }
        StageId::Scores => {
            let rope = p.stage(StageId::Rope)?;
            let q = &rope.matrices[m].data;
            let k = &rope.kv_groups.get(p.kv_group_for(m))?[0].data;
            let (line, _) = dot_line(
                &format!("q{row}.k{col}"),
                &q.row(row).to_vec(),
                &k.row(col).to_vec(),
            );
            done(vec![line])
        }
        StageId::Scale => {
            let s = prev(StageId::Scores)?;
            let d = p.shape.d;
            done(vec![format!(
                "s / sqrt(d_k) = {} / sqrt({d}) = {} * {} = {}",
                num(s),
                num(s),
                num(p.scale?),
                num(value)
            )])
        }
        StageId::Alibi => {
            let s = prev(StageId::Scale)?;
            let slope = p.alibi_slopes.as_ref()?[m];
            let dist = (q_pos - col as isize).unsigned_abs();
            done(vec![
                format!("query {row} stands at position {q_pos}; distance to key {col} = {dist}"),
                format!(
                    "bias = -m_{} * {dist} = -{} * {dist} = {}",
                    m + 1,
                    num(slope),
                    num(-slope * dist as f64)
                ),
                format!("{} - {} = {}", num(s), num(slope * dist as f64), num(value)),
            ])
        }
        StageId::Mask => {
            let s = prev(StageId::Alibi)?;
            let bias = p.mask.bias(0, m, row, col);
            let line = if bias == f64::NEG_INFINITY {
                format!(
                    "key {col} is masked for query {row} ({}): -inf, so its weight will be exactly 0",
                    p.mask.kind()
                )
            } else if bias == 0.0 {
                format!(
                    "key {col} is seen by query {row}: unchanged, {}",
                    num(value)
                )
            } else {
                format!(
                    "mask bias {}: {} + {} = {}",
                    num(bias),
                    num(s),
                    num(bias),
                    num(value)
                )
            };
            done(vec![line])
        }
        StageId::Softmax => explain_softmax(p, m, row, col, value).and_then(done),
        StageId::WeightedSum => {
            let a = &p.stage(StageId::Softmax)?.matrices[m].data;
            let v = &p
                .stage(StageId::SplitHeads)?
                .kv_groups
                .get(p.kv_group_for(m))?[1]
                .data;
            let (line, _) = dot_line(
                &format!("out[{row},{col}] = sum_j A[{row},j] v[j,{col}]"),
                &a.row(row).to_vec(),
                &v.column(col).to_vec(),
            );
            done(vec![line])
        }
        StageId::Concat => {
            let dv = p.shape.dv;
            let h = col / dv;
            done(vec![format!(
                "concat[{row},{col}] = out[{row},{}] of head {} (columns {}..{} are head {}'s) = {}",
                col % dv,
                h + 1,
                h * dv,
                (h + 1) * dv - 1,
                h + 1,
                num(value)
            )])
        }
        // Only a block has these; explain_block answers for them.
        StageId::Norm | StageId::Residual | StageId::Mlp | StageId::BlockOut => None,
        StageId::OutputProjection => {
            let w = &stage.matrices[1].data;
            if m == 1 {
                return done(vec![format!(
                    "seeded weight, uniform in +-1/sqrt(heads * d_head) = +-{}",
                    num(1.0 / (w.nrows() as f64).sqrt())
                )]);
            }
            let c = &p.stage(StageId::Concat)?.matrices[0].data;
            let (line, _) = dot_line(
                &format!("output[{row},{col}] = concat[{row},:] . W_O[:,{col}]"),
                &c.row(row).to_vec(),
                &w.column(col).to_vec(),
            );
            done(vec![line])
        }
    }
}

fn explain_softmax(
    p: &Pipeline,
    m: usize,
    row: usize,
    col: usize,
    value: f64,
) -> Option<Vec<String>> {
    let weights = &p.stage(StageId::Softmax)?.matrices[m].data;
    if p.source == Source::Weights {
        return Some(vec![
            "loaded from the weights file".into(),
            format!(
                "row {row} sums to {}; this key gets {}",
                num(weights.row(row).sum()),
                num(value)
            ),
        ]);
    }
    let scores = &p.stage(StageId::Mask)?.matrices[m].data;
    let srow = scores.row(row);
    let max = srow.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return Some(vec![format!(
            "every key of row {row} is masked: the weights are all 0 (never NaN)"
        )]);
    }
    let s = srow[col];
    let sum: f64 = srow.iter().map(|&x| (x - max).exp()).sum();
    let e = (s - max).exp();
    let first = if s == f64::NEG_INFINITY {
        "masked: exp(-inf) = 0".to_string()
    } else {
        format!(
            "exp(s - max) = exp({} - {}) = {}",
            num(s),
            paren(max),
            num(e)
        )
    };
    Some(vec![
        first,
        format!("row sum of exp(s_j - max) = {}", num(sum)),
        format!("weight = {} / {} = {}", num(e), num(sum), num(value)),
    ])
}
