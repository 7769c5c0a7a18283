//! Activation patching against a plain computation: for every site, one whole forward pass
//! of the corrupt text with that activation overwritten by the clean run's (through the
//! forward pass's hooks), scored the same way. The sweep's shortcuts (resuming at the
//! patched layer and position from the corrupt run's cache, skipping sites whose values
//! are equal, the blocks' weights dequantized once) must give the same logit differences.
//! Also the identities patching must keep: the clean and corrupt logit differences are
//! the f64 reference's; patching the residual stream where the texts differ, before the
//! first block, restores the clean run exactly; patching where they agree changes nothing.

use std::path::Path;

use attnviz::model::config::ModelConfig;
use attnviz::model::forward::{ForwardOptions, forward_hooked};
use attnviz::model::load;
use attnviz::model::patching::{LogitPair, PatchWhat, patch_sweep};
use attnviz::model::weights::Weights;
use attnviz::model::{Site, forward};

use crate::model_common::{RefOpts, gpt2, llama, reference};

const WHAT: [PatchWhat; 4] = [
    PatchWhat::Resid,
    PatchWhat::Heads,
    PatchWhat::AttnOut,
    PatchWhat::MlpOut,
];

fn opts() -> ForwardOptions {
    ForwardOptions {
        threads: Some(1),
        ..ForwardOptions::default()
    }
}

fn site(what: PatchWhat) -> Site {
    match what {
        PatchWhat::Resid => Site::ResidPre,
        PatchWhat::Heads => Site::HeadOut,
        PatchWhat::AttnOut => Site::AttnOut,
        PatchWhat::MlpOut => Site::MlpOut,
    }
}

fn ld(cfg: &ModelConfig, logits: &[f32], n: usize, pair: LogitPair) -> f64 {
    let row = &logits[(n - 1) * cfg.vocab..][..cfg.vocab];
    row[pair.target as usize] as f64 - row[pair.foil as usize] as f64
}

/// Every layer's activations at `s` in a plain pass over `ids`.
fn record(cfg: &ModelConfig, w: &Weights, ids: &[u32], s: Site) -> Vec<Vec<f32>> {
    let mut rec = vec![Vec::new(); cfg.layers];
    forward_hooked(cfg, w, ids, &opts(), |_, _| Ok(()), &mut |l, at, a| {
        if at == s && l < cfg.layers {
            rec[l] = a.to_vec();
        }
        Ok(())
    })
    .unwrap();
    rec
}

/// The logit difference of the corrupt text with column `c` of layer `l` patched from
/// `clean_rec`, by a whole forward pass.
#[allow(clippy::too_many_arguments)]
fn plain_patch(
    cfg: &ModelConfig,
    w: &Weights,
    corrupt: &[u32],
    clean_rec: &[Vec<f32>],
    what: PatchWhat,
    l: usize,
    c: usize,
    pair: LogitPair,
) -> f64 {
    let (d, dh, hw) = (cfg.d_model, cfg.d_head, cfg.heads * cfg.d_head);
    let s = site(what);
    let out = forward_hooked(
        cfg,
        w,
        corrupt,
        &opts(),
        |_, _| Ok(()),
        &mut |layer, at, a| {
            if layer == l && at == s {
                match what {
                    PatchWhat::Heads => {
                        for (row, from) in a.chunks_exact_mut(hw).zip(clean_rec[l].chunks_exact(hw))
                        {
                            row[c * dh..][..dh].copy_from_slice(&from[c * dh..][..dh]);
                        }
                    }
                    _ => a[c * d..][..d].copy_from_slice(&clean_rec[l][c * d..][..d]),
                }
            }
            Ok(())
        },
    )
    .unwrap();
    ld(cfg, &out.logits.unwrap(), corrupt.len(), pair)
}

