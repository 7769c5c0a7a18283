//! The backward kernel on every SIMD tier this machine has, against the f64 reference
//! gradients, on random problems: odd lengths and head dims (not multiples of the tile
//! or the vector width), Nq != Nk (decode shapes), every mask kind, ALiBi, GQA/MQA,
//! random block sizes; plus bit-identical results for 1 and 2 threads, fully masked
//! rows (no NaN, no gradient) and bad inputs.

use crate::kernel_cases;

use attnviz::engine::reference_backward;
use attnviz::kernel::{self, BackwardInputs, FlashGrads, KernelOptions, Tier, available_tiers};
use kernel_cases::*;
use proptest::prelude::*;

/// Largest error allowed, relative to the largest entry of each reference gradient.
const TOLERANCE: f64 = 1e-4;

const LIMITS: Limits = Limits {
    budget: 600_000,
    max_n: 200,
    max_dim: 100,
    max_block_k: 100,
};

fn reference(p: &Problem) -> reference_backward::Grads {
    let s = p.shape;
    let q = to4(&p.q, [s.batch, s.heads, s.n_q, s.d]);
    let k = to4(&p.k, [s.batch, s.kv_heads, s.n_k, s.d]);
    let v = to4(&p.v, [s.batch, s.kv_heads, s.n_k, s.dv]);
    let g = to4(&p.dout, [s.batch, s.heads, s.n_q, s.dv]);
    reference_backward::attention_backward(&s, q.view(), k.view(), v.view(), g.view(), &p.spec)
}

/// The forward on the best tier, then the backward on `tier` with `threads`.
fn run(p: &Problem, tier: Tier, threads: usize, c: &Case) -> FlashGrads {
    let opts = KernelOptions {
        threads: Some(threads),
        tier: Some(tier),
        block_q: c.block_q,
        block_k: c.block_k,
        ..Default::default()
    };
    let fwd = kernel::attention(&p.shape, &p.q, &p.k, &p.v, &p.spec, &opts).unwrap();
    let inp = BackwardInputs {
        q: &p.q,
        k: &p.k,
        v: &p.v,
        out: &fwd.out,
        lse: &fwd.lse,
        dout: &p.dout,
    };
    kernel::attention_backward(&p.shape, &inp, &p.spec, &opts).unwrap()
}

/// Largest error of each gradient relative to its largest reference entry.
fn errors(r: &reference_backward::Grads, g: &FlashGrads) -> Result<[f64; 4], String> {
    let pairs = [
        ("dq", r.dq.as_slice().unwrap(), &g.dq),
        ("dk", r.dk.as_slice().unwrap(), &g.dk),
        ("dv", r.dv.as_slice().unwrap(), &g.dv),
        ("D", r.d.as_slice().unwrap(), &g.d),
    ];
    let mut out = [0.0; 4];
    for (slot, (name, want, got)) in pairs.into_iter().enumerate() {
        if want.len() != got.len() {
            return Err(format!("{name}: {} values, want {}", got.len(), want.len()));
        }
        let largest = want.iter().fold(0.0f64, |a, &x| a.max(x.abs()));
        let mut worst = 0.0f64;
        for (i, (&a, &b)) in want.iter().zip(got.iter()).enumerate() {
            if !b.is_finite() {
                return Err(format!("{name}[{i}] = {b}"));
            }
            worst = worst.max((a - b as f64).abs());
        }
        out[slot] = if largest == 0.0 {
            worst
        } else {
            worst / largest
        };
    }
    Ok(out)
}

