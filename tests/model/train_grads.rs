//! Every gradient of the trained model against central finite differences of an f64
//! reference (tests/train_common), on tiny shapes; one training step (clip + AdamW)
//! against the same step done in f64.

use crate::train_common;

use attnviz::train::model::{self, Cache};
use attnviz::train::ops;
use attnviz::train::optim::{AdamState, AdamW, clip_grad_norm};
use attnviz::train::params::{Layout, ModelShape};
use attnviz::train::{Sampler, Source};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use train_common as r;

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

fn randn(n: usize, std: f64, g: &mut ChaCha8Rng) -> Vec<f64> {
    (0..n)
        .map(|_| std * (g.random::<f64>() * 2.0 - 1.0) * 1.7)
        .collect()
}

fn f32s(x: &[f64]) -> Vec<f32> {
    x.iter().map(|&v| v as f32).collect()
}

fn f64s(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| v as f64).collect()
}

/// sum(y * w) for a fixed random w: a scalar whose gradient wrt y is w.
fn dot(y: &[f64], w: &[f64]) -> f64 {
    y.iter().zip(w).map(|(a, b)| a * b).sum()
}

#[test]
fn layer_norm_gradients_match_finite_differences() {
    let (m, d) = (3, 5);
    let mut g = rng(1);
    let x = randn(m * d, 1.0, &mut g);
    let gain = randn(d, 1.0, &mut g);
    let bias = randn(d, 1.0, &mut g);
    let w = randn(m * d, 1.0, &mut g);
    let mut y = vec![0.0f32; m * d];
    let mut st = vec![[0.0f32; 2]; m];
    ops::layer_norm(&f32s(&x), d, &f32s(&gain), &f32s(&bias), &mut y, &mut st);
    let want = r::layer_norm(&x, d, &gain, &bias);
    assert!(r::worst(&y, &want, 1e-5, 1e-5).0 <= 1.0);
    let (mut dx, mut dg, mut db) = (vec![0.0f32; m * d], vec![0.0f32; d], vec![0.0f32; d]);
    ops::layer_norm_backward(
        &f32s(&w),
        &f32s(&x),
        d,
        &f32s(&gain),
        &st,
        &mut dx,
        &mut dg,
        &mut db,
    );
    let nx = r::numeric_grad(&x, 1e-6, |x| dot(&r::layer_norm(x, d, &gain, &bias), &w));
    let ng = r::numeric_grad(&gain, 1e-6, |gn| dot(&r::layer_norm(&x, d, gn, &bias), &w));
    let nb = r::numeric_grad(&bias, 1e-6, |b| dot(&r::layer_norm(&x, d, &gain, b), &w));
    for (name, a, b) in [("dx", &dx, &nx), ("dgain", &dg, &ng), ("dbias", &db, &nb)] {
        let (e, i) = r::worst(a, b, 1e-4, 1e-4);
        assert!(e <= 1.0, "{name}[{i}]: {} vs {}", a[i], b[i]);
    }
}

#[test]
fn gelu_gradient_matches_finite_differences() {
    let x: Vec<f64> = (-40..=40).map(|i| i as f64 * 0.15).collect();
    let mut y = vec![0.0f32; x.len()];
    ops::gelu(&f32s(&x), &mut y);
    let want: Vec<f64> = x.iter().map(|&v| r::gelu(v)).collect();
    assert!(r::worst(&y, &want, 1e-6, 1e-5).0 <= 1.0);
    let mut dy = vec![1.0f32; x.len()];
    ops::gelu_backward(&f32s(&x), &mut dy);
    let num: Vec<f64> = x
        .iter()
        .map(|&v| (r::gelu(v + 1e-6) - r::gelu(v - 1e-6)) / 2e-6)
        .collect();
    let (e, i) = r::worst(&dy, &num, 1e-5, 1e-5);
    assert!(e <= 1.0, "x = {}: {} vs {}", x[i], dy[i], num[i]);
}

