//! Every SIMD tier this machine has, against the f64 reference, on random problems:
//! odd lengths, Nq != Nk, every mask kind, ALiBi, GQA/MQA, random block sizes; plus
//! bit-identical results for 1 and 2 threads, huge logits, and fully masked rows.

use crate::kernel_cases;

use attnviz::engine::reference;
use attnviz::kernel::{self, KernelOptions, Tier, available_tiers};
use kernel_cases::*;
use proptest::prelude::*;

/// Largest error allowed, relative to the output scale max |V|.
const TOLERANCE: f64 = 2e-5;

const LIMITS: Limits = Limits {
    budget: 1_200_000,
    max_n: 300,
    max_dim: 160,
    max_block_k: 160,
};

fn reference(p: &Problem) -> reference::AttnOutput {
    let s = p.shape;
    let q = to4(&p.q, [s.batch, s.heads, s.n_q, s.d]);
    let k = to4(&p.k, [s.batch, s.kv_heads, s.n_k, s.d]);
    let v = to4(&p.v, [s.batch, s.kv_heads, s.n_k, s.dv]);
    reference::attention(&s, q.view(), k.view(), v.view(), &p.spec)
}

/// Max abs error of out, relative to max |V|, and of lse; -inf rows must match exactly.
fn errors(
    p: &Problem,
    r: &reference::AttnOutput,
    k: &kernel::FlashOutput,
) -> Result<(f64, f64), String> {
    let vmax =
        p.v.iter()
            .fold(0.0f64, |a, &x| a.max(x.abs() as f64))
            .max(1e-30);
    let mut out_err = 0.0f64;
    for (a, &b) in r.out.iter().zip(&k.out) {
        if !b.is_finite() {
            return Err(format!("non-finite output {b}"));
        }
        out_err = out_err.max((a - b as f64).abs() / vmax);
    }
    let mut lse_err = 0.0f64;
    for (i, (&a, &b)) in r.lse.iter().zip(&k.lse).enumerate() {
        if a == f64::NEG_INFINITY || b == f32::NEG_INFINITY {
            if !(a == f64::NEG_INFINITY && b == f32::NEG_INFINITY) {
                return Err(format!("lse row {i}: reference {a}, kernel {b}"));
            }
            continue;
        }
        if b.is_nan() {
            return Err(format!("lse row {i} is NaN"));
        }
        lse_err = lse_err.max((a - b as f64).abs() / a.abs().max(1.0));
    }
    Ok((out_err, lse_err))
}

fn run(p: &Problem, tier: Tier, threads: usize, c: &Case) -> kernel::FlashOutput {
    let opts = KernelOptions {
        threads: Some(threads),
        tier: Some(tier),
        block_q: c.block_q,
        block_k: c.block_k,
        ..Default::default()
    };
    kernel::attention(&p.shape, &p.q, &p.k, &p.v, &p.spec, &opts).unwrap()
}