fn check_case(c: &Case) -> Result<(), TestCaseError> {
    let p = problem(c);
    let r = reference(&p);
    let tiers = available_tiers();
    for &tier in &tiers {
        let g = run(&p, tier, 1, c);
        prop_assert_eq!(g.tier, tier);
        let e = errors(&r, &g).map_err(|e| TestCaseError::fail(format!("{tier}: {e}")))?;
        for (name, err) in ["dq", "dk", "dv", "D"].iter().zip(e) {
            prop_assert!(err <= TOLERANCE, "{}: {} error {:e}", tier, name, err);
        }
    }
    let best = *tiers.last().unwrap();
    let one = run(&p, best, 1, c);
    let two = run(&p, best, 2, c);
    prop_assert!(
        bits(&one.dq) == bits(&two.dq)
            && bits(&one.dk) == bits(&two.dk)
            && bits(&one.dv) == bits(&two.dv),
        "1 vs 2 threads differ"
    );
    Ok(())
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 250,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_tier_matches_the_reference_gradients(c in case(any_mask(), LIMITS)) {
        check_case(&c)?;
    }
}

fn fixed(n_q: usize, n_k: usize, d: usize, dv: usize, mask: MaskChoice, alibi: bool) -> Case {
    Case {
        batch: 1,
        heads: 4,
        kv_heads: 2,
        n_q,
        n_k,
        d,
        dv,
        mask,
        alibi,
        block_q: None,
        block_k: None,
        seed: 11,
    }
}

#[test]
fn default_blocks_with_many_tiles_match() {
    // Several 64 x 64 tiles in both directions, none of them whole at the edges.
    for mask in [
        MaskChoice::None,
        MaskChoice::Causal,
        MaskChoice::Window(70),
        MaskChoice::WindowSinks(70, 3),
    ] {
        check_case(&fixed(200, 230, 64, 64, mask, true)).unwrap();
    }
    check_case(&fixed(131, 131, 100, 33, MaskChoice::Causal, false)).unwrap();
}

#[test]
fn decode_shapes_match() {
    for (n_q, n_k) in [(1, 300), (3, 257), (300, 1), (70, 20)] {
        for mask in [MaskChoice::Causal, MaskChoice::Window(5), MaskChoice::None] {
            check_case(&fixed(n_q, n_k, 32, 16, mask, false)).unwrap();
        }
    }
}

#[test]
fn fully_masked_rows_give_no_gradient_and_no_nan() {
    // Nq > Nk with causal: the first Nq - Nk queries see no key at all.
    let c = fixed(50, 20, 16, 16, MaskChoice::Causal, true);
    let p = problem(&c);
    for tier in available_tiers() {
        let g = run(&p, tier, 2, &c);
        assert!(
            g.dq.iter().chain(&g.dk).chain(&g.dv).all(|x| x.is_finite()),
            "{tier}"
        );
        for h in 0..4 {
            for i in 0..30 {
                assert!(
                    g.dq[(h * 50 + i) * 16..][..16].iter().all(|&x| x == 0.0),
                    "{tier}"
                );
            }
        }
    }
    let c = fixed(9, 9, 5, 5, MaskChoice::Padding(vec![0]), false);
    let p = problem(&c);
    for tier in available_tiers() {
        let g = run(&p, tier, 1, &c);
        assert!(
            g.dq.iter().chain(&g.dk).chain(&g.dv).all(|&x| x == 0.0),
            "{tier}"
        );
    }
}

#[test]
fn bad_inputs_are_usage_errors() {
    let c = fixed(4, 4, 8, 8, MaskChoice::None, false);
    let p = problem(&c);
    let opts = KernelOptions::default();
    let fwd = kernel::attention(&p.shape, &p.q, &p.k, &p.v, &p.spec, &opts).unwrap();
    let inp = BackwardInputs {
        q: &p.q,
        k: &p.k,
        v: &p.v,
        out: &fwd.out,
        lse: &fwd.lse,
        dout: &p.dout[1..],
    };
    let err = kernel::attention_backward(&p.shape, &inp, &p.spec, &opts).unwrap_err();
    assert!(err.to_string().contains("dO holds"), "{err}");
    assert_eq!(err.exit_code(), 2);
    let nan_lse: Vec<f32> = fwd.lse.iter().map(|_| f32::NAN).collect();
    let inp = BackwardInputs {
        lse: &nan_lse,
        dout: &p.dout,
        ..inp
    };
    let err = kernel::attention_backward(&p.shape, &inp, &p.spec, &opts).unwrap_err();
    assert!(err.to_string().contains("lse"), "{err}");
}