/// The sweep of every kind of site against whole patched passes.
fn check_sweep(name: &str, cfg: &ModelConfig, w: &Weights, clean: &[u32], corrupt: &[u32]) {
    let pair = LogitPair {
        target: 3 % cfg.vocab as u32,
        foil: 7 % cfg.vocab as u32,
    };
    for what in WHAT {
        let r = patch_sweep(cfg, w, clean, corrupt, pair, what, Some(1), &mut |_, _| {
            Ok(())
        })
        .unwrap();
        let clean_rec = record(cfg, w, clean, site(what));
        let cols = what.columns(cfg, clean.len());
        assert_eq!(r.rows.len(), cfg.layers, "{name} {what:?}: rows");
        let scale = (r.clean_ld - r.corrupt_ld).abs().max(1.0);
        for l in 0..cfg.layers {
            assert_eq!(r.rows[l].len(), cols, "{name} {what:?} layer {l}: columns");
            for c in 0..cols {
                let want = plain_patch(cfg, w, corrupt, &clean_rec, what, l, c, pair);
                let got = r.patched_ld[l][c];
                assert!(
                    (got - want).abs() <= 1e-4 * scale,
                    "{name} {what:?} layer {l} column {c}: sweep {got}, whole pass {want}"
                );
                let metric = (got - r.corrupt_ld) / (r.clean_ld - r.corrupt_ld);
                assert!(
                    (r.rows[l][c] - metric).abs() <= 1e-9,
                    "{name} {what:?}: metric"
                );
            }
        }
    }
}

#[test]
fn tiny_models_sweep_matches_whole_patched_passes_and_the_f64_reference() {
    for (name, (cfg, w)) in [("llama", llama(41)), ("gpt2", gpt2(42))] {
        let clean = [1u32, 5, 9, 2, 5, 9, 11];
        let mut corrupt = clean;
        corrupt[2] = 13;
        let pair = LogitPair { target: 3, foil: 7 };
        let r = patch_sweep(
            &cfg,
            &w,
            &clean,
            &corrupt,
            pair,
            PatchWhat::Resid,
            Some(2),
            &mut |_, _| Ok(()),
        )
        .unwrap();
        // Clean and corrupt logit differences: the f64 reference's.
        for (ids, got) in [(&clean, r.clean_ld), (&corrupt, r.corrupt_ld)] {
            let logits = reference(&cfg, &w, ids, &RefOpts::default())
                .logits
                .unwrap();
            let row = &logits[(ids.len() - 1) * cfg.vocab..];
            let want = row[3] - row[7];
            assert!(
                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                "{name}: logit difference {got} vs f64 reference {want}"
            );
        }
        // The residual stream entering block 0 differs only at position 2.
        for (p, &m) in r.rows[0].iter().enumerate() {
            let want = if p == 2 { 1.0 } else { 0.0 };
            assert!(
                (m - want).abs() <= 1e-5,
                "{name}: resid patch at layer 0 position {p} gives {m}, not {want}"
            );
        }
        // No position before the first difference can carry it, at any layer.
        for row in &r.rows {
            assert_eq!(
                &row[..2],
                &[0.0, 0.0],
                "{name}: positions before the change"
            );
        }
        check_sweep(name, &cfg, &w, &clean, &corrupt);
    }
}

/// Gemma 3 (norms after attention and the MLP, quantized GGUF), GPT-NeoX (parallel
/// residual) and Qwen 2 (Q, K, V biases): the same agreement.
#[test]
fn arch_checkpoints_sweep_matches_whole_patched_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/models/arch");
    for name in ["gemma3.gguf", "gpt_neox", "qwen2.gguf"] {
        let p = dir.join(name);
        if !p.exists() {
            eprintln!("skipped {name}: {} is not there", p.display());
            continue;
        }
        let m = load(p.to_str().unwrap()).unwrap();
        let (cfg, w) = (&m.config, &m.weights);
        let v = cfg.vocab as u32;
        let clean: Vec<u32> = [3u32, 17, 29, 5, 17, 29].iter().map(|&i| i % v).collect();
        let mut corrupt = clean.clone();
        corrupt[1] = 41 % v;
        let whole = forward(cfg, w, &clean, &opts()).unwrap();
        assert!(whole.logits.is_some());
        check_sweep(name, cfg, w, &clean, &corrupt);
    }
}

