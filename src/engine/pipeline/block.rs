//! One block of a real model as a pipeline: the tensors the model's forward pass kept
//! (its norm, Q/K/V, W_O, residuals and MLP) become stages, and the attention stages in
//! between are recomputed here in f64 from the block's own q, k and v by the same code
//! as a lesson's, so the inspector explains every cell of a trained model too.
//!
//! The engine knows nothing of model files: the caller (the model's session) hands over
//! plain matrices in [`BlockTensors`].

use ndarray::{Array2, Array3};

use super::attend::{self, AttendOptions, HeadInputs};
use super::num::{num, products};
use super::{
    Explanation, Matrix, ModelConfig, Pipeline, Source, Stage, StageId, check_view_size,
    dim_labels, labels_for,
};
use crate::engine::config::{MaskKind, PeKind};
use crate::engine::mask::Mask;
use crate::engine::problem::ProblemShape;
use crate::error::{Error, Result};

/// How the block normalises.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockNorm {
    /// RMSNorm (true) or LayerNorm.
    pub rms: bool,
    /// Post-norm (BERT): norm(x + f(x)); pre-norm otherwise: x + f(norm(x)).
    pub post: bool,
    pub eps: f64,
}

/// The feed-forward part's tensors, each [n, width].
#[derive(Debug, Clone, PartialEq)]
pub struct BlockMlp {
    /// "SwiGLU" or "GELU" (for the formulas).
    pub kind: &'static str,
    /// The input of the activation: gate x (gated) or up x (plain).
    pub pre_act: Array2<f64>,
    /// up x of a gated MLP.
    pub up: Option<Array2<f64>>,
    /// act(gate x) * up x, or act(up x).
    pub hidden: Array2<f64>,
    /// The down projection's weight [d_model, d_ff].
    pub w_down: Array2<f64>,
    pub out: Array2<f64>,
}

/// Everything one block computed on one sequence, as plain matrices.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockTensors {
    /// e.g. "SmolLM2-135M-Instruct.Q4_1".
    pub model: String,
    /// From 0.
    pub layer: usize,
    pub layers: usize,
    /// Token texts as the tokenizer split them, and their ids.
    pub tokens: Vec<String>,
    pub ids: Vec<u32>,
    pub norm: BlockNorm,
    /// The residual stream entering the block [n, d_model].
    pub input: Array2<f64>,
    /// Pre-norm: norm(input), what Q/K/V read. Post-norm: the input itself.
    pub attn_in: Array2<f64>,
    /// Scale and shift of the attention norm (pre-norm: before; post-norm: after the
    /// residual) [d_model].
    pub attn_norm_w: Vec<f64>,
    pub attn_norm_b: Option<Vec<f64>>,
    /// W_q [H d_head, d_model], W_k and W_v [G d_head, d_model], with biases.
    pub w_q: Array2<f64>,
    pub w_k: Array2<f64>,
    pub w_v: Array2<f64>,
    pub b_qkv: Option<[Vec<f64>; 3]>,
    /// q [H, n, d_head], k and v [G, n, d_head], before RoPE, with the head dimensions in
    /// the order the engine's RoPE pairs them ((2i, 2i+1)).
    pub q: Array3<f64>,
    pub k: Array3<f64>,
    pub v: Array3<f64>,
    /// RoPE's base if the model rotates q and k (None: learned positions or `--no-pe`).
    pub rope_base: Option<f64>,
    /// Why the column order of q and k differs from the model's, if it does.
    pub rope_note: Option<String>,
    pub mask: MaskKind,
    /// Heads whose output was zeroed before W_O (from 0).
    pub ablated: Vec<usize>,
    /// concat W_O^T + b [n, d_model], and W_O [d_model, H d_head].
    pub attn_out: Array2<f64>,
    pub w_o: Array2<f64>,
    /// input + attn_out [n, d_model]; post-norm: also its norm.
    pub attn_residual: Array2<f64>,
    pub attn_residual_normed: Option<Array2<f64>>,
    /// Pre-norm: norm(attn_residual), what the MLP reads, with the norm's scale/shift.
    pub mlp_in: Array2<f64>,
    pub mlp_norm_w: Vec<f64>,
    pub mlp_norm_b: Option<Vec<f64>>,
    pub mlp: BlockMlp,
    /// The residual stream leaving the block [n, d_model].
    pub output: Array2<f64>,
}

