//! Training runs end to end: determinism, a short run whose loss falls, the saved
//! Hugging Face folder opening in attnviz's own loader with the trainer's attention, and
//! `attnviz train`'s flags and JSON.

use assert_cmd::Command;
use attnviz::model::{ForwardOptions, forward, load};
use attnviz::train::export::{Vocab, write_hf_gpt2};
use attnviz::train::{AdamW, ModelShape, Source, TrainConfig, Trainer};

fn cfg(threads: usize, seed: u64) -> TrainConfig {
    TrainConfig {
        shape: ModelShape {
            layers: 2,
            heads: 2,
            d_model: 16,
            context: 16,
            vocab: 12,
        },
        steps: 6,
        batch: 4,
        lr: 1e-2,
        warmup: 2,
        adamw: AdamW::default(),
        clip: 1.0,
        seed,
        threads,
        eval_batch: 4,
    }
}

fn run(c: TrainConfig, source: Source) -> Trainer {
    let mut t = Trainer::new(c, source).unwrap();
    while !t.done() {
        t.step().unwrap();
    }
    t
}

fn bits(p: &[f32]) -> Vec<u32> {
    p.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn same_seed_same_weights_bit_for_bit_whatever_the_threads() {
    let src = || Source::Induction { vocab: 12 };
    let a = run(cfg(1, 7), src());
    let b = run(cfg(1, 7), src());
    let c = run(cfg(2, 7), src());
    assert_eq!(bits(a.params()), bits(b.params()));
    assert_eq!(bits(a.params()), bits(c.params()));
    // A batch of 40 sequences of 16 tokens runs in three shards (16 + 16 + 8).
    let wide = |threads| TrainConfig {
        batch: 40,
        ..cfg(threads, 7)
    };
    let (w1, w2, w3) = (
        run(wide(1), src()),
        run(wide(2), src()),
        run(wide(3), src()),
    );
    assert_eq!(bits(w1.params()), bits(w2.params()));
    assert_eq!(bits(w1.params()), bits(w3.params()));
    assert_ne!(bits(w1.params()), bits(a.params()));
    let d = run(cfg(1, 8), src());
    assert_ne!(bits(a.params()), bits(d.params()));
    // The run moved the weights.
    let init = a.layout().init(7);
    assert!(a.params().iter().zip(&init).filter(|(x, y)| x != y).count() > init.len() / 2);
}

#[test]
fn a_short_byte_level_run_learns_a_repetitive_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.txt");
    std::fs::write(&path, "the cat sat on the mat. ".repeat(40)).unwrap();
    let mut c = cfg(2, 1);
    c.shape.vocab = 256;
    c.steps = 60;
    c.batch = 8;
    let mut t = Trainer::new(c, Source::text(&path, 16).unwrap()).unwrap();
    let first = t.evaluate().unwrap();
    while !t.done() {
        t.step().unwrap();
    }
    let last = t.evaluate().unwrap();
    assert!((first.loss - 256f64.ln()).abs() < 0.1, "{first:?}");
    assert!(last.loss < 0.5 * first.loss, "{first:?} -> {last:?}");
    let snap = t.snapshot();
    assert_eq!(snap.history.len(), 2);
    assert_eq!(
        (snap.maps.len(), snap.maps[0].len(), snap.maps[0][0].len()),
        (2, 2, 16 * 16)
    );
    for row in snap.maps[1][0].chunks(16) {
        let s: f32 = row.iter().sum();
        assert!((s - 1.0).abs() < 1e-4, "{s}");
    }
}

#[test]
fn the_saved_folder_opens_in_attnviz_with_the_trainers_attention() {
    let mut t = run(cfg(1, 3), Source::Induction { vocab: 12 });
    t.evaluate().unwrap();
    let snap = t.snapshot();
    let dir = tempfile::tempdir().unwrap();
    write_hf_gpt2(dir.path(), t.layout(), t.params(), Vocab::Numbers).unwrap();
    let m = load(dir.path().to_str().unwrap()).unwrap();
    assert_eq!(m.config.context, 16);
    let ids = m.tokenizer.encode("3 4 5").unwrap();
    assert_eq!(ids, vec![3, 4, 5]);
    let opts = ForwardOptions {
        keep_attention: true,
        threads: Some(1),
        ..Default::default()
    };
    // `heads DIR` scores it with its default probe, fitted to the 16 positions.
    let heads = attnviz()
        .arg("heads")
        .arg(dir.path())
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        heads.status.success(),
        "{}",
        String::from_utf8_lossy(&heads.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&heads.stdout).unwrap();
    assert_eq!(rows.len(), 4);
    let out = forward(&m.config, &m.weights, &snap.probe, &opts).unwrap();
    for (l, layer) in out.attention.iter().enumerate() {
        for (h, mine) in snap.maps[l].iter().enumerate() {
            let theirs = &layer[h * 256..(h + 1) * 256];
            let worst = mine
                .iter()
                .zip(theirs)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "layer {l} head {h}: {worst}");
        }
    }
}

fn attnviz() -> Command {
    Command::cargo_bin("attnviz").unwrap()
}

#[test]
fn train_json_prints_one_object_per_evaluation() {
    let out = attnviz()
        .args([
            "train",
            "--layers",
            "1",
            "--heads",
            "2",
            "--d-model",
            "8",
            "--context",
            "8",
        ])
        .args([
            "--vocab",
            "6",
            "--batch",
            "2",
            "--steps",
            "4",
            "--eval-every",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines
            .iter()
            .map(|v| v["step"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [0, 2, 4]
    );
    for k in [
        "loss",
        "loss_repeated",
        "loss_other",
        "induction_max",
        "prev_token_max",
        "induction_offset_max",
        "ms_per_step",
    ] {
        assert!(
            lines
                .iter()
                .all(|v| v[k].as_f64().is_some_and(f64::is_finite)),
            "{k}"
        );
    }
}

#[test]
fn bad_train_flags_exit_2_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--heads", "3"], "--heads"),
        (&["--lr", "0"], "--lr"),
        (&["--lr", "nan"], "--lr"),
        (&["--steps", "0"], "--steps"),
        (&["--batch", "0"], "--batch"),
        (&["--context", "1"], "--context"),
        (&["--vocab", "1"], "--vocab"),
        (&["--threads", "0"], "--threads"),
        (&["--layers", "-1"], "--layers"),
        (
            &["--text", "/nonexistent/file.txt"],
            "/nonexistent/file.txt",
        ),
        (&["--text", "Cargo.toml", "--vocab", "64"], "--vocab"),
        (&["--task", "induction", "--text", "Cargo.toml"], "--text"),
    ];
    for (args, needle) in cases {
        let out = attnviz()
            .arg("train")
            .args(*args)
            .arg("--json")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
