//! The built-in lessons: all valid, all embedded, covering the course, readable in the
//! time they stay on screen, and quoting only figures that their formulas give.

use std::collections::BTreeSet;

use attnviz::cli::Lang;
use attnviz::scene::{self, BUILTIN_SOURCES, DEFAULT_SCENE, Scene};

fn all() -> Vec<Scene> {
    scene::builtins().expect("every built-in scene is valid")
}

#[test]
fn there_are_at_least_14_valid_built_ins_with_unique_names() {
    let scenes = all();
    assert!(scenes.len() >= 14, "{} scenes", scenes.len());
    let names: BTreeSet<&str> = scenes.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.len(), scenes.len());
    assert!(names.contains(DEFAULT_SCENE));
    assert_eq!(scene::load(DEFAULT_SCENE).unwrap().name, DEFAULT_SCENE);
}

#[test]
fn every_file_in_scenes_is_embedded_and_the_same() {
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir("scenes").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_stem().unwrap().to_str().unwrap().to_string();
            let src = std::fs::read_to_string(&path).unwrap();
            let embedded = BUILTIN_SOURCES
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("scenes/{name}.toml is not embedded"));
            assert_eq!(embedded.1, src);
            on_disk.insert(name);
        }
    }
    assert_eq!(on_disk.len(), BUILTIN_SOURCES.len());
}

#[test]
fn the_course_covers_every_topic_of_the_issue() {
    let names: BTreeSet<String> = all().into_iter().map(|s| s.name).collect();
    for topic in [
        "qkv",
        "scaled-dot",
        "softmax-stability",
        "padding-mask",
        "causal-mask",
        "multi-head",
        "why-position",
        "sinusoidal",
        "rope",
        "alibi",
        "memory-wall",
        "flash-tiling",
        "flash2-loop-order",
        "kv-cache",
        "gqa",
        "sliding-window",
        "bigbird",
        "linear-attention",
    ] {
        assert!(names.contains(topic), "no scene for {topic}");
    }
}

#[test]
fn each_lesson_sets_up_the_model_its_topic_needs() {
    use attnviz::engine::config::{MaskKind, PeKind};
    let get = |n: &str| scene::builtin(n).unwrap();
    assert_eq!(get("causal-mask").toy().unwrap().mask, MaskKind::Causal);
    assert!(matches!(
        get("padding-mask").toy().unwrap().mask,
        MaskKind::Padding(_)
    ));
    assert!(matches!(
        get("sliding-window").toy().unwrap().mask,
        MaskKind::Window(_)
    ));
    assert!(matches!(
        get("bigbird").toy().unwrap().mask,
        MaskKind::BigBird(_)
    ));
    assert_eq!(get("why-position").toy().unwrap().pe, PeKind::None);
    assert!(matches!(get("rope").toy().unwrap().pe, PeKind::Rope { .. }));
    assert_eq!(get("alibi").toy().unwrap().pe, PeKind::Alibi);
    let gqa = get("gqa").toy().unwrap().clone();
    assert!(gqa.kv_heads < gqa.heads && gqa.kv_heads > 1);
    assert!(get("multi-head").toy().unwrap().heads > 1);
    // The scaling lesson needs a head big enough for the variance to matter.
    let sd = get("scaled-dot").toy().unwrap().clone();
    assert!(sd.d_model / sd.heads >= 64);
}

#[test]
fn narration_is_written_in_both_languages() {
    let cjk = |s: &str| s.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
    for s in all() {
        assert!(cjk(&s.title.zh) && !cjk(&s.title.en), "{}", s.name);
        for (i, step) in s.steps.iter().enumerate() {
            assert!(!cjk(&step.narration.en), "{} step {i}: en has CJK", s.name);
            assert!(
                cjk(&step.narration.zh),
                "{} step {i}: zh has no CJK",
                s.name
            );
            assert_ne!(step.narration.en, step.narration.zh);
        }
        let script = s.script(Lang::Zh);
        assert_eq!(script.len(), s.steps.len());
        assert_eq!(script[0].narration, s.steps[0].narration.zh);
        // Replaying from step 1 shows the view the scene opens in.
        assert_eq!(script[0].view, Some(s.steps[0].view.unwrap_or(s.view)));
    }
}

