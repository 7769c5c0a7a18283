//! Value-weighted attention (Kobayashi et al. 2020, "Attention is not only a weight"):
//! what key j adds to query i's output through head h is A[i, j] v_j W_O^h, and its size
//! ||A[i, j] v_j W_O^h||_2, normalised per row to sum 1, says how much j matters to i,
//! where the weight A alone can point at a token whose value is nearly nothing (a sink).

use crate::model::config::ModelConfig;
use crate::model::weights::LayerWeights;

/// ||v_j W_O^h||_2 for every query head h and position j, [heads, n], from the layer's
/// values [kv_heads, n, d_head]: v G_h v^T with G_h = W_O^h^T W_O^h (d_head x d_head).
pub fn value_norms(cfg: &ModelConfig, lw: &LayerWeights, values: &[f32], n: usize) -> Vec<f32> {
    let (d, dh, h) = (cfg.d_model, cfg.d_head, cfg.heads);
    let hd = h * dh;
    let wo = lw.wo.w.to_f32();
    let mut out = vec![0.0f32; h * n];
    let mut g = vec![0.0f64; dh * dh];
    for head in 0..h {
        g.fill(0.0);
        for j in 0..d {
            let row = &wo[j * hd + head * dh..][..dh];
            for a in 0..dh {
                let ra = row[a] as f64;
                for (b, gab) in g[a * dh..][..dh].iter_mut().enumerate() {
                    *gab += ra * row[b] as f64;
                }
            }
        }
        let kv = cfg.kv_head_for(head);
        for p in 0..n {
            let v = &values[(kv * n + p) * dh..][..dh];
            let mut s = 0.0f64;
            for a in 0..dh {
                let ga = &g[a * dh..][..dh];
                let t: f64 = ga.iter().zip(v).map(|(g, &x)| g * x as f64).sum();
                s += v[a] as f64 * t;
            }
            out[head * n + p] = s.max(0.0).sqrt() as f32;
        }
    }
    out
}

/// Contributions [heads, n, n] of weights [heads, n, n] and value norms [heads, n]: each
/// row A[i, j] ||v_j W_O^h|| normalised to sum 1 (a row of zeros stays zero).
pub fn contributions(weights: &[f32], norms: &[f32], heads: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; heads * n * n];
    for h in 0..heads {
        let vn = &norms[h * n..][..n];
        for i in 0..n {
            let a = &weights[(h * n + i) * n..][..n];
            let row = &mut out[(h * n + i) * n..][..n];
            let mut sum = 0.0f64;
            for ((o, &w), &v) in row.iter_mut().zip(a).zip(vn) {
                *o = w * v;
                sum += *o as f64;
            }
            if sum > 0.0 {
                row.iter_mut().for_each(|o| *o = (*o as f64 / sum) as f32);
            }
        }
    }
    out
}

/// One pass of the model over `ids` and every layer's contributions [heads, n, n]
/// (what `model run --contrib` writes and the app's model and tokens views show).
pub fn contributions_pass(
    cfg: &ModelConfig,
    w: &crate::model::weights::Weights,
    ids: &[u32],
    threads: Option<usize>,
) -> crate::error::Result<Vec<Vec<f32>>> {
    use crate::model::Site;
    use crate::model::forward::{ForwardOptions, LogitRows, check_weight_budget, forward_hooked};
    let n = ids.len();
    check_weight_budget(cfg, n, "contributions")?;
    let opts = ForwardOptions {
        threads,
        keep_attention: true,
        logits: LogitRows::Last,
        ..ForwardOptions::default()
    };
    let norms = std::cell::RefCell::new(Vec::new());
    let mut hook = |l: usize, site: Site, a: &mut [f32]| -> crate::error::Result<()> {
        if site == Site::Values {
            *norms.borrow_mut() = value_norms(cfg, &w.layers[l], a, n);
        }
        Ok(())
    };
    let mut out = Vec::with_capacity(cfg.layers);
    forward_hooked(
        cfg,
        w,
        ids,
        &opts,
        |_, attn| {
            out.push(contributions(attn, &norms.borrow(), cfg.heads, n));
            Ok(())
        },
        &mut hook,
    )?;
    Ok(out)
}
