//! Attribution, the lens, contributions and composition on tiny random-weight models,
//! against independent float64 computations: the f64 reference forward pass of
//! `model_common` (llama-, gpt2- and bert-style configs) and the small checkpoints of
//! `tests/data/models/arch` (gemma2, gemma3 with norms after attention, gpt_neox with its
//! parallel residual, qwen2 with biases).

use std::path::Path;

use attnviz::model::attribution::attribute;
use attnviz::model::composition::composition_scores;
use attnviz::model::config::ModelConfig;
use attnviz::model::contrib::contributions_pass;
use attnviz::model::forward::{ForwardOptions, forward};
use attnviz::model::lens::logit_lens;
use attnviz::model::load;
use attnviz::model::weights::Weights;

use crate::model_common::{RefOpts, bert, gpt2, llama, reference};

/// Parts add up to the total, and the total is the reference's logit difference.
fn check_attribution(cfg: &ModelConfig, w: &Weights, ids: &[u32], logits: &[f64], what: &str) {
    let v = cfg.vocab;
    for pos in [0, ids.len() - 1] {
        for (t, fo) in [(3u32, Some(7u32)), (5, None)] {
            let a = attribute(cfg, w, ids, pos, t, fo, Some(1)).unwrap();
            let want =
                logits[pos * v + t as usize] - fo.map_or(0.0, |f| logits[pos * v + f as usize]);
            assert!(
                (a.total - want).abs() <= 1e-4 * want.abs().max(1.0),
                "{what} pos {pos}: total {} vs reference {want}",
                a.total
            );
            assert!(
                (a.sum() - a.total).abs() <= 1e-3 * a.total.abs() + 1e-3,
                "{what} pos {pos}: parts add to {} but the total is {}",
                a.sum(),
                a.total
            );
            // A part that is not zero: the parts are not all folded into one.
            assert!(
                a.heads.iter().flatten().any(|&x| x.abs() > 1e-6),
                "{what}: heads all zero"
            );
        }
    }
}

#[test]
fn llama_and_gpt2_attribution_adds_up_to_the_f64_reference_logits() {
    for (name, (cfg, w)) in [("llama", llama(3)), ("gpt2", gpt2(4))] {
        let ids = [1u32, 5, 9, 2, 5, 9, 11];
        let r = reference(&cfg, &w, &ids, &RefOpts::default());
        check_attribution(&cfg, &w, &ids, r.logits.as_ref().unwrap(), name);
    }
}

#[test]
fn the_lens_last_layer_is_the_models_own_output() {
    for (name, (cfg, w)) in [("llama", llama(5)), ("gpt2", gpt2(6))] {
        let ids = [1u32, 4, 8, 2, 4];
        let r = reference(&cfg, &w, &ids, &RefOpts::default());
        let logits = r.logits.unwrap();
        let cells = logit_lens(&cfg, &w, &ids, 3, Some(4), Some(1)).unwrap();
        assert_eq!(cells.len(), cfg.layers + 1);
        let v = cfg.vocab;
        for (p, c) in cells[cfg.layers].iter().enumerate() {
            let row = &logits[p * v..][..v];
            let best = (0..v).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
            assert_eq!(c.top[0].id as usize, best, "{name} pos {p}");
            let lse = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
            let z: f64 = row.iter().map(|x| (x - lse).exp()).sum();
            let p_best = (row[best] - lse).exp() / z;
            assert!((c.top[0].prob - p_best).abs() < 1e-5, "{name} pos {p} prob");
            let (rank, p4) = c.target.unwrap();
            let want_rank = row.iter().filter(|&&x| x > row[4]).count();
            assert_eq!(rank, want_rank, "{name} pos {p}: rank of token 4");
            assert!((p4 - (row[4] - lse).exp() / z).abs() < 1e-5);
        }
    }
}

#[test]
fn bert_attribution_is_refused_and_contributions_rows_sum_to_one() {
    let (cfg, w) = bert(7);
    let ids = [1u32, 6, 3, 9, 2];
    let err = attribute(&cfg, &w, &ids, 4, 3, None, Some(1)).unwrap_err();
    assert!(err.to_string().contains("post-norm"), "{err}");
    let c = contributions_pass(&cfg, &w, &ids, Some(1)).unwrap();
    let n = ids.len();
    for layer in &c {
        for row in layer.chunks(n) {
            let s: f32 = row.iter().sum();
            assert!((s - 1.0).abs() < 1e-5, "row sums to {s}");
        }
    }
}