#[test]
fn cross_entropy_gradient_matches_finite_differences() {
    let (m, v) = (4, 6);
    let mut g = rng(2);
    let logits = randn(m * v, 3.0, &mut g);
    let targets = [0u32, 5, 2, 2];
    let mut buf = f32s(&logits);
    let mut losses = vec![0.0f32; m];
    ops::cross_entropy(&mut buf, v, &targets, &mut losses);
    let mean = losses.iter().map(|&l| l as f64).sum::<f64>() / m as f64;
    assert!((mean - r::cross_entropy(&logits, v, &targets)).abs() < 1e-5);
    let num = r::numeric_grad(&logits, 1e-6, |z| r::cross_entropy(z, v, &targets));
    let (e, i) = r::worst(&buf, &num, 1e-6, 1e-4);
    assert!(e <= 1.0, "[{i}] {} vs {}", buf[i], num[i]);
    // Far-apart logits: no overflow, no NaN.
    let mut big = vec![0.0f32; v];
    big[0] = 1e4;
    let mut l1 = [0.0f32];
    ops::cross_entropy(&mut big, v, &[3], &mut l1);
    assert!((l1[0] - 1e4).abs() < 1.0 && big.iter().all(|x| x.is_finite()));
}

#[test]
fn linear_gradients_match_finite_differences() {
    // k = 5: the backward's transposed-copy path; k = 32: its strided product (a whole
    // number of vectors on every tier); n = 9 the forward's packed kernel, n = 32 its
    // strided product; 1 and 3 threads sharing out the rows.
    for (k, threads) in [(5, 2), (32, 1), (32, 3)] {
        for n in [9, 32] {
            linear_case(7, k, n, threads);
        }
    }
}

fn linear_case(m: usize, k: usize, n: usize, threads: usize) {
    use attnviz::train::linear;
    let mut g = rng(3 + k as u64);
    let x = randn(m * k, 1.0, &mut g);
    let w = randn(n * k, 1.0, &mut g);
    let b = randn(n, 1.0, &mut g);
    let dy = randn(m * n, 1.0, &mut g);
    let mut y = vec![0.0f32; m * n];
    let mut scr = linear::LinearScratch::default();
    linear::forward(
        &f32s(&x),
        m,
        k,
        &f32s(&w),
        n,
        Some(&f32s(&b)),
        &mut y,
        &mut scr,
        threads,
    )
    .unwrap();
    assert!(r::worst(&y, &r::linear(&x, m, k, &w, n, Some(&b)), 1e-5, 1e-5).0 <= 1.0);
    let (mut dx, mut dw, mut db) = (vec![0.0f32; m * k], vec![0.0f32; n * k], vec![0.0f32; n]);
    dx.iter_mut().for_each(|v| *v = 0.5);
    linear::backward(
        &f32s(&dy),
        &f32s(&x),
        m,
        k,
        &f32s(&w),
        n,
        Some(&mut dx),
        &mut dw,
        Some(&mut db),
        &mut scr,
        threads,
    )
    .unwrap();
    // dx is added to what was there.
    dx.iter_mut().for_each(|v| *v -= 0.5);
    let nx = r::numeric_grad(&x, 1e-6, |x| dot(&r::linear(x, m, k, &w, n, Some(&b)), &dy));
    let nw = r::numeric_grad(&w, 1e-6, |w| dot(&r::linear(&x, m, k, w, n, Some(&b)), &dy));
    let nb = r::numeric_grad(&b, 1e-6, |b| dot(&r::linear(&x, m, k, &w, n, Some(b)), &dy));
    for (name, a, want) in [("dx", &dx, &nx), ("dw", &dw, &nw), ("db", &db, &nb)] {
        let (e, i) = r::worst(a, want, 1e-4, 1e-4);
        assert!(
            e <= 1.0,
            "k {k}, {threads} threads: {name}[{i}]: {} vs {}",
            a[i],
            want[i]
        );
    }
}

#[test]
fn embedding_gradient_adds_rows_per_token_and_position() {
    let (t, d) = (3, 2);
    let tokens = [1u32, 1, 0, 2, 1, 0];
    let dx: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let (mut dwte, mut dwpe) = (vec![0.0f32; 3 * d], vec![0.0f32; t * d]);
    ops::embed_backward(&tokens, &dx, t, d, &mut dwte, &mut dwpe);
    // Token 1 at rows 0, 1, 4: [0+2+8, 1+3+9]; position 0 at rows 0, 3: [0+6, 1+7].
    assert_eq!(&dwte[2..4], &[10.0, 13.0]);
    assert_eq!(&dwpe[0..2], &[6.0, 8.0]);
}

