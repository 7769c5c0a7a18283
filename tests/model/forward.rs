//! The f32 forward pass against the independent f64 reference of `model_common`, on
//! random tiny models of every architecture, sizes that are no multiple of a vector width.

use crate::model_common;

use attnviz::engine::config::MaskKind;
use attnviz::model::{
    ForwardOptions, LogitRows, ModelConfig, Weights, forward, forward_with, token_loss, top_k,
};
use model_common::{RefMask, RefOpts, assert_close, reference};

const N: usize = 13;
const TOL: f64 = 1e-4;

fn ids(cfg: &ModelConfig, seed: u64) -> Vec<u32> {
    model_common::Gen::new(seed).ids(N, cfg.vocab)
}

/// Run both and compare logits, hidden states and every layer's weights.
fn check(
    what: &str,
    cfg: &ModelConfig,
    w: &Weights,
    ids: &[u32],
    opts: &ForwardOptions,
    r: &RefOpts,
) {
    let got = forward(cfg, w, ids, opts).unwrap();
    let want = reference(cfg, w, ids, r);
    match (&got.logits, &want.logits) {
        (Some(g), Some(wn)) => assert_close(&format!("{what} logits"), g, wn, TOL),
        (None, None) => {}
        _ => panic!("{what}: logits present in one and not the other"),
    }
    assert_close(&format!("{what} hidden"), &got.hidden, &want.hidden, TOL);
    for (l, (g, wn)) in got.attention.iter().zip(&want.attention).enumerate() {
        assert_close(&format!("{what} attention layer {l}"), g, wn, TOL);
    }
}

fn opts() -> ForwardOptions {
    ForwardOptions {
        threads: Some(1),
        ..ForwardOptions::default()
    }
}

#[test]
fn llama_gqa_rotate_half_matches_reference() {
    let (cfg, w) = model_common::llama(1);
    check(
        "llama",
        &cfg,
        &w,
        &ids(&cfg, 2),
        &opts(),
        &RefOpts::default(),
    );
}

#[test]
fn llama_permuted_interleaved_weights_give_the_same_model() {
    let (cfg, w) = model_common::llama(3);
    let (cfg_i, w_i) = model_common::to_interleaved(&cfg, &w);
    let ids = ids(&cfg, 4);
    check(
        "llama interleaved",
        &cfg_i,
        &w_i,
        &ids,
        &opts(),
        &RefOpts::default(),
    );
    let a = forward(&cfg, &w, &ids, &opts()).unwrap();
    let b = forward(&cfg_i, &w_i, &ids, &opts()).unwrap();
    let want: Vec<f64> = a.logits.unwrap().iter().map(|&v| v as f64).collect();
    assert_close(
        "half vs interleaved logits",
        &b.logits.unwrap(),
        &want,
        1e-5,
    );
}

#[test]
fn bert_bidirectional_post_norm_matches_reference() {
    let (cfg, w) = model_common::bert(5);
    check(
        "bert",
        &cfg,
        &w,
        &ids(&cfg, 6),
        &opts(),
        &RefOpts::default(),
    );
    let out = forward(&cfg, &w, &ids(&cfg, 6), &opts()).unwrap();
    assert!(
        out.logits.is_none(),
        "an encoder without LM head has no logits"
    );
    // bidirectional: the first query sees the last key
    assert!(out.attention[0][N - 1] > 0.0);
}

#[test]
fn gpt2_pre_norm_tied_head_matches_reference() {
    let (cfg, w) = model_common::gpt2(7);
    check(
        "gpt2",
        &cfg,
        &w,
        &ids(&cfg, 8),
        &opts(),
        &RefOpts::default(),
    );
}

#[test]
fn two_threads_agree_with_one() {
    let (cfg, w) = model_common::llama(9);
    let ids = ids(&cfg, 10);
    let one = forward(&cfg, &w, &ids, &opts()).unwrap();
    let two = forward(
        &cfg,
        &w,
        &ids,
        &ForwardOptions {
            threads: Some(2),
            ..ForwardOptions::default()
        },
    )
    .unwrap();
    let want: Vec<f64> = one.logits.unwrap().iter().map(|&v| v as f64).collect();
    assert_close("2 threads", &two.logits.unwrap(), &want, 1e-5);
}