#[test]
fn texts_of_different_lengths_or_equal_runs_are_refused() {
    let (cfg, w) = llama(43);
    let pair = LogitPair { target: 3, foil: 7 };
    let e = patch_sweep(
        &cfg,
        &w,
        &[1, 2, 3],
        &[1, 2],
        pair,
        PatchWhat::Resid,
        Some(1),
        &mut |_, _| Ok(()),
    )
    .unwrap_err();
    assert!(e.to_string().contains("same number"), "{e}");
    assert_eq!(e.exit_code(), 2);
    let e = patch_sweep(
        &cfg,
        &w,
        &[1, 2, 3],
        &[1, 2, 3],
        pair,
        PatchWhat::Resid,
        Some(1),
        &mut |_, _| Ok(()),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no effect"), "{e}");
}

#[test]
fn a_kept_sweep_predicts_as_the_runs_it_kept() {
    use attnviz::model::patching::{patch_sweep_keeping, top_tokens};
    for (name, (cfg, w)) in [("llama", llama(43)), ("gpt2", gpt2(44))] {
        let clean = [1u32, 5, 9, 2, 5, 9, 11];
        let mut corrupt = clean;
        corrupt[3] = 13;
        let pair = LogitPair { target: 3, foil: 7 };
        let run = |keep: bool| {
            let f = if keep {
                patch_sweep_keeping
            } else {
                patch_sweep
            };
            f(
                &cfg,
                &w,
                &clean,
                &corrupt,
                pair,
                PatchWhat::Resid,
                Some(2),
                &mut |_, _| Ok(()),
            )
            .unwrap()
        };
        let (kept, plain) = (run(true), run(false));
        assert_eq!(kept.rows, plain.rows, "{name}: keeping changes the metric");
        assert!(plain.hidden.patched.is_empty());
        // The clean and corrupt runs' top tokens are those of a whole forward pass.
        for (ids, hidden) in [
            (&clean, &kept.hidden.clean),
            (&corrupt, &kept.hidden.corrupt),
        ] {
            let logits = forward(&cfg, &w, ids, &opts()).unwrap().logits.unwrap();
            let row = &logits[(ids.len() - 1) * cfg.vocab..];
            let top = top_tokens(&cfg, &w, hidden, 3).unwrap();
            let mut want: Vec<usize> = (0..cfg.vocab).collect();
            want.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
            assert_eq!(
                top.iter().map(|t| t.id as usize).collect::<Vec<_>>(),
                want[..3].to_vec(),
                "{name}"
            );
        }
        // Patching where the texts differ before block 0 is the clean run; before the
        // difference, the corrupt run.
        let at = |p: usize| top_tokens(&cfg, &w, kept.hidden.at(0, p).unwrap(), 2).unwrap();
        let clean_top = top_tokens(&cfg, &w, &kept.hidden.clean, 2).unwrap();
        let corrupt_top = top_tokens(&cfg, &w, &kept.hidden.corrupt, 2).unwrap();
        for (a, b) in at(3).iter().zip(&clean_top) {
            assert_eq!(a.id, b.id, "{name}");
            assert!((a.prob - b.prob).abs() < 1e-5, "{name}");
        }
        assert_eq!(at(1), corrupt_top, "{name}");
    }
}

#[test]
fn every_kept_sites_top_tokens_are_its_own_runs() {
    use attnviz::model::patching::{patch_sweep_keeping, patched_tops, top_tokens};
    let (cfg, w) = llama(45);
    let clean = [1u32, 5, 9, 2, 5, 9, 11];
    let mut corrupt = clean;
    corrupt[4] = 13;
    let pair = LogitPair { target: 3, foil: 7 };
    for what in WHAT {
        let r = patch_sweep_keeping(
            &cfg,
            &w,
            &clean,
            &corrupt,
            pair,
            what,
            Some(2),
            &mut |_, _| Ok(()),
        )
        .unwrap();
        let tops = patched_tops(&cfg, &w, &r.hidden, 4, 2).unwrap();
        assert_eq!(tops.len(), cfg.layers);
        for (l, row) in tops.iter().enumerate() {
            assert_eq!(row.len(), r.rows[l].len());
            for (c, top) in row.iter().enumerate() {
                let one = top_tokens(&cfg, &w, r.hidden.at(l, c).unwrap(), 4).unwrap();
                assert_eq!(
                    top.iter().map(|t| t.id).collect::<Vec<_>>(),
                    one.iter().map(|t| t.id).collect::<Vec<_>>(),
                    "{what:?} layer {l} column {c}"
                );
                // The patched run's own logit difference, from its kept state.
                let ld = {
                    let h = r.hidden.at(l, c).unwrap();
                    let all = top_tokens(&cfg, &w, h, cfg.vocab).unwrap();
                    let logit = |id: u32| all.iter().find(|t| t.id == id).unwrap().logit as f64;
                    logit(pair.target) - logit(pair.foil)
                };
                assert!(
                    (ld - r.patched_ld[l][c]).abs() <= 1e-3 * ld.abs().max(1.0),
                    "{what:?} layer {l} column {c}: {ld} against {}",
                    r.patched_ld[l][c]
                );
            }
        }
    }
}