/// d_model 8 takes the linear layers' transposed-copy path on AVX-512; 16 the strided
/// product on every x86 tier.
fn tiny(d_model: usize) -> (Layout, Vec<f64>, attnviz::train::Batch) {
    let shape = ModelShape {
        layers: 2,
        heads: 2,
        d_model,
        context: 6,
        vocab: 7,
    };
    let l = Layout::new(shape);
    // Init, then larger random values so attention is far from uniform and every path
    // carries gradient.
    let mut g = rng(4);
    let p: Vec<f64> = l
        .init(9)
        .iter()
        .zip(randn(l.total, 0.35, &mut g))
        .map(|(&a, b)| a as f64 + b)
        .collect();
    let b = Sampler::new(Source::Induction { vocab: 7 }, 6, 1).next(2);
    (l, p, b)
}

#[test]
fn model_gradient_matches_finite_differences_of_the_f64_model() {
    for d in [8, 16] {
        model_gradient_case(d);
    }
}

/// The induction task's loss is taken only on the second copy's targets: the gradient of
/// that masked mean matches finite differences of the f64 model's masked loss.
#[test]
fn masked_loss_gradient_matches_finite_differences() {
    let (l, p, b) = tiny(8);
    assert!(b.trained.iter().any(|&t| t) && b.trained.iter().any(|&t| !t));
    let pf = f32s(&p);
    let mut cache = Cache::default();
    let mask = Some(&b.trained[..]);
    let loss = model::forward(&l, &pf, &b.tokens, &b.targets, mask, 2, 1, &mut cache).unwrap();
    let want = r::loss_masked(&l, &p, &b.tokens, &b.targets, mask, 2);
    assert!((loss - want).abs() < 1e-5, "{loss} vs {want}");
    let mut grads = vec![0.0f32; l.total];
    model::backward(&l, &pf, &mut cache, &mut grads, 1).unwrap();
    let num = r::numeric_grad(&p, 1e-5, |q| {
        r::loss_masked(&l, q, &b.tokens, &b.targets, mask, 2)
    });
    let g: Vec<f64> = grads.iter().map(|&x| x as f64).collect();
    let (e, i) = r::worst(&grads, &num, 1e-4, 1e-2);
    assert!(e <= 1.0, "[{i}]: {} vs {}", g[i], num[i]);
}

fn model_gradient_case(d: usize) {
    let (l, p, b) = tiny(d);
    let pf = f32s(&p);
    let mut cache = Cache::default();
    let loss = model::forward(&l, &pf, &b.tokens, &b.targets, None, 2, 2, &mut cache).unwrap();
    let want = r::loss(&l, &p, &b.tokens, &b.targets, 2);
    assert!((loss - want).abs() < 1e-5, "{loss} vs {want}");
    let mut grads = vec![0.0f32; l.total];
    model::backward(&l, &pf, &mut cache, &mut grads, 2).unwrap();
    let num = r::numeric_grad(&p, 1e-5, |q| r::loss(&l, q, &b.tokens, &b.targets, 2));
    for t in &l.tensors {
        let (e, i) = r::worst(&grads[t.range.clone()], &num[t.range.clone()], 2e-5, 2e-3);
        let j = t.range.start + i;
        assert!(
            e <= 1.0,
            "d_model {d}, {} [{i}]: {} vs {}",
            t.name,
            grads[j],
            num[j]
        );
    }
    assert!(num.iter().filter(|g| g.abs() > 1e-4).count() > l.total / 2);
}