#[test]
fn attention_rows_sum_to_one_and_respect_the_mask() {
    for (cfg, w) in [
        model_common::llama(11),
        model_common::bert(12),
        model_common::gpt2(13),
    ] {
        let out = forward(&cfg, &w, &ids(&cfg, 14), &opts()).unwrap();
        assert_eq!(out.attention.len(), cfg.layers);
        for a in &out.attention {
            assert_eq!(a.len(), cfg.heads * N * N);
            for (r, row) in a.chunks_exact(N).enumerate() {
                let s: f64 = row.iter().map(|&v| v as f64).sum();
                assert!((s - 1.0).abs() < 1e-5, "{:?} row {r} sums to {s}", cfg.arch);
                if cfg.causal {
                    let i = r % N;
                    assert!(row[i + 1..].iter().all(|&v| v == 0.0), "future key seen");
                }
            }
        }
    }
}

#[test]
fn ablating_heads_equals_the_reference_with_those_outputs_zeroed() {
    let (cfg, w) = model_common::llama(15);
    let ids = ids(&cfg, 16);
    let ablate = vec![(0, 1), (1, 3)];
    let o = ForwardOptions {
        ablate: ablate.clone(),
        ..opts()
    };
    check(
        "llama ablate",
        &cfg,
        &w,
        &ids,
        &o,
        &RefOpts {
            ablate: ablate.clone(),
            ..RefOpts::default()
        },
    );
    let before = forward(&cfg, &w, &ids, &opts()).unwrap().logits.unwrap();
    let after = forward(&cfg, &w, &ids, &o).unwrap().logits.unwrap();
    assert_ne!(before, after, "ablation changed nothing");

    let (cfg, w) = model_common::gpt2(17);
    let ids = model_common::Gen::new(18).ids(N, cfg.vocab);
    let o = ForwardOptions {
        ablate: vec![(1, 0)],
        ..opts()
    };
    check(
        "gpt2 ablate",
        &cfg,
        &w,
        &ids,
        &o,
        &RefOpts {
            ablate: vec![(1, 0)],
            ..RefOpts::default()
        },
    );
}

#[test]
fn no_pe_drops_rope_and_learned_positions() {
    let no_pe = ForwardOptions {
        no_pe: true,
        ..opts()
    };
    let r = RefOpts {
        no_pe: true,
        ..RefOpts::default()
    };
    for (name, (cfg, w)) in [
        ("llama", model_common::llama(19)),
        ("gpt2", model_common::gpt2(20)),
        ("bert", model_common::bert(21)),
    ] {
        let ids = ids(&cfg, 22);
        check(&format!("{name} no-pe"), &cfg, &w, &ids, &no_pe, &r);
        assert_ne!(
            forward(&cfg, &w, &ids, &no_pe).unwrap().hidden,
            forward(&cfg, &w, &ids, &opts()).unwrap().hidden,
            "{name}: --no-pe changed nothing"
        );
    }
}

#[test]
fn rope_base_replaces_the_models_base() {
    let (cfg, w) = model_common::llama(23);
    let ids = ids(&cfg, 24);
    let o = ForwardOptions {
        rope_base: Some(10000.0),
        ..opts()
    };
    check(
        "llama rope-base",
        &cfg,
        &w,
        &ids,
        &o,
        &RefOpts {
            rope_base: Some(10000.0),
            ..RefOpts::default()
        },
    );
    let (cfg_g, w_g) = model_common::gpt2(25);
    let err = forward(&cfg_g, &w_g, &ids[..3], &o).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("learned positions"), "{err}");
}