impl Pipeline {
    /// The stages of one block of a real model, in [`StageId::BLOCK`] order.
    pub fn from_block(b: BlockTensors) -> Result<Pipeline> {
        let (heads, n, dh) = b.q.dim();
        let (groups, n_k, _) = b.k.dim();
        let shape = ProblemShape::from_dims(
            [1, heads, n, dh],
            [1, groups, n_k, dh],
            [1, groups, n_k, b.v.dim().2],
        )?;
        check_view_size(heads, n, n_k)?;
        if b.tokens.len() != n || b.ids.len() != n || b.input.nrows() != n {
            return Err(Error::Internal(format!(
                "block {}: {} tokens, {} ids and {} input rows for {n} queries",
                b.layer + 1,
                b.tokens.len(),
                b.ids.len(),
                b.input.nrows()
            )));
        }
        let d_model = b.input.ncols();
        let labels = labels_for(b.tokens.clone(), n, n_k)?;
        let toks = &labels.queries;
        let dims = dim_labels(d_model);
        let mat = |name: &str, data: Array2<f64>| {
            let cols = dim_labels(data.ncols());
            Matrix::new(name, data, toks.clone(), cols)
        };
        let norm_name = if b.norm.rms { "RMSNorm" } else { "LayerNorm" };
        let layer = b.layer + 1;
        let mut stages = Vec::with_capacity(StageId::BLOCK.len());

        let ids = Array2::from_shape_fn((n, 1), |(i, _)| b.ids[i] as f64);
        stages.push(Stage::new(
            StageId::Tokens,
            format!(
                "{n} token{} as {}'s tokenizer splits the text",
                if n == 1 { "" } else { "s" },
                b.model
            ),
            true,
            vec![Matrix::new(
                "token ids",
                ids,
                toks.clone(),
                vec!["id".into()],
            )],
        ));
        stages.push(Stage::new(
            StageId::Embeddings,
            if b.layer == 0 {
                format!("h [{n} x {d_model}]: the token embeddings, what block 1 reads")
            } else {
                format!(
                    "h [{n} x {d_model}]: the residual stream after {} block{}, what block {layer} reads",
                    b.layer,
                    if b.layer == 1 { "" } else { "s" }
                )
            },
            true,
            vec![Matrix::new("h", b.input.clone(), toks.clone(), dims.clone())],
        ));
        stages.push(Stage::new(
            StageId::PositionEncoding,
            match b.rope_base {
                Some(base) => format!(
                    "inactive: positions enter inside attention, RoPE rotates q and k (base {})",
                    num(base)
                ),
                None => "inactive here: learned positions were added to the embeddings before block 1 (or --no-pe dropped them)".into(),
            },
            false,
            vec![Matrix::new("h", b.input.clone(), toks.clone(), dims.clone())],
        ));
        let mut norm_ms = vec![mat("norm(h)", b.attn_in.clone())];
        norm_ms.push(row_matrix("w (scale)", &b.attn_norm_w));
        if let Some(bias) = &b.attn_norm_b {
            norm_ms.push(row_matrix("b (shift)", bias));
        }
        stages.push(if b.norm.post {
            Stage::new(
                StageId::Norm,
                format!(
                    "inactive: a post-norm model; {norm_name} comes after each residual (see + residual and block out)"
                ),
                false,
                vec![mat("h", b.input.clone())],
            )
        } else {
            Stage::new(
                StageId::Norm,
                if b.norm.rms {
                    format!("RMSNorm: h / sqrt(mean(h^2) + {}) * w, row by row", num(b.norm.eps))
                } else {
                    format!("LayerNorm: (h - mean) / sqrt(var + {}) * w + b, row by row", num(b.norm.eps))
                },
                true,
                norm_ms,
            )
        });
        let flat = |a: &Array3<f64>| {
            let (g, n, d) = a.dim();
            let mut out = Array2::zeros((n, g * d));
            for (h, m) in a.outer_iter().enumerate() {
                out.slice_mut(ndarray::s![.., h * d..(h + 1) * d])
                    .assign(&m);
            }
            out
        };
        let mut qkv = vec![
            mat("Q", flat(&b.q)),
            mat("K", flat(&b.k)),
            mat("V", flat(&b.v)),
        ];
        qkv.push(Matrix::new(
            "W_q",
            b.w_q.clone(),
            dim_labels(b.w_q.nrows()),
            dims.clone(),
        ));
        stages.push(Stage::new(
            StageId::QkvProjection,
            format!(
                "Q = x W_q^T{b}, K = x W_k^T{b}, V = x W_v^T{b}: {heads} query heads, {groups} KV head{} of d = {dh}{}",
                if groups == 1 { "" } else { "s" },
                b.rope_note
                    .as_ref()
                    .map(|s| format!("; {s}"))
                    .unwrap_or_default(),
                b = if b.b_qkv.is_some() { " + b" } else { "" },
            ),
            true,
            qkv,
        ));

        let pe = match b.rope_base {
            Some(base) => PeKind::Rope { base },
            None => PeKind::None,
        };
        let mask = Mask::resolve(&b.mask, 1, heads, n, n_k)?;
        let inputs = HeadInputs {
            q: b.q.outer_iter().map(|a| a.to_owned()).collect(),
            k: b.k.outer_iter().map(|a| a.to_owned()).collect(),
            v: b.v.outer_iter().map(|a| a.to_owned()).collect(),
            from_files: false,
        };
        let options = AttendOptions::new(pe, &mask, true, heads, dh);
        let (attend_stages, _concat) = attend::stages(&inputs, &options, &labels);
        stages.extend(attend_stages);
        if !b.ablated.is_empty() {
            // The model zeroed these heads' outputs before W_O: the concat shows that.
            let concat = stages.last_mut().expect("attend yields the concat stage");
            for &h in &b.ablated {
                let dv = b.v.dim().2;
                concat.matrices[0]
                    .data
                    .slice_mut(ndarray::s![.., h * dv..(h + 1) * dv])
                    .fill(0.0);
            }
            let list: Vec<String> = b.ablated.iter().map(|h| (h + 1).to_string()).collect();
            concat.formula = format!(
                "{}; head{} {} ablated (zeroed)",
                concat.formula,
                if list.len() == 1 { "" } else { "s" },
                list.join(", ")
            );
        }
        stages.push(Stage::new(
            StageId::OutputProjection,
            "attention output = concat W_O^T: W_O mixes the heads back into d_model".into(),
            true,
            vec![
                mat("attn out", b.attn_out.clone()),
                Matrix::new(
                    "W_O",
                    b.w_o.clone(),
                    dims.clone(),
                    dim_labels(b.w_o.ncols()),
                ),
            ],
        ));
        let mut res = vec![mat("h + attn", b.attn_residual.clone())];
        if let Some(normed) = &b.attn_residual_normed {
            res.insert(0, mat(&format!("{norm_name}(h + attn)"), normed.clone()));
        }
        stages.push(Stage::new(
            StageId::Residual,
            if b.norm.post {
                format!("{norm_name}(h + attention out): the residual, then the norm (post-norm)")
            } else {
                "h + attention out: the block adds what attention found to the stream".into()
            },
            true,
            res,
        ));
        let mut mlp = vec![
            mat("mlp out", b.mlp.out.clone()),
            mat("hidden", b.mlp.hidden.clone()),
            mat("pre-activation", b.mlp.pre_act.clone()),
        ];
        if let Some(up) = &b.mlp.up {
            mlp.push(mat("up", up.clone()));
        }
        if !b.norm.post {
            mlp.push(mat("norm(h + attn)", b.mlp_in.clone()));
        }
        let d_ff = b.mlp.hidden.ncols();
        stages.push(Stage::new(
            StageId::Mlp,
            match b.mlp.kind {
                "SwiGLU" => format!(
                    "MLP (SwiGLU, {d_ff} wide): down(silu(gate x) * up x), x = {norm_name}(h + attn)"
                ),
                _ if b.norm.post => format!("MLP (GELU, {d_ff} wide): down(gelu(up x)), x = the normed residual"),
                _ => format!("MLP (GELU, {d_ff} wide): down(gelu(up x)), x = {norm_name}(h + attn)"),
            },
            true,
            mlp,
        ));
        stages.push(Stage::new(
            StageId::BlockOut,
            if b.norm.post {
                format!("block {layer} out = {norm_name}(x + mlp out): the stream block {} reads", layer + 1)
            } else if layer == b.layers {
                format!("block {layer} out = (h + attn) + mlp out: the last block; the final norm and the LM head read it")
            } else {
                format!("block {layer} out = (h + attn) + mlp out: the stream block {} reads", layer + 1)
            },
            true,
            vec![mat("block out", b.output.clone())],
        ));
        debug_assert!(stages.iter().map(|s| s.id).eq(StageId::BLOCK));
        Ok(Pipeline {
            config: ModelConfig {
                tokens: labels.keys.clone(),
                d_model,
                heads,
                kv_heads: groups,
                seed: 0,
                pe,
                mask: b.mask.clone(),
                scaled: true,
            },
            stages,
            source: Source::Block,
            shape,
            query_labels: labels.queries,
            key_labels: labels.keys,
            scale: options.scale,
            alibi_slopes: None,
            rope_base: options.rope_base,
            mask,
            block: Some(Box::new(BlockInfo {
                norm: b.norm,
                attn_norm_w: b.attn_norm_w,
                attn_norm_b: b.attn_norm_b,
                mlp_norm_w: b.mlp_norm_w,
                mlp_norm_b: b.mlp_norm_b,
                w_k: b.w_k,
                w_v: b.w_v,
                b_qkv: b.b_qkv,
                w_down: b.mlp.w_down,
                mlp_kind: b.mlp.kind,
                ablated: b.ablated,
            })),
        })
    }
}

