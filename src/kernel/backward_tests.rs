//! The fast backward's grouping of key blocks against one block at a time.

use super::*;
use crate::attn::config::MaskKind;
use crate::attn::mask::Mask;
use crate::kernel::{attention, available_tiers};

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn grouping_key_blocks_changes_no_bit() {
    // 37 key blocks of 8 (the last short), so every task's groups end on a partial one;
    // GQA (two query heads a K/V group) and two batch entries, several chunks a group.
    let shape = ProblemShape {
        batch: 2,
        heads: 4,
        kv_heads: 2,
        n_q: 150,
        n_k: 290,
        d: 24,
        dv: 20,
    };
    let val = |i: usize, salt: usize| (((i * 7919 + salt) % 211) as f32 / 211.0) - 0.5;
    let q: Vec<f32> = (0..2 * 4 * 150 * 24).map(|i| val(i, 1)).collect();
    let k: Vec<f32> = (0..2 * 2 * 290 * 24).map(|i| val(i, 2)).collect();
    let v: Vec<f32> = (0..2 * 2 * 290 * 20).map(|i| val(i, 3)).collect();
    let dout: Vec<f32> = (0..2 * 4 * 150 * 20).map(|i| val(i, 4)).collect();
    for kind in [MaskKind::None, MaskKind::Causal, MaskKind::Window(20)] {
        let mask = Mask::resolve(&kind, 2, 4, 150, 290).unwrap();
        let spec = AttnSpec::new(&shape, mask, kind == MaskKind::Causal, None);
        for tier in available_tiers() {
            let opts = KernelOptions {
                threads: Some(2),
                tier: Some(tier),
                block_q: Some(16),
                block_k: Some(8),
                ..KernelOptions::default()
            };
            let fwd = attention(&shape, &q, &k, &v, &spec, &opts).unwrap();
            let inp = BackwardInputs {
                q: &q,
                k: &k,
                v: &v,
                out: &fwd.out,
                lse: &fwd.lse,
                dout: &dout,
            };
            let one = backward_grouped(&shape, &inp, &spec, &opts, 1).unwrap();
            let grouped = backward_grouped(&shape, &inp, &spec, &opts, BWD_KEY_GROUP).unwrap();
            assert!(grouped.dq.iter().any(|&x| x != 0.0), "{tier} {kind:?}");
            assert!(
                bits(&one.dq) == bits(&grouped.dq)
                    && bits(&one.dk) == bits(&grouped.dk)
                    && bits(&one.dv) == bits(&grouped.dv),
                "{tier} {kind:?}: grouped and one-at-a-time runs differ"
            );
        }
    }
}