#[test]
fn mask_override_window_and_none() {
    let (cfg, w) = model_common::llama(26);
    let ids = ids(&cfg, 27);
    let window = ForwardOptions {
        mask: Some(MaskKind::Window(3)),
        ..opts()
    };
    check(
        "llama window:3",
        &cfg,
        &w,
        &ids,
        &window,
        &RefOpts {
            mask: Some(RefMask::Window(3)),
            ..RefOpts::default()
        },
    );
    let sinks = ForwardOptions {
        mask: Some(MaskKind::WindowSinks {
            window: 3,
            sinks: 2,
        }),
        ..opts()
    };
    check(
        "llama window:3,2",
        &cfg,
        &w,
        &ids,
        &sinks,
        &RefOpts {
            mask: Some(RefMask::WindowSinks(3, 2)),
            ..RefOpts::default()
        },
    );
    let none = ForwardOptions {
        mask: Some(MaskKind::None),
        ..opts()
    };
    check(
        "llama mask none",
        &cfg,
        &w,
        &ids,
        &none,
        &RefOpts {
            mask: Some(RefMask::None),
            ..RefOpts::default()
        },
    );
    let (cfg, w) = model_common::bert(28);
    let causal = ForwardOptions {
        mask: Some(MaskKind::Causal),
        ..opts()
    };
    check(
        "bert causal",
        &cfg,
        &w,
        &ids[..N]
            .iter()
            .map(|&i| i % cfg.vocab as u32)
            .collect::<Vec<_>>(),
        &causal,
        &RefOpts {
            mask: Some(RefMask::Causal),
            ..RefOpts::default()
        },
    );
}

#[test]
fn last_row_logits_and_no_attention() {
    let (cfg, w) = model_common::gpt2(29);
    let ids = ids(&cfg, 30);
    let all = forward(&cfg, &w, &ids, &opts()).unwrap().logits.unwrap();
    let o = ForwardOptions {
        logits: LogitRows::Last,
        keep_attention: false,
        ..opts()
    };
    let last = forward(&cfg, &w, &ids, &o).unwrap();
    // the same row; m = 1 takes gemm's matrix-vector path, so the last bits may differ
    let want: Vec<f64> = all[(N - 1) * cfg.vocab..]
        .iter()
        .map(|&v| v as f64)
        .collect();
    assert_close("last row", last.logits.as_deref().unwrap(), &want, 1e-6);
    assert!(last.attention.iter().all(|a| a.is_empty()));
}

#[test]
fn layer_trace_holds_every_stage_consistent_with_the_output() {
    let (cfg, w) = model_common::llama(31);
    let ids = ids(&cfg, 32);
    let o = ForwardOptions {
        trace_layer: Some(1),
        ..opts()
    };
    let out = forward(&cfg, &w, &ids, &o).unwrap();
    let want = reference(&cfg, &w, &ids, &RefOpts::default());
    let tr = out.layer_trace.unwrap();
    assert_eq!(tr.layer, 1);
    assert_eq!(
        tr.names(),
        [
            "block_input",
            "attn_norm",
            "q",
            "k",
            "v",
            "q_rope",
            "k_rope",
            "scores",
            "masked_scores",
            "weights",
            "head_out",
            "concat",
            "attn_out",
            "attn_residual",
            "mlp_norm",
            "mlp_pre_act",
            "mlp_up",
            "mlp_hidden",
            "mlp_out",
            "mlp_residual",
            "block_output"
        ]
    );
    assert_close(
        "trace block_input",
        &tr.get("block_input").unwrap().data,
        &want.block_out[0],
        TOL,
    );
    assert_close(
        "trace block_output",
        &tr.get("block_output").unwrap().data,
        &want.block_out[1],
        TOL,
    );
    assert_eq!(tr.get("weights").unwrap().data, out.attention[1]);
    assert_eq!(tr.get("q").unwrap().shape, [cfg.heads, N, cfg.d_head]);
    assert_eq!(
        tr.get("k_rope").unwrap().shape,
        [cfg.kv_heads, N, cfg.d_head]
    );
    let masked = &tr.get("masked_scores").unwrap().data;
    assert_eq!(masked[1], f32::NEG_INFINITY, "query 0 must not see key 1");

    let (cfg, w) = model_common::bert(33);
    let ids: Vec<u32> = ids.iter().map(|&i| i % cfg.vocab as u32).collect();
    let out = forward(
        &cfg,
        &w,
        &ids,
        &ForwardOptions {
            trace_layer: Some(0),
            ..opts()
        },
    )
    .unwrap();
    let names = out.layer_trace.unwrap().names();
    assert_eq!(
        names,
        [
            "block_input",
            "q",
            "k",
            "v",
            "scores",
            "masked_scores",
            "weights",
            "head_out",
            "concat",
            "attn_out",
            "attn_residual",
            "attn_norm",
            "mlp_pre_act",
            "mlp_hidden",
            "mlp_out",
            "mlp_residual",
            "mlp_norm",
            "block_output"
        ]
    );
}

