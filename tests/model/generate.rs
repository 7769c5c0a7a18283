//! Generation with the KV cache against repeated full forward passes on random tiny models.

use crate::model_common;

use attnviz::engine::config::MaskKind;
use attnviz::model::generate::{Decoder, GenerateOptions, generate};
use attnviz::model::{ForwardOptions, LogitRows, ModelConfig, Weights, forward, top_k};
use model_common::assert_close;

fn fwd_opts() -> ForwardOptions {
    ForwardOptions {
        threads: Some(1),
        ..ForwardOptions::default()
    }
}

/// Greedy tokens by running the whole sequence again for every new token.
fn greedy_by_full_forward(
    cfg: &ModelConfig,
    w: &Weights,
    prompt: &[u32],
    k: usize,
    o: &ForwardOptions,
) -> Vec<u32> {
    let mut seq = prompt.to_vec();
    for _ in 0..k {
        let logits = forward(
            cfg,
            w,
            &seq,
            &ForwardOptions {
                logits: LogitRows::Last,
                ..o.clone()
            },
        )
        .unwrap()
        .logits
        .unwrap();
        seq.push(top_k(&logits, 1)[0].id);
    }
    seq[prompt.len()..].to_vec()
}

#[test]
fn greedy_with_the_cache_equals_repeated_full_forwards() {
    for (name, (cfg, w)) in [
        ("llama", model_common::llama(40)),
        ("gpt2", model_common::gpt2(41)),
    ] {
        let prompt = model_common::Gen::new(42).ids(5, cfg.vocab);
        let opts = GenerateOptions {
            max_tokens: 9,
            forward: ForwardOptions {
                keep_attention: false,
                ..fwd_opts()
            },
            ..GenerateOptions::default()
        };
        let mut streamed = Vec::new();
        let out = generate(&cfg, &w, &prompt, &opts, |s| {
            streamed.push(s.token);
            true
        })
        .unwrap();
        let want = greedy_by_full_forward(&cfg, &w, &prompt, 9, &fwd_opts());
        assert_eq!(out.tokens(), want, "{name}");
        assert_eq!(
            streamed, want,
            "{name}: the callback saw every token in order"
        );
        let last = out.steps.last().unwrap();
        assert_eq!(last.pos, prompt.len() + 8);
        assert_eq!(
            last.cache_bytes,
            2 * cfg.layers * cfg.kv_heads * (prompt.len() + 8) * cfg.d_head * 4
        );
    }
}

#[test]
fn cached_logits_and_attention_rows_match_the_full_forward() {
    let (cfg, w) = model_common::llama(43);
    let (cfg_i, w_i) = model_common::to_interleaved(&cfg, &w);
    cached_matches_full(&cfg, &w);
    cached_matches_full(&cfg_i, &w_i);
    let (cfg, w) = model_common::gpt2(51);
    cached_matches_full(&cfg, &w);
}

fn cached_matches_full(cfg: &ModelConfig, w: &Weights) {
    let cfg = cfg.clone();
    let seq = model_common::Gen::new(44).ids(11, cfg.vocab);
    let full = forward(&cfg, w, &seq, &fwd_opts()).unwrap();
    let mut dec = Decoder::new(&cfg, w, &fwd_opts(), seq.len()).unwrap();
    let n = seq.len();
    let check = |step: attnviz::model::generate::StepOutput, pos: usize| {
        let want: Vec<f64> = full.logits.as_ref().unwrap()[pos * cfg.vocab..][..cfg.vocab]
            .iter()
            .map(|&v| v as f64)
            .collect();
        assert_close(&format!("logits at {pos}"), &step.logits, &want, 1e-4);
        assert_eq!(step.n_k, pos + 1);
        for (l, row) in step.attention.iter().enumerate() {
            let want: Vec<f64> = (0..cfg.heads)
                .flat_map(|h| {
                    full.attention[l][(h * n + pos) * n..][..=pos]
                        .iter()
                        .map(|&v| v as f64)
                })
                .collect();
            assert_close(&format!("layer {l} attention row {pos}"), row, &want, 1e-4);
        }
    };
    // prefill 4, then one at a time
    check(dec.feed(&seq[..4]).unwrap(), 3);
    for pos in 4..n {
        check(dec.feed(&seq[pos..=pos]).unwrap(), pos);
    }
    assert_eq!(dec.cache().len(), n);
    assert!(
        dec.feed(&seq[..1]).is_err(),
        "a full cache refuses more tokens"
    );
}