/// What a block's explanations need beyond its stages' matrices.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockInfo {
    pub norm: BlockNorm,
    pub attn_norm_w: Vec<f64>,
    pub attn_norm_b: Option<Vec<f64>>,
    pub mlp_norm_w: Vec<f64>,
    pub mlp_norm_b: Option<Vec<f64>>,
    pub w_k: Array2<f64>,
    pub w_v: Array2<f64>,
    pub b_qkv: Option<[Vec<f64>; 3]>,
    pub w_down: Array2<f64>,
    pub mlp_kind: &'static str,
    pub ablated: Vec<usize>,
}

fn row_matrix(name: &str, v: &[f64]) -> Matrix {
    let data = Array2::from_shape_vec((1, v.len()), v.to_vec()).expect("one row");
    Matrix::new(
        name,
        data,
        vec![name.split(' ').next().unwrap_or(name).into()],
        dim_labels(v.len()),
    )
}

/// The norm of one row at column `col`, explained: RMSNorm or LayerNorm with scale w
/// (and shift b).
fn norm_lines(
    x: &[f64],
    col: usize,
    norm: &BlockNorm,
    w: &[f64],
    b: Option<&[f64]>,
    value: f64,
) -> Vec<String> {
    let d = x.len() as f64;
    if norm.rms {
        let ms = x.iter().map(|v| v * v).sum::<f64>() / d;
        let r = (ms + norm.eps).sqrt();
        vec![
            format!(
                "rms = sqrt(mean(x^2) + eps) = sqrt({} + {}) = {}",
                num(ms),
                num(norm.eps),
                num(r)
            ),
            format!(
                "x[{col}] / rms * w[{col}] = {} / {} * {} = {}",
                num(x[col]),
                num(r),
                num(w[col]),
                num(value)
            ),
        ]
    } else {
        let mean = x.iter().sum::<f64>() / d;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d;
        let sd = (var + norm.eps).sqrt();
        vec![
            format!(
                "mean = {}, var = {}, sqrt(var + eps) = {}",
                num(mean),
                num(var),
                num(sd)
            ),
            format!(
                "(x[{col}] - mean) / sd * w[{col}] + b[{col}] = ({} - {}) / {} * {} + {} = {}",
                num(x[col]),
                num(mean),
                num(sd),
                num(w[col]),
                num(b.map_or(0.0, |b| b[col])),
                num(value)
            ),
        ]
    }
}