#[test]
fn each_step_stays_long_enough_to_read() {
    // At least a second per four English words and per ten Chinese characters: slower
    // than skimming, as a lesson should be.
    for s in all() {
        for (i, step) in s.steps.iter().enumerate() {
            let words = step.narration.en.split_whitespace().count() as u64;
            let han = step
                .narration
                .zh
                .chars()
                .filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c))
                .count() as u64;
            let need_ms = (words * 1000 / 4).max(han * 1000 / 10);
            assert!(
                step.dwell_ms >= need_ms,
                "{} step {}: dwell {} ms < {need_ms} ms to read",
                s.name,
                i + 1,
                step.dwell_ms
            );
        }
    }
}

fn narration(name: &str) -> String {
    let s = scene::builtin(name).unwrap();
    s.steps
        .iter()
        .map(|st| format!("{}\n{}\n", st.narration.en, st.narration.zh))
        .collect()
}

/// Decimal megabytes / gigabytes with the precision the narration uses.
fn mb(bytes: u64) -> String {
    format!("{:.0} MB", bytes as f64 / 1e6)
}
fn gb(bytes: u64, digits: usize) -> String {
    format!("{:.*} GB", digits, bytes as f64 / 1e9)
}

#[test]
fn figures_in_the_narration_follow_from_their_formulas() {
    // One head's score matrix at n = 8192 (DESIGN.md errata: 67.1 M entries, 268 MB).
    let n: u64 = 8192;
    let entries = n * n;
    let text = narration("memory-wall");
    assert!(text.contains(&format!("{:.1} million", entries as f64 / 1e6)));
    assert!(text.contains(&mb(entries * 4)), "fp32");
    assert!(text.contains(&mb(entries * 2)), "fp16");
    assert!(text.contains("Θ(N·d + N²)") && text.contains("Θ(N²·d²/M)"));

    // LLaMA-2-70B: 80 layers, 8 KV heads of 128, 64 query heads, 4096 tokens, fp16.
    let per_head_token = 2 * 80 * 128 * 2;
    let kv = |heads: u64| per_head_token * heads * 4096;
    let text = narration("kv-cache");
    assert!(text.contains(&gb(kv(8), 2)), "GQA cache: {}", gb(kv(8), 2));
    assert!(
        text.contains(&gb(kv(64), 1)),
        "MHA cache: {}",
        gb(kv(64), 1)
    );
    assert_eq!(kv(64) / kv(8), 8);
    assert!(text.contains("eight times"));

    // exp overflows where x exceeds ln(MAX).
    let text = narration("softmax-stability");
    assert!(text.contains(&format!("{:.1}", f32::MAX.ln())));
    assert!(text.contains(&format!("{:.1}", f64::MAX.ln())));

    // ALiBi slopes for 4 heads, from the engine.
    let slopes = attnviz::engine::pe::alibi_slopes(4);
    let as_fractions: Vec<String> = slopes
        .iter()
        .map(|m| format!("1/{}", (1.0 / m).round()))
        .collect();
    assert_eq!(as_fractions, ["1/4", "1/16", "1/64", "1/256"]);
    assert!(narration("alibi").contains("1/4, 1/16, 1/64 and 1/256"));

    // Mistral 7B: 32 layers, window 4096: L (W - 1) + 1 tokens.
    let field = 32 * (4096 - 1) + 1;
    assert_eq!((field as f64 / 1000.0).round(), 131.0);
    let text = narration("sliding-window");
    assert!(text.contains("about 131 thousand") && text.contains("13.1 万"));

    // sqrt(d_k) for the scaled-dot lesson's head.
    let sd = scene::builtin("scaled-dot").unwrap().toy().unwrap().clone();
    let d_k = sd.d_model / sd.heads;
    assert!(narration("scaled-dot").contains(&format!("d_k = {d_k}")));
    assert!(narration("scaled-dot").contains(&format!("sqrt(d_k) = {}", (d_k as f64).sqrt())));
}

#[test]
fn load_finds_built_ins_and_files_and_explains_neither() {
    assert_eq!(scene::load("rope").unwrap().name, "rope");
    let s = scene::load("tests/fixtures/scenes/valid.toml").unwrap();
    assert_eq!(s.name, "valid");
    let err = scene::load("ropee").unwrap_err().to_string();
    assert!(
        err.contains("no built-in scene 'ropee'") && err.contains("intro"),
        "{err}"
    );
}