#[test]
fn interventions_apply_to_every_decode_step() {
    let (cfg, w) = model_common::llama(45);
    let prompt = model_common::Gen::new(46).ids(4, cfg.vocab);
    for o in [
        ForwardOptions {
            ablate: vec![(0, 0), (1, 2)],
            ..fwd_opts()
        },
        ForwardOptions {
            mask: Some(MaskKind::Window(3)),
            ..fwd_opts()
        },
        ForwardOptions {
            rope_base: Some(7.0),
            ..fwd_opts()
        },
        ForwardOptions {
            no_pe: true,
            ..fwd_opts()
        },
    ] {
        let opts = GenerateOptions {
            max_tokens: 7,
            forward: o.clone(),
            ..GenerateOptions::default()
        };
        let got = generate(&cfg, &w, &prompt, &opts, |_| true)
            .unwrap()
            .tokens();
        assert_eq!(
            got,
            greedy_by_full_forward(&cfg, &w, &prompt, 7, &o),
            "{o:?}"
        );
    }
    // a bidirectional mask cannot be decoded token by token
    let opts = GenerateOptions {
        forward: ForwardOptions {
            mask: Some(MaskKind::None),
            ..fwd_opts()
        },
        ..GenerateOptions::default()
    };
    let err = generate(&cfg, &w, &prompt, &opts, |_| true).unwrap_err();
    assert_eq!(err.exit_code(), 2);
}

#[test]
fn seeded_sampling_is_reproducible_and_top_1_is_greedy() {
    let (cfg, w) = model_common::gpt2(47);
    let prompt = [3, 1, 4];
    let sample = |seed: u64, top_k: Option<usize>| {
        let opts = GenerateOptions {
            max_tokens: 10,
            temperature: 1.5,
            top_k,
            seed,
            forward: fwd_opts(),
            ..GenerateOptions::default()
        };
        generate(&cfg, &w, &prompt, &opts, |_| true)
            .unwrap()
            .tokens()
    };
    assert_eq!(sample(9, None), sample(9, None));
    assert!(
        (10..16).any(|s| sample(s, None) != sample(9, None)),
        "the seed changes nothing"
    );
    let greedy = generate(
        &cfg,
        &w,
        &prompt,
        &GenerateOptions {
            max_tokens: 10,
            ..GenerateOptions::default()
        },
        |_| true,
    )
    .unwrap()
    .tokens();
    assert_eq!(sample(5, Some(1)), greedy);
}

#[test]
fn stop_tokens_callback_and_bad_options() {
    let (cfg, w) = model_common::llama(48);
    let prompt = [1, 2, 3];
    let base = GenerateOptions {
        max_tokens: 6,
        ..GenerateOptions::default()
    };
    let all = generate(&cfg, &w, &prompt, &base, |_| true)
        .unwrap()
        .tokens();
    let stop = GenerateOptions {
        stop: vec![all[2]],
        ..base.clone()
    };
    let got = generate(&cfg, &w, &prompt, &stop, |_| true)
        .unwrap()
        .tokens();
    let first_stop = all.iter().position(|&t| t == all[2]).unwrap();
    assert_eq!(got, all[..=first_stop]);
    let two = generate(&cfg, &w, &prompt, &base, |s| s.index < 1).unwrap();
    assert_eq!(two.tokens(), all[..2]);
    assert!(two.steps[0].top_next.len() == 5 && two.steps[0].top_next[0].id == all[0]);

    let bad = GenerateOptions {
        temperature: -1.0,
        ..base.clone()
    };
    assert_eq!(
        generate(&cfg, &w, &prompt, &bad, |_| true)
            .unwrap_err()
            .exit_code(),
        2
    );
    assert_eq!(
        generate(&cfg, &w, &[], &base, |_| true)
            .unwrap_err()
            .exit_code(),
        2
    );
    let (cfg_b, w_b) = model_common::bert(49);
    let err = generate(&cfg_b, &w_b, &prompt, &base, |_| true).unwrap_err();
    assert!(err.to_string().contains("causal"), "{err}");
    let (cfg_g, w_g) = model_common::gpt2(50);
    let long = GenerateOptions {
        max_tokens: 20,
        ..base
    };
    let err = generate(&cfg_g, &w_g, &prompt, &long, |_| true).unwrap_err();
    assert!(err.to_string().contains("16 rows"), "{err}");
}