/// The arithmetic of the stages only a block has (and of those whose inputs differ from
/// a lesson's); None hands the cell to the lesson's explanations.
pub(super) fn explain_block(
    p: &Pipeline,
    id: StageId,
    m: usize,
    row: usize,
    col: usize,
) -> Option<Option<Explanation>> {
    let info = p.block.as_deref()?;
    let stage = p.stage(id)?;
    let matrix = stage.matrices.get(m)?;
    let value = *matrix.data.get((row, col))?;
    let title = format!("{}[{row},{col}]", matrix.name);
    let done = |lines: Vec<String>| {
        Some(Some(Explanation {
            title: title.clone(),
            lines,
            value,
        }))
    };
    let row_of = |id: StageId, m: usize| -> Option<Vec<f64>> {
        Some(p.stage(id)?.matrices.get(m)?.data.row(row).to_vec())
    };
    let at = |id: StageId, m: usize| p.stage(id)?.matrices.get(m)?.data.get((row, col)).copied();
    match id {
        StageId::Tokens => done(vec![
            format!(
                "token {} at position {row}: '{}'",
                num(value),
                p.query_labels[row]
            ),
            "the id is the model's own tokenizer's; its embedding row starts block 1".into(),
        ]),
        StageId::Embeddings | StageId::PositionEncoding => done(vec![format!(
            "h[{row},{col}] = {}: dimension {col} of the residual stream at '{}'",
            num(value),
            p.query_labels[row]
        )]),
        StageId::Norm if m == 0 => {
            let x = row_of(StageId::Embeddings, 0)?;
            done(norm_lines(
                &x,
                col,
                &info.norm,
                &info.attn_norm_w,
                info.attn_norm_b.as_deref(),
                value,
            ))
        }
        StageId::Norm => done(vec![format!(
            "learned {} of the norm, dimension {col}: {}",
            if m == 1 { "scale" } else { "shift" },
            num(value)
        )]),
        StageId::QkvProjection if m < 3 => {
            let x = row_of(StageId::Norm, 0)
                .filter(|_| !info.norm.post)
                .or_else(|| row_of(StageId::Embeddings, 0))?;
            let w = match m {
                0 => &p.stage(StageId::QkvProjection)?.matrices[3].data,
                1 => &info.w_k,
                _ => &info.w_v,
            };
            let name = ["Q", "K", "V"][m];
            let wr = w.row(col).to_vec();
            let bias = info.b_qkv.as_ref().map_or(0.0, |b| b[m][col]);
            let dot: f64 = x.iter().zip(&wr).map(|(a, b)| a * b).sum();
            let mut lines = vec![format!(
                "{name}[{row},{col}] = x[{row},:] . W_{}[{col},:] = {} = {}",
                name.to_lowercase(),
                products(&x, &wr),
                num(dot)
            )];
            if info.b_qkv.is_some() {
                lines.push(format!("+ bias {} = {}", num(bias), num(dot + bias)));
            }
            lines.push("(f32 in the model; this line redoes it in f64)".into());
            done(lines)
        }
        StageId::QkvProjection => done(vec![format!(
            "learned weight W_q[{row},{col}] = {}",
            num(value)
        )]),
        StageId::OutputProjection if m == 0 => {
            let c = row_of(StageId::Concat, 0)?;
            let w = &stage.matrices[1].data;
            let wr = w.row(col).to_vec();
            let dot: f64 = c.iter().zip(&wr).map(|(a, b)| a * b).sum();
            let mut lines = vec![format!(
                "out[{row},{col}] = concat[{row},:] . W_O[{col},:] = {} = {}",
                products(&c, &wr),
                num(dot)
            )];
            if (dot - value).abs() > 1e-6 * value.abs().max(1.0) {
                lines.push(format!("+ bias = {}", num(value)));
            }
            done(lines)
        }
        StageId::OutputProjection => done(vec![format!(
            "learned weight W_O[{row},{col}] = {}",
            num(value)
        )]),
        StageId::Residual => {
            let h = at(StageId::Embeddings, 0)?;
            let a = at(StageId::OutputProjection, 0)?;
            let sum = h + a;
            let mut lines = vec![format!("h + attn = {} + {} = {}", num(h), num(a), num(sum))];
            if info.norm.post && m == 0 {
                let x = row_of(StageId::Residual, 1)?;
                lines.extend(norm_lines(
                    &x,
                    col,
                    &info.norm,
                    &info.attn_norm_w,
                    info.attn_norm_b.as_deref(),
                    value,
                ));
            }
            done(lines)
        }
        StageId::Mlp => match m {
            0 => {
                let hid = row_of(StageId::Mlp, 1)?;
                let wr = info.w_down.row(col).to_vec();
                let dot: f64 = hid.iter().zip(&wr).map(|(a, b)| a * b).sum();
                done(vec![format!(
                    "mlp out[{row},{col}] = hidden[{row},:] . W_down[{col},:] = {} = {}",
                    products(&hid, &wr),
                    num(dot)
                )])
            }
            1 => {
                let a = at(StageId::Mlp, 2)?;
                if info.mlp_kind == "SwiGLU" {
                    let u = at(StageId::Mlp, 3)?;
                    let silu = a / (1.0 + (-a).exp());
                    done(vec![
                        format!(
                            "silu(g) = g / (1 + exp(-g)) = {} / (1 + exp({})) = {}",
                            num(a),
                            num(-a),
                            num(silu)
                        ),
                        format!(
                            "hidden = silu(g) * up = {} * {} = {}",
                            num(silu),
                            num(u),
                            num(value)
                        ),
                    ])
                } else {
                    done(vec![format!(
                        "hidden = gelu(a) = gelu({}) = {}",
                        num(a),
                        num(value)
                    )])
                }
            }
            _ => done(vec![format!("{} = {}", matrix.name, num(value))]),
        },
        StageId::BlockOut => {
            // Residual's first matrix is what the MLP's residual adds to: h + attn, or its
            // norm in a post-norm model.
            let r = at(StageId::Residual, 0)?;
            let f = at(StageId::Mlp, 0)?;
            let mut lines = vec![format!(
                "residual + mlp out = {} + {} = {}",
                num(r),
                num(f),
                num(r + f)
            )];
            if info.norm.post {
                let rr = row_of(StageId::Residual, 0)?;
                let fr = row_of(StageId::Mlp, 0)?;
                let x: Vec<f64> = rr.iter().zip(&fr).map(|(a, b)| a + b).collect();
                lines.extend(norm_lines(
                    &x,
                    col,
                    &info.norm,
                    &info.mlp_norm_w,
                    info.mlp_norm_b.as_deref(),
                    value,
                ));
            }
            done(lines)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array;

    fn ramp2(r: usize, c: usize, k: f64) -> Array2<f64> {
        Array::from_shape_fn((r, c), |(i, j)| ((i * 7 + j * 3) as f64 * k).sin())
    }

    fn ramp3(a: usize, r: usize, c: usize, k: f64) -> Array3<f64> {
        Array::from_shape_fn((a, r, c), |(h, i, j)| {
            ((h * 11 + i * 7 + j * 3) as f64 * k).cos()
        })
    }

    /// A pre-norm (RMSNorm, SwiGLU, RoPE) block with 4 heads and 2 KV heads.
    fn block(post: bool) -> BlockTensors {
        let (n, d, heads, groups, dh, ff) = (5, 8, 4, 2, 2, 6);
        let input = ramp2(n, d, 0.3);
        let rms = |x: &Array2<f64>| {
            let mut y = x.clone();
            for mut row in y.rows_mut() {
                let r = (row.mapv(|v| v * v).mean().unwrap() + 1e-5).sqrt();
                row.mapv_inplace(|v| v / r);
            }
            y
        };
        let attn_out = ramp2(n, d, 0.7);
        let attn_residual = &input + &attn_out;
        let hidden = ramp2(n, ff, 0.11);
        let w_down = ramp2(d, ff, 0.13);
        let mlp_out = hidden.dot(&w_down.t());
        BlockTensors {
            model: "tiny".into(),
            layer: 1,
            layers: 3,
            tokens: ["a", " b", " c", " a", " b"].map(String::from).to_vec(),
            ids: vec![1, 2, 3, 1, 2],
            norm: BlockNorm {
                rms: !post,
                post,
                eps: 1e-5,
            },
            attn_in: if post { input.clone() } else { rms(&input) },
            input,
            attn_norm_w: vec![1.0; d],
            attn_norm_b: post.then(|| vec![0.0; d]),
            w_q: ramp2(heads * dh, d, 0.2),
            w_k: ramp2(groups * dh, d, 0.4),
            w_v: ramp2(groups * dh, d, 0.5),
            b_qkv: None,
            q: ramp3(heads, n, dh, 0.3),
            k: ramp3(groups, n, dh, 0.5),
            v: ramp3(groups, n, dh, 0.9),
            rope_base: (!post).then_some(10000.0),
            rope_note: None,
            mask: if post {
                MaskKind::None
            } else {
                MaskKind::Causal
            },
            ablated: vec![2],
            w_o: ramp2(d, heads * dh, 0.17),
            attn_out,
            attn_residual_normed: post.then(|| rms(&attn_residual)),
            mlp_in: rms(&attn_residual),
            attn_residual,
            mlp_norm_w: vec![1.0; d],
            mlp_norm_b: post.then(|| vec![0.0; d]),
            mlp: BlockMlp {
                kind: if post { "GELU" } else { "SwiGLU" },
                pre_act: ramp2(n, ff, 0.19),
                up: (!post).then(|| ramp2(n, ff, 0.23)),
                hidden,
                w_down,
                out: mlp_out.clone(),
            },
            output: ramp2(n, d, 0.29),
        }
    }

    #[test]
    fn a_block_has_every_stage_and_softmax_rows_sum_to_one() {
        for post in [false, true] {
            let p = Pipeline::from_block(block(post)).unwrap();
            assert!(p.stages.iter().map(|s| s.id).eq(StageId::BLOCK));
            let soft = p.stage(StageId::Softmax).unwrap();
            assert_eq!(soft.matrices.len(), 4);
            for m in &soft.matrices {
                for row in m.data.rows() {
                    assert!((row.sum() - 1.0).abs() < 1e-12);
                }
            }
            // Causal for the pre-norm block: query 0 sees only key 0.
            if !post {
                assert_eq!(soft.matrices[0].data[[0, 0]], 1.0);
            }
            // The ablated head's columns are zero in the concat.
            let concat = &p.stage(StageId::Concat).unwrap().matrices[0].data;
            assert!(concat.column(4).iter().all(|&x| x == 0.0));
            assert!(concat.column(0).iter().any(|&x| x != 0.0));
            assert_eq!(p.stage(StageId::Norm).unwrap().active, !post);
        }
    }

    #[test]
    fn block_cells_are_explained_with_their_own_numbers() {
        let p = Pipeline::from_block(block(false)).unwrap();
        // Residual: h + attn written out.
        let e = p.explain(StageId::Residual, 0, 2, 3).unwrap();
        let h = p.stage(StageId::Embeddings).unwrap().matrices[0].data[[2, 3]];
        assert!(e.lines[0].contains(&num(h)), "{e:?}");
        // MLP out is hidden . W_down, and its sum equals the cell.
        let e = p.explain(StageId::Mlp, 0, 1, 2).unwrap();
        assert!(e.lines[0].ends_with(&num(e.value)), "{e:?}");
        // The norm's arithmetic reproduces the normed value.
        let e = p.explain(StageId::Norm, 0, 4, 7).unwrap();
        assert!(e.lines[1].ends_with(&num(e.value)), "{e:?}");
        // Q is norm(h) . W_q, redone in f64; here q was made up, so only the form is checked.
        let e = p.explain(StageId::QkvProjection, 1, 0, 1).unwrap();
        assert!(
            e.lines[0].starts_with("K[0,1] = x[0,:] . W_k[1,:]"),
            "{e:?}"
        );
        // Every cell of every stage has an explanation.
        for s in &p.stages {
            for (m, mat) in s.matrices.iter().enumerate() {
                let (r, c) = mat.data.dim();
                assert!(
                    p.explain(s.id, m, r - 1, c - 1).is_some(),
                    "{:?} matrix {m} has no explanation",
                    s.id
                );
            }
        }
    }
}