#[test]
fn one_training_step_matches_an_f64_step() {
    let (l, p, b) = tiny(16);
    // A larger eps keeps the first Adam step m / sqrt(v) = sign(g) smooth in g, so the
    // comparison measures the step, not the sign of gradients that are nearly 0.
    let opt = AdamW {
        eps: 1e-3,
        weight_decay: 0.1,
        ..AdamW::default()
    };
    let (lr, clip) = (1e-2f32, 0.5f32);
    let mut pf = f32s(&p);
    let mut cache = Cache::default();
    model::forward(&l, &pf, &b.tokens, &b.targets, None, 2, 1, &mut cache).unwrap();
    let mut grads = vec![0.0f32; l.total];
    model::backward(&l, &pf, &mut cache, &mut grads, 1).unwrap();
    let norm = clip_grad_norm(&mut grads, clip);
    let mut st = AdamState::new(l.total);
    opt.step(&l, &mut pf, &grads, &mut st, lr);

    let mut g = r::numeric_grad(&p, 1e-5, |q| r::loss(&l, q, &b.tokens, &b.targets, 2));
    let n64 = g.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm - n64).abs() < 1e-4 * n64, "{norm} vs {n64}");
    assert!(n64 > clip as f64, "the step must clip: norm {n64}");
    g.iter_mut().for_each(|x| *x *= clip as f64 / (n64 + 1e-6));
    let (b1, b2, eps, lr) = (0.9f64, 0.95f64, 1e-3f64, lr as f64);
    let mut want = p.clone();
    for t in &l.tensors {
        for i in t.range.clone() {
            let m = (1.0 - b1) * g[i] / (1.0 - b1);
            let v = (1.0 - b2) * g[i] * g[i] / (1.0 - b2);
            let decay = if t.decay { 1.0 - lr * 0.1 } else { 1.0 };
            want[i] = want[i] * decay - lr * m / (v.sqrt() + eps);
        }
    }
    let (e, i) = r::worst(&pf, &want, 2e-6, 1e-5);
    assert!(
        e <= 1.0,
        "parameter {i}: {} vs {} (before {})",
        pf[i],
        want[i],
        p[i]
    );
    assert!(
        pf.iter()
            .zip(&f64s(&f32s(&p)))
            .filter(|(a, b)| (**a as f64 - **b).abs() > 1e-4)
            .count()
            > l.total / 2
    );
}

#[test]
fn a_batch_in_uneven_shards_has_the_whole_batch_loss_and_gradient() {
    use attnviz::train::shards;
    let shape = ModelShape {
        layers: 2,
        heads: 2,
        d_model: 16,
        context: 64,
        vocab: 7,
    };
    let l = Layout::new(shape);
    let p = l.init(3);
    let b = Sampler::new(Source::Induction { vocab: 7 }, 64, 2).next(9);
    // 4 + 4 + 1 sequences: unequal weights.
    assert_eq!(shards::plan(9, 64), vec![0..4, 4..8, 8..9]);
    let mut cache = Cache::default();
    let want_loss = model::forward(
        &l,
        &p,
        &b.tokens,
        &b.targets,
        Some(&b.trained),
        9,
        1,
        &mut cache,
    )
    .unwrap();
    let mut want = vec![0.0f32; l.total];
    model::backward(&l, &p, &mut cache, &mut want, 1).unwrap();
    let want: Vec<f64> = want.iter().map(|&g| g as f64).collect();
    let mut first: Option<Vec<u32>> = None;
    for threads in [1, 2, 3, 4] {
        let (mut sh, mut got) = (Vec::new(), vec![f32::NAN; l.total]);
        let loss = shards::forward_backward(&l, &p, &b, &mut sh, &mut got, threads).unwrap();
        assert!(
            (loss - want_loss).abs() < 1e-6 * want_loss,
            "{loss} vs {want_loss}"
        );
        let (e, i) = r::worst(&got, &want, 1e-7, 1e-4);
        assert!(
            e <= 1.0,
            "{threads} threads, [{i}]: {} vs {}",
            got[i],
            want[i]
        );
        // The same bits on any number of threads.
        let bits: Vec<u32> = got.iter().map(|g| g.to_bits()).collect();
        match &first {
            None => first = Some(bits),
            Some(f) => assert!(f == &bits, "{threads} threads changed the gradient's bits"),
        }
    }
    assert!(want.iter().filter(|g| g.abs() > 1e-6).count() > l.total / 2);
}