/// Contributions from the f64 reference: A[h,i,j] ||v_j W_O^h|| normalised per row, in
/// layer 0 where the values are the embeddings' (normed) projection.
#[test]
fn llama_layer0_contributions_match_an_f64_computation() {
    let (cfg, w) = llama(8);
    let ids = [2u32, 7, 7, 1, 30];
    let (n, d, dh) = (ids.len(), cfg.d_model, cfg.d_head);
    let r = reference(&cfg, &w, &ids, &RefOpts::default());
    let got = contributions_pass(&cfg, &w, &ids, Some(1)).unwrap();
    let emb = w.tok_embed.to_f32();
    let lw = &w.layers[0];
    let (wv, wo) = (lw.wv.w.to_f32(), lw.wo.w.to_f32());
    let normed: Vec<Vec<f64>> = ids
        .iter()
        .map(|&id| {
            let x: Vec<f64> = emb[id as usize * d..][..d]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let rms = (x.iter().map(|v| v * v).sum::<f64>() / d as f64 + cfg.norm_eps).sqrt();
            x.iter()
                .zip(&lw.attn_norm.w)
                .map(|(v, &s)| v / rms * s as f64)
                .collect()
        })
        .collect();
    let hd = cfg.heads * dh;
    for h in 0..cfg.heads {
        let g = cfg.kv_head_for(h);
        let vnorm: Vec<f64> = normed
            .iter()
            .map(|x| {
                let v: Vec<f64> = (0..dh)
                    .map(|c| (0..d).map(|i| wv[(g * dh + c) * d + i] as f64 * x[i]).sum())
                    .collect();
                (0..d)
                    .map(|j| {
                        (0..dh)
                            .map(|c| wo[j * hd + h * dh + c] as f64 * v[c])
                            .sum::<f64>()
                    })
                    .map(|y| y * y)
                    .sum::<f64>()
                    .sqrt()
            })
            .collect();
        for i in 0..n {
            let a = &r.attention[0][(h * n + i) * n..][..n];
            let raw: Vec<f64> = a.iter().zip(&vnorm).map(|(a, v)| a * v).collect();
            let s: f64 = raw.iter().sum();
            for j in 0..n {
                let g = got[0][(h * n + i) * n + j] as f64;
                assert!(
                    (g - raw[j] / s).abs() < 1e-4,
                    "head {h} [{i},{j}]: {g} vs {}",
                    raw[j] / s
                );
            }
        }
    }
}

/// ||W_A W_B||_F / (||W_A||_F ||W_B||_F) with the full d x d matrices multiplied out in f64.
#[test]
fn composition_scores_match_full_matrix_products() {
    let (cfg, w) = llama(9);
    let (d, dh) = (cfg.d_model, cfg.d_head);
    let got = composition_scores(&cfg, &w, &[0, 1], 1).unwrap();
    assert_eq!(got.len(), cfg.heads * cfg.heads);
    // [d, dh] factor of rows r0.. of a linear [out, d], norm weight folded in.
    let cols = |m: &[f32], r0: usize, s: &[f32]| -> Vec<Vec<f64>> {
        (0..d)
            .map(|i| {
                (0..dh)
                    .map(|c| m[(r0 + c) * d + i] as f64 * s[i] as f64)
                    .collect()
            })
            .collect()
    };
    let mul = |a: &[Vec<f64>], b: &[Vec<f64>]| -> Vec<Vec<f64>> {
        a.iter()
            .map(|r| {
                (0..b[0].len())
                    .map(|j| r.iter().zip(b).map(|(x, row)| x * row[j]).sum())
                    .collect()
            })
            .collect()
    };
    let tr = |a: &[Vec<f64>]| -> Vec<Vec<f64>> {
        (0..a[0].len())
            .map(|j| a.iter().map(|r| r[j]).collect())
            .collect()
    };
    let fro = |a: &[Vec<f64>]| a.iter().flatten().map(|x| x * x).sum::<f64>().sqrt();
    let head = |l: usize, h: usize| {
        let lw = &w.layers[l];
        let s = &lw.attn_norm.w;
        let g = cfg.kv_head_for(h);
        let (wq, wk, wv, wo) = (
            lw.wq.w.to_f32(),
            lw.wk.w.to_f32(),
            lw.wv.w.to_f32(),
            lw.wo.w.to_f32(),
        );
        let hd = cfg.heads * dh;
        let o: Vec<Vec<f64>> = (0..dh)
            .map(|c| (0..d).map(|j| wo[j * hd + h * dh + c] as f64).collect())
            .collect();
        let (q, k, v) = (
            cols(&wq, h * dh, s),
            cols(&wk, g * dh, s),
            cols(&wv, g * dh, s),
        );
        (mul(&q, &tr(&k)), mul(&v, &o))
    };
    for c in &got {
        let (_, wa) = head(c.layer_a, c.head_a);
        let (qk, ov) = head(c.layer_b, c.head_b);
        let score = |b: &[Vec<f64>]| fro(&mul(&wa, b)) / (fro(&wa) * fro(b));
        assert!((c.q - score(&qk)).abs() < 1e-4, "{c:?} q {}", score(&qk));
        assert!((c.k - score(&tr(&qk))).abs() < 1e-4, "{c:?} k");
        assert!((c.v - score(&ov)).abs() < 1e-4, "{c:?} v");
    }
}