#[test]
fn loss_and_top_k_agree_with_reference_logits() {
    let (cfg, w) = model_common::llama(34);
    let ids = ids(&cfg, 35);
    let logits = forward(&cfg, &w, &ids, &opts()).unwrap().logits.unwrap();
    let want = reference(&cfg, &w, &ids, &RefOpts::default())
        .logits
        .unwrap();
    let loss = token_loss(&logits, cfg.vocab, &ids);
    assert_eq!(loss.len(), N - 1);
    for (i, l) in loss.iter().enumerate() {
        let row = &want[i * cfg.vocab..][..cfg.vocab];
        let z: f64 = row.iter().map(|v| v.exp()).sum();
        let direct = -(row[ids[i + 1] as usize].exp() / z).ln();
        assert!((l - direct).abs() < 1e-4, "loss {i}: {l} vs {direct}");
    }
    let last = &logits[(N - 1) * cfg.vocab..];
    let top = top_k(last, 3);
    let mut order: Vec<usize> = (0..cfg.vocab).collect();
    order.sort_by(|&a, &b| last[b].total_cmp(&last[a]));
    assert_eq!(
        top.iter().map(|t| t.id as usize).collect::<Vec<_>>(),
        order[..3]
    );
}

#[test]
fn bad_input_is_a_usage_error_naming_the_problem() {
    let (cfg, w) = model_common::gpt2(36);
    let err = forward(&cfg, &w, &[1, 41, 2], &opts()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let msg = err.to_string();
    assert!(
        msg.contains("41") && msg.contains("vocabulary has 41"),
        "{msg}"
    );

    let long = vec![1u32; cfg.context + 1];
    let msg = forward(&cfg, &w, &long, &opts()).unwrap_err().to_string();
    assert!(
        msg.contains("17 tokens") && msg.contains("16 rows"),
        "{msg}"
    );
    // without positions the table is not read, so the length is fine
    assert!(
        forward(
            &cfg,
            &w,
            &long,
            &ForwardOptions {
                no_pe: true,
                ..opts()
            }
        )
        .is_ok()
    );

    let err = forward(&cfg, &w, &[], &opts()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("no tokens"));

    let err = forward(
        &cfg,
        &w,
        &[1],
        &ForwardOptions {
            ablate: vec![(2, 0)],
            ..opts()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("--ablate 2.0"), "{err}");

    let mut w_bad = w.clone();
    w_bad.layers[1].wq.w.as_f32_mut().unwrap().pop();
    let err = forward(&cfg, &w_bad, &[1], &opts()).unwrap_err();
    assert!(err.to_string().contains("layer 1 wq"), "{err}");
}

#[test]
fn long_input_spans_several_kernel_tiles() {
    // 150 tokens: three query blocks of 64 and two key blocks of 128 in the kernel.
    let (cfg, w) = model_common::llama(37);
    let ids = model_common::Gen::new(38).ids(150, cfg.vocab);
    let two = ForwardOptions {
        threads: Some(2),
        ..ForwardOptions::default()
    };
    check("llama n=150", &cfg, &w, &ids, &two, &RefOpts::default());
    let window = ForwardOptions {
        mask: Some(MaskKind::Window(70)),
        ..two
    };
    let r = RefOpts {
        mask: Some(RefMask::Window(70)),
        ..RefOpts::default()
    };
    check("llama n=150 window:70", &cfg, &w, &ids, &window, &r);
}

/// `LogitRows::LastAndLoss` computes the LM head a few rows at a time: the same losses and
/// last row as all of [n, vocab] at once, for lengths around its 64-row chunks, and the
/// sink of `forward_with` sees every layer's weights that `forward` keeps.
#[test]
fn losses_by_chunks_and_a_layer_sink_equal_the_whole_pass() {
    let (cfg, w) = model_common::llama(29);
    for n in [1usize, 2, 64, 65, 66, 130] {
        let ids: Vec<u32> = (0..n as u32)
            .map(|i| (i * 7 + 3) % cfg.vocab as u32)
            .collect();
        let whole = forward(&cfg, &w, &ids, &opts()).unwrap();
        let logits = whole.logits.unwrap();
        let want = token_loss(&logits, cfg.vocab, &ids);
        let o = ForwardOptions {
            logits: LogitRows::LastAndLoss,
            ..opts()
        };
        let mut seen = Vec::new();
        let part = forward_with(&cfg, &w, &ids, &o, |l, a| {
            seen.push((l, a.to_vec()));
            Ok(())
        })
        .unwrap();
        let got = part.token_loss.unwrap();
        assert_eq!(got.len(), n - 1, "n {n}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((g - w).abs() < 1e-5, "n {n} token {i}: {g} vs {w}");
        }
        let last: Vec<f64> = logits[(n - 1) * cfg.vocab..]
            .iter()
            .map(|&v| v as f64)
            .collect();
        assert_close("last row", part.logits.as_deref().unwrap(), &last, 1e-6);
        assert_eq!(seen.len(), cfg.layers);
        for ((l, a), kept) in seen.iter().zip(&whole.attention) {
            assert_eq!(a, kept, "layer {l}");
        }
        assert!(part.attention.iter().all(Vec::is_empty));
    }
}

/// Hooks at every site: reading changes nothing; the residual stream entering each block
/// is the one before plus the attention and MLP outputs; zeroing a head's output is the
/// same as ablating it; a pass resumed from a block's input gives the whole pass's logits.
#[test]
fn hooks_read_and_replace_activations_and_a_pass_resumes_from_any_layer() {
    use attnviz::model::{Site, forward_from, forward_hooked};
    for (name, (cfg, w)) in [
        ("llama", model_common::llama(31)),
        ("gpt2", model_common::gpt2(32)),
    ] {
        let ids = ids(&cfg, 33);
        let whole = forward(&cfg, &w, &ids, &opts()).unwrap();
        let mut resid = vec![Vec::new(); cfg.layers + 1];
        let mut parts = vec![(Vec::new(), Vec::new()); cfg.layers];
        let mut sites = Vec::new();
        let read = forward_hooked(&cfg, &w, &ids, &opts(), |_, _| Ok(()), &mut |l, site, a| {
            sites.push((l, site));
            match site {
                Site::ResidPre => resid[l] = a.to_vec(),
                Site::AttnOut => parts[l].0 = a.to_vec(),
                Site::MlpOut => parts[l].1 = a.to_vec(),
                _ => {}
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(
            read.logits, whole.logits,
            "{name}: reading changed the pass"
        );
        assert_eq!(sites.len(), cfg.layers * 5 + 1, "{name}: {sites:?}");
        for l in 0..cfg.layers {
            let sum: Vec<f64> = resid[l]
                .iter()
                .zip(&parts[l].0)
                .zip(&parts[l].1)
                .map(|((&x, &a), &m)| x as f64 + a as f64 + m as f64)
                .collect();
            assert_close(
                &format!("{name} residual after block {l}"),
                &resid[l + 1],
                &sum,
                1e-5,
            );
        }
        for (l, x) in resid.iter().enumerate() {
            let resumed =
                forward_from(&cfg, &w, &ids, x.clone(), l, &opts(), &mut |_, _, _| Ok(())).unwrap();
            assert_eq!(resumed.logits, whole.logits, "{name}: resumed at block {l}");
        }
        let (layer, head) = (1, 1);
        let ablated = forward(
            &cfg,
            &w,
            &ids,
            &ForwardOptions {
                ablate: vec![(layer, head)],
                ..opts()
            },
        )
        .unwrap();
        let dh = cfg.d_head;
        let zeroed = forward_hooked(&cfg, &w, &ids, &opts(), |_, _| Ok(()), &mut |l, site, a| {
            if l == layer && site == Site::HeadOut {
                for row in a.chunks_exact_mut(cfg.heads * dh) {
                    row[head * dh..][..dh].fill(0.0);
                }
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(
            zeroed.logits, ablated.logits,
            "{name}: zeroed head vs ablation"
        );
        assert_ne!(zeroed.logits, whole.logits, "{name}: the head did nothing");
    }
}