fn check_case(c: &Case) -> Result<(), TestCaseError> {
    let p = problem(c);
    let r = reference(&p);
    let tiers = available_tiers();
    for &tier in &tiers {
        let k = run(&p, tier, 1, c);
        prop_assert_eq!(k.tier, tier);
        let (out_err, lse_err) =
            errors(&p, &r, &k).map_err(|e| TestCaseError::fail(format!("{tier}: {e}")))?;
        prop_assert!(out_err <= TOLERANCE, "{}: output error {:e}", tier, out_err);
        prop_assert!(lse_err <= TOLERANCE, "{}: lse error {:e}", tier, lse_err);
    }
    // Threads change who computes a row, never how: the same bits.
    let best = *tiers.last().unwrap();
    let one = run(&p, best, 1, c);
    let two = run(&p, best, 2, c);
    prop_assert!(
        bits(&one.out) == bits(&two.out) && bits(&one.lse) == bits(&two.lse),
        "1 vs 2 threads differ"
    );
    Ok(())
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

proptest! {
    // 2 x 250 = 500 cases (two functions, so the two cores share them), each on every
    // available tier (scalar, AVX2 and AVX-512 on an AVX-512 x86 machine: 1,500 tier
    // checks), and on 2 threads for the best tier. The paths a case can take are few
    // (tier, mask kind, partial tiles, GQA grouping, ALiBi), and 250 draws per mask
    // family visit each many times over; 500 each took most of this binary's time.
    #![proptest_config(ProptestConfig {
        cases: 250,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_tier_matches_the_reference_with_band_masks(c in case(band_mask(), LIMITS)) {
        check_case(&c)?;
    }

    #[test]
    fn every_tier_matches_the_reference_with_sparse_and_file_masks(c in case(sparse_mask(), LIMITS)) {
        check_case(&c)?;
    }
}

fn fixed(n_q: usize, n_k: usize, d: usize, dv: usize, mask: MaskChoice, alibi: bool) -> Case {
    Case {
        batch: 1,
        heads: 2,
        kv_heads: 1,
        n_q,
        n_k,
        d,
        dv,
        mask,
        alibi,
        block_q: None,
        block_k: None,
        seed: 7,
    }
}

#[test]
fn largest_head_dims_match() {
    for (d, dv) in [(256, 256), (160, 8), (3, 256)] {
        check_case(&fixed(70, 131, d, dv, MaskChoice::Causal, true)).unwrap();
    }
}

#[test]
fn the_common_head_sizes_match() {
    // d = 32, 64 and 128 take the score kernel's constant-d path for whole six-key blocks
    // (kernel::micro::score_rows); 203 keys also leave a partial block in every tile.
    for d in [32, 64, 128] {
        for (mask, alibi) in [(MaskChoice::None, false), (MaskChoice::Causal, true)] {
            check_case(&fixed(77, 203, d, 64, mask, alibi)).unwrap();
        }
    }
}

#[test]
fn huge_logits_stay_finite() {
    // scale 40 at d = 160: scores in the hundreds, exp(score) far beyond f32.
    let c = fixed(200, 300, 160, 64, MaskChoice::Causal, false);
    let mut p = problem(&c);
    p.spec.scale = 40.0;
    let r = reference(&p);
    for tier in available_tiers() {
        let k = run(&p, tier, 1, &c);
        assert!(k.out.iter().chain(&k.lse).all(|x| x.is_finite()), "{tier}");
        let (out_err, _) = errors(&p, &r, &k).unwrap();
        // The softmax is nearly one-hot here, so f32 score rounding barely shows.
        assert!(out_err < 1e-3, "{tier}: {out_err:e}");
    }
}

#[test]
fn fully_masked_rows_are_zero_with_lse_minus_inf() {
    // Nq > Nk with causal: the first Nq - Nk queries see no key at all.
    let c = fixed(50, 20, 16, 16, MaskChoice::Causal, true);
    let p = problem(&c);
    for tier in available_tiers() {
        let k = run(&p, tier, 2, &c);
        for h in 0..2 {
            for i in 0..30 {
                assert_eq!(k.lse[h * 50 + i], f32::NEG_INFINITY, "{tier} row {i}");
                assert!(k.out[(h * 50 + i) * 16..][..16].iter().all(|&x| x == 0.0));
            }
            assert!(k.lse[h * 50 + 30].is_finite());
        }
    }
    // padding:0 masks every key of the sequence.
    let c = fixed(9, 9, 5, 5, MaskChoice::Padding(vec![0]), false);
    let p = problem(&c);
    for tier in available_tiers() {
        let k = run(&p, tier, 1, &c);
        assert!(k.out.iter().all(|&x| x == 0.0) && k.lse.iter().all(|&x| x == f32::NEG_INFINITY));
    }
}

#[test]
fn causal_skips_are_exact_for_decode_shapes() {
    // One query against many keys (KV-cache decoding) and many queries against one key.
    for (n_q, n_k) in [(1, 300), (300, 1), (2, 257)] {
        for mask in [
            MaskChoice::Causal,
            MaskChoice::Window(5),
            MaskChoice::WindowSinks(5, 3),
            MaskChoice::None,
        ] {
            check_case(&fixed(n_q, n_k, 64, 64, mask, false)).unwrap();
        }
    }
}

#[test]
fn a_window_with_sinks_never_skips_the_first_key_tile() {
    // 64 x 64 tiles: the later query blocks' windows are far from key tile 0, which holds
    // the sinks; and sinks that span a tile edge (70 > 64), with small odd tiles too.
    for (w, s) in [(70, 1), (40, 3), (9, 70)] {
        check_case(&fixed(
            230,
            230,
            40,
            24,
            MaskChoice::WindowSinks(w, s),
            w == 40,
        ))
        .unwrap();
        let mut c = fixed(
            61,
            67,
            17,
            9,
            MaskChoice::WindowSinks(w % 13 + 1, s % 11 + 1),
            false,
        );
        (c.block_q, c.block_k) = (Some(7), Some(5));
        check_case(&c).unwrap();
    }
}

#[test]
fn bad_inputs_are_usage_errors() {
    let c = fixed(4, 4, 8, 8, MaskChoice::None, false);
    let p = problem(&c);
    let opts = KernelOptions::default();
    let err = kernel::attention(&p.shape, &p.q[1..], &p.k, &p.v, &p.spec, &opts).unwrap_err();
    assert!(err.to_string().contains("Q holds"), "{err}");
    let opts = KernelOptions {
        threads: Some(0),
        ..Default::default()
    };
    let err = kernel::attention(&p.shape, &p.q, &p.k, &p.v, &p.spec, &opts).unwrap_err();
    assert!(err.to_string().contains("--threads"), "{err}");
    assert_eq!(err.exit_code(), 2);
}