/// Gemma 2 and 3 (norms after attention: the frozen-scale treatment), GPT-NeoX (parallel
/// residual), Qwen 2 (biases on Q, K, V): the parts add up to the model's own logit
/// difference from its forward pass (Gemma 2: `capped_total` to its soft-capped logits).
#[test]
fn arch_checkpoints_attribution_adds_up_to_the_forward_logits() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/arch");
    for name in ["gemma2", "gemma3", "gpt_neox", "qwen2", "qwen3", "phi3"] {
        let p = dir.join(name);
        if !p.exists() {
            eprintln!("skipped {name}: {} is not there", p.display());
            continue;
        }
        let m = load(p.to_str().unwrap()).unwrap();
        let (cfg, w) = (&m.config, &m.weights);
        let ids: Vec<u32> = [3u32, 17, 29, 5, 17, 29]
            .iter()
            .map(|&i| i % cfg.vocab as u32)
            .collect();
        let out = forward(cfg, w, &ids, &ForwardOptions::default()).unwrap();
        let logits = out.logits.unwrap();
        let v = cfg.vocab;
        let pos = ids.len() - 1;
        let (t, fo) = (1u32, 2u32);
        let a = attribute(cfg, w, &ids, pos, t, Some(fo), Some(1)).unwrap();
        let own = (logits[pos * v + t as usize] - logits[pos * v + fo as usize]) as f64;
        let total = a.capped_total.unwrap_or(a.total);
        assert!(
            (total - own).abs() <= 1e-4 * own.abs().max(1.0),
            "{name}: total {total} vs the forward's {own}"
        );
        assert!(
            (a.sum() - a.total).abs() <= 1e-3 * a.total.abs() + 1e-3,
            "{name}: parts {} vs total {}",
            a.sum(),
            a.total
        );
        let cells = logit_lens(cfg, w, &ids, 1, None, Some(1)).unwrap();
        for (p, c) in cells[cfg.layers].iter().enumerate() {
            let row = &logits[p * v..][..v];
            let best = (0..v)
                .max_by(|&a, &b| row[a].total_cmp(&row[b]).then(b.cmp(&a)))
                .unwrap();
            assert_eq!(c.top[0].id as usize, best, "{name}: lens layer L pos {p}");
        }
    }
}

/// The app's model session keeps, once asked, every layer's contributions: within the
/// 16-bit storage's half step of `contributions_pass`'s, on a GQA llama and on Gemma 3's
/// sliding-window layers, and still after an ablation runs the model again.
#[test]
fn a_model_session_keeps_the_contributions_of_every_layer_when_asked() {
    use attnviz::model::maps::MAX_ERROR;
    use attnviz::model::session::{Measure, ModelSession};
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/arch");
    for name in ["llama3", "gemma3"] {
        let p = dir.join(format!("{name}.gguf"));
        if !p.exists() {
            eprintln!("skipped {name}: {} is not there", p.display());
            continue;
        }
        let m = load(p.to_str().unwrap()).unwrap();
        let ids: Vec<u32> = [3u32, 17, 29, 5, 17, 29, 8, 3]
            .iter()
            .map(|&i| i % m.config.vocab as u32)
            .collect();
        let want = contributions_pass(&m.config, &m.weights, &ids, Some(1)).unwrap();
        let (layers, heads, n) = (m.config.layers, m.config.heads, ids.len());
        let opts = ForwardOptions {
            threads: Some(1),
            ..ForwardOptions::default()
        };
        let plain = ModelSession::from_ids(m, ids, opts).unwrap();
        assert!(plain.contributions.is_none(), "{name}: kept before asked");
        assert!(plain.maps(Measure::Contributions).is_none());
        let s = plain.with_contributions().unwrap();
        assert_eq!(s.attention, plain.attention, "{name}: the weights changed");
        assert_eq!(
            s.top_next, plain.top_next,
            "{name}: the predictions changed"
        );
        let check = |s: &ModelSession, what: &str| {
            let c = s.maps(Measure::Contributions).expect("contributions kept");
            assert_eq!(c.layers(), layers);
            for (l, want_l) in want.iter().enumerate() {
                for h in 0..heads {
                    let got = c.head(l, h);
                    for (x, (&g, &w)) in got.iter().zip(&want_l[h * n * n..][..n * n]).enumerate() {
                        assert!(
                            (g - w).abs() <= MAX_ERROR + 1e-6,
                            "{name} {what}: layer {l} head {h} cell ({}, {}): {g} vs {w}",
                            x / n,
                            x % n
                        );
                    }
                }
            }
        };
        check(&s, "kept");
        // The contributions differ from the weights (else the check shows nothing).
        let c = s.maps(Measure::Contributions).unwrap();
        assert!(
            (0..heads).any(|h| (c.head(0, h).iter())
                .zip(s.attention.head(0, h).iter())
                .any(|(a, b)| (a - b).abs() > 1e-3)),
            "{name}: contributions equal the weights"
        );
        // An ablation keeps them; the ablated head's are what it would add.
        let ablated = s
            .intervened(ForwardOptions {
                ablate: vec![(layers - 1, 0)],
                ..s.options.clone()
            })
            .unwrap();
        check(&ablated, "after ablating the last layer's head 1");
    }
}
