//! What the lessons on trained models say holds for the model's own numbers, as the player
//! computes them at that step: every figure, head and token a narration names is derived
//! here from the run (or the screen) and looked for in both languages, so a wrong claim,
//! or a model that no longer does what the lesson says, fails. Skips without the models.

use assert_cmd::Command;
use attnviz::attn::config::MaskKind;
use attnviz::cli::{Lang, TermSize};
use attnviz::model::scores::rollout;
use attnviz::model::session::ModelSession;
use attnviz::record::{still, still::text};
use attnviz::scene::{PretrainedInput, Scene};
use attnviz::tui::ViewKind;
use ndarray::{ArrayD, IxDyn};

use crate::real::{at, lesson, loss_change, scores, screen, session};
use crate::support::headless::options_at;

/// Step `k`'s narration (from 1), English and Chinese.
fn said(s: &Scene, k: usize) -> (String, String) {
    let n = &s.steps[k - 1].narration;
    (n.en.clone(), n.zh.clone())
}

/// Both narrations of step `k` contain each of `figures`.
fn both_say(s: &Scene, k: usize, figures: &[String]) {
    let (en, zh) = said(s, k);
    for f in figures {
        assert!(en.contains(f.as_str()), "step {k} en lacks {f}: {en}");
        assert!(zh.contains(f.as_str()), "step {k} zh lacks {f}: {zh}");
    }
}

/// Step `k` (from 1) as the text of a still of `cols` x `rows`.
fn still_at(s: &Scene, k: usize, cols: u16, rows: u16) -> String {
    text(&still(s, &options_at(Lang::En, TermSize { cols, rows }, 1.0), k).unwrap())
}

fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .max_by(|x, y| x.1.total_cmp(y.1))
        .unwrap()
        .0
}

fn row(s: &ModelSession, layer: usize, head: usize, i: usize) -> Vec<f32> {
    s.row_weights(layer, head, i)
}

fn losses(s: &ModelSession) -> (f64, f64) {
    let before = s.baseline.as_ref().expect("an intervened run").loss;
    (before.unwrap(), s.loss().unwrap())
}

#[test]
fn attention_sinks_says_what_the_model_and_the_screen_show() {
    let Some(s) = lesson("attention-sinks") else {
        return;
    };
    // Step 2: from layer 3 on, most heads of a layer reach 0.4 on the first token, but
    // none of layers 11 and 12 does.
    let p = at(&s, 1);
    let ss = session(&p);
    let (layers, heads) = (ss.config().layers, ss.config().heads);
    let sc = scores(ss);
    for l in 2..layers {
        let of: Vec<f64> = sc
            .iter()
            .filter(|((x, _), _)| *x == l)
            .map(|(_, v)| v.first_token)
            .collect();
        let reach = of.iter().filter(|&&x| x >= 0.4).count();
        if l == 10 || l == 11 {
            assert_eq!(reach, 0, "layer {}: {of:?}", l + 1);
        } else {
            assert!(reach * 2 > heads, "layer {}: {of:?}", l + 1);
        }
    }
    let (en, zh) = said(&s, 2);
    assert!(
        en.contains("From layer 3 on") && en.contains("layers 11 and 12"),
        "{en}"
    );
    assert!(
        zh.contains("第 3 层") && zh.contains("第 11、12 层"),
        "{zh}"
    );
    both_say(&s, 2, &["0.4".into()]);

    // Step 3: layer 13 in the tokens view from ' mat': 'The' is the strongest key in all
    // nine heads, 0.91 in head 1, and most heads agree from every other token.
    let mut p = at(&s, 2);
    assert_eq!(p.state().view, ViewKind::Tokens);
    assert_eq!(p.state().cursor.0, 5);
    let ss = session(&p);
    assert_eq!((ss.pieces[0].trim(), ss.pieces[5].trim()), ("The", "mat"));
    let (layer, n) = (12, ss.n());
    for h in 0..heads {
        assert_eq!(argmax(&row(ss, layer, h, 5)), 0, "head {}", h + 1);
    }
    let w = format!("{:.2}", row(ss, layer, 0, 5)[0]);
    for i in 1..n {
        let agree = (0..heads)
            .filter(|&h| argmax(&row(ss, layer, h, i)) == 0)
            .count();
        assert!(agree * 2 > heads, "token {}: {agree} heads", i + 1);
    }
    let t = screen(&mut p);
    assert!(t.contains(&format!("strongest: 'The' {w}")), "{t}");
    assert!(t.contains("layer 13/30"), "{t}");
    both_say(&s, 3, &[format!("{heads}"), w, "13".into(), "mat".into()]);
    let (en, zh) = said(&s, 3);
    assert!(
        en.contains("Layer 13") && en.contains("all 9 heads"),
        "{en}"
    );
    assert!(!en.contains("line") && !zh.contains("连线"), "{en} {zh}");

    // Step 5: window:6; the loss on screen and in both narrations.
    let mut p = at(&s, 4);
    let ss = session(&p);
    assert_eq!(ss.options.mask, Some(MaskKind::Window(6)));
    let (o, w) = losses(ss);
    let (own, window) = (format!("{o:.3}"), format!("{w:.3}"));
    assert!(screen(&mut p).contains(&format!("loss {own} -> {window}")));
    both_say(&s, 5, &[own.clone(), window.clone()]);

    // Step 6: the same window with the first token kept visible (window:6,1), its loss on
    // screen beside the model's own; the narration's split of step 5's rise follows from
    // the three losses. `model run --mask window:6,1` gives the same loss, and so does
    // `--mask file:` with the same keep-mask, masked element by element instead of as a
    // band with a sink.
    let mut p = at(&s, 5);
    let ss = session(&p);
    assert_eq!(
        ss.options.mask,
        Some(MaskKind::WindowSinks {
            window: 6,
            sinks: 1
        })
    );
    let (o6, sink) = losses(ss);
    assert_eq!(o6, o);
    assert!(screen(&mut p).contains(&format!("loss {own} -> {sink:.3}")));
    let pre = s.pretrained().unwrap();
    let PretrainedInput::Text(sentence) = &pre.input else {
        panic!("attention-sinks reads a text")
    };
    let keep: Vec<f32> = (0..n * n)
        .map(|x| {
            let (i, j) = (x / n, x % n);
            if j <= i && (i - j < 6 || j == 0) {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sink-window.npy");
    attnviz::attn::npy::write_f32(
        &file,
        &ArrayD::from_shape_vec(IxDyn(&[n, n]), keep).unwrap(),
    )
    .unwrap();
    let run_loss = |mask: String| {
        let out = Command::cargo_bin("attnviz")
            .unwrap()
            .args(["model", "run", &pre.model, "--json", "--text"])
            .arg(sentence)
            .arg("--mask")
            .arg(mask)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["loss"].as_f64().unwrap()
    };
    let file_loss = run_loss(format!("file:{}", file.display()));
    assert!((file_loss - sink).abs() < 1e-4, "{file_loss} vs {sink}");
    let cli_loss = run_loss("window:6,1".into());
    assert!((cli_loss - sink).abs() < 1e-6, "{cli_loss} vs {sink}");
    assert!(o < sink && sink < w, "{o} {sink} {w}");
    both_say(
        &s,
        6,
        &[
            "window:6,1".into(),
            own.clone(),
            format!("{sink:.3}"),
            window.clone(),
            format!("{:.2}", w - o),
            format!("{:.2}", w - sink),
        ],
    );

    // Step 7: rollout's first column is about 1.0, and so it is for uniform causal
    // attention over as many layers: 0.998 to 1.000.
    let mut p = at(&s, 6);
    let ss = session(&p);
    assert!(ss.baseline.is_none() && ss.options.mask.is_none());
    let (en, zh) = said(&s, 7);
    assert!(
        en.starts_with("The model is back as it was.") && zh.starts_with("模型恢复原样，"),
        "{en} {zh}"
    );
    let all: Vec<Vec<f32>> = (0..layers)
        .map(|l| {
            (0..heads)
                .flat_map(|h| ss.head_weights(l, h).to_vec())
                .collect()
        })
        .collect();
    let r = rollout(&all, heads, n);
    assert!((0..n).all(|i| r[i * n] > 0.99), "{r:?}");
    let uniform: Vec<f32> = (0..n * n)
        .map(|x| {
            let (i, j) = (x / n, x % n);
            if j <= i { 1.0 / (i + 1) as f32 } else { 0.0 }
        })
        .collect();
    let u = rollout(&vec![uniform; layers], 1, n);
    let col: Vec<f64> = (0..n).map(|i| u[i * n]).collect();
    let lo = col.iter().copied().fold(f64::MAX, f64::min);
    let hi = col.iter().copied().fold(f64::MIN, f64::max);
    assert!(en.contains(&format!("{lo:.3} to {hi:.3}")), "{en} {col:?}");
    assert!(zh.contains(&format!("{lo:.3} 到 {hi:.3}")), "{zh} {col:?}");
    both_say(&s, 7, &[format!("{layers}")]);
    let t = screen(&mut p);
    assert!(t.contains(&format!("rollout over {layers} layers")), "{t}");
    assert!(
        t.contains("mask causal") && t.contains(&format!("loss {own} nats/token")),
        "{t}"
    );
}

#[test]
fn induction_real_names_the_heads_tokens_and_figures_of_the_run() {
    let Some(s) = lesson("induction-real") else {
        return;
    };
    let p = at(&s, 1);
    let ss = session(&p);
    assert_eq!(ss.n(), 100, "50 random tokens twice, no BOS");
    assert_eq!(ss.ids[..50], ss.ids[50..]);
    let mut sc = scores(ss);
    sc.sort_by(|a, b| b.1.induction.total_cmp(&a.1.induction));
    // Step 2: five heads of layers 18-19 (from 1) at 0.6 to 0.91, then exactly three more
    // above 0.3; step 5 ablates the five.
    let top: Vec<(usize, usize)> = sc.iter().take(5).map(|x| x.0).collect();
    assert_eq!(top[0], (18, 6));
    assert!(top.iter().all(|&(l, _)| l == 17 || l == 18), "{top:?}");
    let (best, fifth) = (sc[0].1.induction, sc[4].1.induction);
    assert!(fifth >= 0.6, "{fifth}");
    let mut more: Vec<(usize, usize)> = sc[5..8].iter().map(|x| x.0).collect();
    more.sort();
    assert_eq!(more, [(20, 6), (23, 2), (23, 7)]);
    assert!(sc[7].1.induction > 0.3 && sc[8].1.induction < 0.3);
    both_say(&s, 2, &[format!("{best:.2}"), "0.6".into(), "0.3".into()]);
    let (en, zh) = said(&s, 2);
    assert!(
        en.contains("Five heads in layers 18-19")
            && en.contains("layer 24 heads 3, 8 and layer 21 head 7"),
        "{en}"
    );
    assert!(
        zh.contains("第 18、19 层有 5 个头")
            && zh.contains("第 24 层第 3、8 个头和第 21 层第 7 个头"),
        "{zh}"
    );
    let mut ablated = s.steps[4].intervene.as_ref().unwrap().ablate.clone();
    ablated.sort();
    let mut want = top.clone();
    want.sort();
    assert_eq!(ablated, want);

    // Step 3: the cursor on the answer: from the second 'Bur' (75) to the token after the
    // first (26), 49 places back; every second-half token does the same in this head.
    let p = at(&s, 2);
    assert_eq!(p.state().view, ViewKind::Pipeline);
    assert_eq!(p.state().cursor, (75, 26));
    assert_eq!(p.state().head, 6);
    let ss = session(&p);
    assert_eq!((ss.pieces[25].trim(), ss.pieces[75].trim()), ("Bur", "Bur"));
    let copied: Vec<usize> = (50..100)
        .filter(|&i| argmax(&row(ss, 18, 6, i)) == i - 49)
        .collect();
    let (en, zh) = said(&s, 3);
    assert!(
        en.contains(&format!("{} of the 50 second-half tokens", copied.len())),
        "{en}"
    );
    assert!(
        zh.contains(&format!("后一半 50 个词元中有 {} 个", copied.len())),
        "{zh}"
    );
    assert!(copied.len() >= 45 && copied.contains(&75), "{copied:?}");
    let w = format!("{:.2}", row(ss, 18, 6, 75)[26]);
    both_say(&s, 3, &[w, "Bur".into()]);
    assert!(
        en.contains("Layer 19, head 7") && en.contains(&format!("{} places back", 75 - 26)),
        "{en}"
    );
    assert!(
        zh.contains("第 19 层第 7 个头") && zh.contains(&format!("相隔 {} 个位置", 75 - 26)),
        "{zh}"
    );
    for (cols, rows) in [(100, 30), (120, 40)] {
        let t = still_at(&s, 3, cols, rows);
        assert!(t.contains("weights (head 7)[75,26]"), "{cols}x{rows}:\n{t}");
    }
    assert!(still_at(&s, 3, 120, 40).contains("layer 19/30"));

    // Step 4: the strongest previous-token head before layer 18 (from 0: 17).
    let mut prev: Vec<_> = sc.iter().filter(|((l, _), _)| *l < 17).collect();
    prev.sort_by(|a, b| b.1.prev_token.total_cmp(&a.1.prev_token));
    assert_eq!(prev[0].0, (16, 0));
    let (en, zh) = said(&s, 4);
    let v = format!("{:.2}", prev[0].1.prev_token);
    assert!(en.contains(&format!("layer 17, head 1 ({v})")), "{en}");
    assert!(zh.contains(&format!("第 17 层第 1 个头（{v}）")), "{zh}");

    // Step 5: without the five the loss rises.
    let p = at(&s, 4);
    assert!(loss_change(session(&p)) > 1.0);

    // Step 6 claims no circuit and no training it does not show.
    let (en, zh) = said(&s, 6);
    for bad in ["circuit", "grow", "attnviz train"] {
        assert!(!en.contains(bad), "{en}");
    }
    for bad in ["回路", "两个头", "attnviz train"] {
        assert!(!zh.contains(bad), "{zh}");
    }
}

#[test]
fn gqa_real_draws_the_weights_of_all_nine_heads_and_names_them() {
    let Some(s) = lesson("gqa-real") else { return };
    let p = at(&s, 1);
    let c = session(&p).config().clone();
    assert_eq!((c.heads, c.kv_heads, c.d_head), (9, 3, 64));
    assert_eq!(p.state().view, ViewKind::Heads);
    let groups: Vec<usize> = (0..9).map(|h| p.state().pipeline.kv_group_for(h)).collect();
    assert_eq!(groups, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
    // Step 2: from '.' to 'Query', heads 7, 8, 9 of layer 4 (from 1).
    assert_eq!(p.state().cursor, (6, 0));
    let ss = session(&p);
    let n = ss.n();
    assert_eq!((ss.pieces[0].trim(), ss.pieces[6].trim()), ("Query", "."));
    let w: Vec<String> = (6..9)
        .map(|h| format!("{:.2}", row(ss, 3, h, 6)[0]))
        .collect();
    let (en, zh) = said(&s, 2);
    assert!(en.contains(&w.join(", ")), "{en} {w:?}");
    assert!(zh.contains(&w.join("、")), "{zh} {w:?}");
    // Every panel draws its cells: each masked cell's mark, in all nine, at both sizes.
    for (cols, rows) in [(100, 30), (120, 40)] {
        let t = still_at(&s, 2, cols, rows);
        let marks = t.matches('×').count();
        assert_eq!(marks, 9 * n * (n - 1) / 2 + 1, "{cols}x{rows}:\n{t}");
    }
    // Step 3: the cache against MHA.
    let mut p = at(&s, 2);
    let text = screen(&mut p);
    assert!(
        text.contains("MHA (9 KV heads)") && text.contains("(3.0x)"),
        "{text}"
    );
}

#[test]
fn rope_real_shows_its_base_and_its_figures_follow_from_it() {
    let Some(s) = lesson("rope-real") else { return };
    let mut p = at(&s, 0);
    let ss = session(&p);
    let own = ss.rope_base().unwrap();
    assert_eq!(own, 100000.0);
    let (d, context) = (ss.config().d_head, ss.config().context);
    assert!(screen(&mut p).contains("PE rope:100000 "));
    // Step 3: base 10000, which the header names; the losses on screen and in the text.
    let mut p = at(&s, 2);
    let ss = session(&p);
    assert_eq!(ss.rope_base(), Some(10000.0));
    let (before, after) = losses(ss);
    assert!((after - before).abs() < 0.2, "{before} {after}");
    let t = screen(&mut p);
    assert!(t.contains("PE rope:10000 "), "{t}");
    both_say(&s, 3, &[format!("{before:.3} -> {after:.3}")]);
    // Step 4: no RoPE, the causal mask still in force; the rise is the one on screen.
    let mut p = at(&s, 3);
    let ss = session(&p);
    assert!(ss.options.no_pe && ss.options.mask.is_none() && ss.config().causal);
    let (before, none) = losses(ss);
    assert!(none - before > (after - before).abs() + 0.5);
    assert!(screen(&mut p).contains(&format!("loss {before:.3} -> {none:.3}")));
    both_say(&s, 4, &[format!("{before:.3} -> {none:.3}")]);
    let (en, _) = said(&s, 4);
    assert!(
        en.contains("mask") && !en.contains("cannot tell order"),
        "{en}"
    );
    // Step 5: periods 2 pi base^(2i/d): base 10000's slowest is already beyond the
    // context; how many pairs turn less than once in it, with each base.
    let periods = |base: f64| -> Vec<f64> {
        (0..d / 2)
            .map(|i| std::f64::consts::TAU * base.powf(2.0 * i as f64 / d as f64))
            .collect()
    };
    let slow = *periods(10000.0).last().unwrap();
    assert!(slow > context as f64);
    let slow = format!("~{:.0},000", (slow / 1000.0).round());
    let slower = |base: f64| {
        periods(base)
            .iter()
            .filter(|&&p| p > context as f64)
            .count()
    };
    let (ours, theirs) = (slower(own), slower(10000.0));
    let ctx = attnviz::engine::memory::group_digits(context as u64);
    let (en, zh) = said(&s, 5);
    assert!(
        en.contains(&slow)
            && en.contains(&ctx)
            && en.contains(&format!("{ours} of {}", d / 2))
            && en.contains(&format!("not {theirs}")),
        "{en}"
    );
    assert!(
        zh.contains(&slow[1..])
            && zh.contains(&ctx)
            && zh.contains(&format!("{} 对中有 {ours} 对", d / 2))
            && zh.contains(&format!("而不是 {theirs} 对")),
        "{zh}"
    );
}

#[test]
fn bert_attention_names_minilms_positions_and_its_cls_heads() {
    let Some(s) = lesson("bert-attention") else {
        return;
    };
    let mut p = at(&s, 1);
    let ss = session(&p);
    let n = ss.n();
    assert_eq!(n, 12);
    assert_eq!(ss.pieces[0], "[CLS]");
    assert_eq!(ss.pieces[7], "[SEP]");
    assert!(ss.pieces[8..].iter().all(|t| t == "[PAD]"));
    let heads = ss.config().heads;
    let mut above = 0.0f32;
    for h in 0..heads {
        let a = ss.head_weights(0, h);
        for i in 0..n {
            for j in 8..n {
                assert_eq!(a[i * n + j], 0.0, "head {h} row {i} key {j}");
            }
            above += a[i * n + i + 1..i * n + 8.max(i + 1)].iter().sum::<f32>();
        }
    }
    assert!(above > 1.0, "no weight above the diagonal: {above}");
    // The header names MiniLM's learned positions.
    let t = screen(&mut p);
    assert!(t.contains("PE learned") && !t.contains("PE none"), "{t}");
    // Step 4: over the sentence's rows, most heads of layers 2 to 5 put more than half
    // their weight on [CLS]; no head anywhere gives [SEP] 0.3.
    let p = at(&s, 3);
    let ss = session(&p);
    let mean_on = |l: usize, h: usize, key: usize| -> f32 {
        (0..8).map(|i| row(ss, l, h, i)[key]).sum::<f32>() / 8.0
    };
    for l in 1..5 {
        let cls = (0..heads).filter(|&h| mean_on(l, h, 0) > 0.5).count();
        assert!(cls * 2 > heads, "layer {}: {cls} heads", l + 1);
    }
    for l in 0..ss.config().layers {
        for h in 0..heads {
            assert!(mean_on(l, h, 7) < 0.3, "layer {} head {}", l + 1, h + 1);
        }
    }
    let (en, zh) = said(&s, 4);
    assert!(
        en.contains("layers 2 to 5") && en.contains("[SEP] 0.3"),
        "{en}"
    );
    assert!(zh.contains("第 2 到 5 层") && zh.contains("0.3"), "{zh}");
    // Step 5: without the padding mask the real tokens read the [PAD] keys.
    let p = at(&s, 4);
    let a = session(&p).head_weights(0, 0);
    assert!(a[2 * n + 8..2 * n + 12].iter().sum::<f32>() > 0.01);
}

/// weights-contributions: layer 24 head 3 from the last ' the' by weight and by
/// contribution, and the layer's mean first-token score both ways, as the session keeps
/// them at each step and as the screen shows them.
#[test]
fn weights_contributions_quotes_both_measures_of_the_same_heads() {
    let Some(s) = lesson("weights-contributions") else {
        return;
    };
    let (layer, head, q) = (23, 2, 11);
    // Step 1: by weight, 'The' takes most of the row.
    let mut p = at(&s, 0);
    let ss = session(&p);
    assert_eq!(ss.pieces[q].trim(), "the");
    assert_eq!(ss.top_next[0].id, ss.ids[5], "the model says mat next");
    let w = row(ss, layer, head, q);
    assert_eq!(argmax(&w), 0);
    both_say(&s, 1, &[format!("{:.3}", w[0])]);
    let t = screen(&mut p);
    assert!(t.contains(&format!("{:.2}", w[0])), "{t}");
    // Step 2: the session keeps the contributions; 'The' falls, ' mat' leads.
    let mut p = at(&s, 1);
    let ss = session(&p);
    let c = ss
        .contributions
        .as_ref()
        .expect("contributions kept")
        .row(layer, head, q);
    let mat = argmax(&c);
    assert_eq!(ss.pieces[mat].trim(), "mat");
    assert!(c[0] < w[0] / 2.0, "{} against {}", c[0], w[0]);
    both_say(&s, 2, &[format!("{:.3}", c[0]), format!("{:.3}", c[mat])]);
    let t = screen(&mut p);
    assert!(t.contains("contributions"), "{t}");
    assert!(t.contains(&format!("{:.2}", c[mat])), "{t}");
    // Step 3: the layer's first-token score, weights against contributions.
    let p = at(&s, 2);
    let ss = session(&p);
    let heads = ss.config().heads;
    let first = |m: &attnviz::model::maps::AttentionMaps| {
        let mut sum = 0.0;
        for h in 0..heads {
            sum += (1..ss.n())
                .map(|i| m.row(layer, h, i)[0] as f64)
                .sum::<f64>()
                / (ss.n() - 1) as f64;
        }
        sum / heads as f64
    };
    let (by_w, by_c) = (
        first(&ss.attention),
        first(ss.contributions.as_ref().unwrap()),
    );
    assert!(by_c < by_w * 0.6, "{by_c} against {by_w}");
    both_say(&s, 3, &[format!("{by_w:.3}"), format!("{by_c:.3}")]);
    let mut p = at(&s, 2);
    let t = screen(&mut p);
    let shown_c = format!("{:.0}%", by_c * 100.0);
    assert!(
        t.lines()
            .any(|l| l.starts_with("L24") && l.contains(&shown_c)),
        "{t}"
    );
    // Step 4: back on weights, the same row reads the weight's share.
    let mut p = at(&s, 3);
    let t = screen(&mut p);
    let shown_w = format!("{:.0}%", by_w * 100.0);
    assert!(
        t.lines()
            .any(|l| l.starts_with("L24") && l.contains(&shown_w)),
        "{t}"
    );
    both_say(&s, 4, &[shown_w]);
}

/// The lens the player computed at this step, ready.
fn lens_at(p: &attnviz::record::Headless) -> std::sync::Arc<attnviz::model::lens::TextLens> {
    use attnviz::tui::views::lens::{LensState, lab};
    match &lab(p.state()).expect("the lens view's lab").state {
        LensState::Ready(l) => l.clone(),
        other => panic!("the lens is not ready: {other:?}"),
    }
}

/// A narration's figure as the lessons write a negative one (with U+2212).
fn signed(v: f64, digits: usize) -> String {
    format!("{v:+.digits$}").replace('-', "\u{2212}")
}

#[test]
fn logit_lens_quotes_the_lens_of_the_model_at_play_time() {
    use attnviz::tui::views::lens::percent;
    let Some(s) = lesson("logit-lens") else {
        return;
    };
    let mut p = at(&s, 0);
    let ss = session(&p);
    let model = ss.model.clone();
    let tok = &model.tokenizer;
    let text = |id: u32| tok.decode(&[id]);
    let layers = ss.config().layers;
    let (last, paris) = (ss.n() - 1, ss.top_next[0].id);
    assert_eq!(text(paris), " Paris");
    let lens = lens_at(&p);
    // Step 1: the last row is the model's own output.
    let out = &lens.cells[layers][last].top[0];
    assert_eq!(out.id, paris);
    let shown = percent(out.prob).trim().to_string();
    both_say(&s, 1, &[shown.clone(), "Paris".into()]);
    assert!(screen(&mut p).contains(&shown));
    // Step 2: one layer earlier, ' capital' and ' the' lead and ' Paris' is third.
    let mut p = at(&s, 1);
    let cell = &lens_at(&p).cells[layers - 1][last];
    assert_eq!(text(cell.top[0].id), " capital");
    assert_eq!(text(cell.top[1].id), " the");
    assert_eq!(cell.top[2].id, paris);
    let figs: Vec<String> = cell.top[..3]
        .iter()
        .map(|t| format!("{:.3}", t.prob))
        .collect();
    both_say(&s, 2, &figs);
    let t = screen(&mut p);
    assert!(figs.iter().all(|f| t.contains(f.as_str())), "{t}");
    // Step 3: the answer's rank after layers 20, 24 and 28, on the target cells.
    let mut p = at(&s, 2);
    let lens = lens_at(&p);
    let ranks: Vec<String> = [20, 24, 28]
        .iter()
        .map(|&l| format!("#{}", lens.cells[l][last].target.unwrap().0 + 1))
        .collect();
    assert!(
        lens.cells[28][last].target.unwrap().0 > 0,
        "not first before the output"
    );
    both_say(&s, 3, &ranks);
    let t = screen(&mut p);
    assert!(t.contains("the target's rank"), "{t}");
    assert!(ranks.iter().all(|r| t.contains(r.as_str())), "{t}");
    // Step 4: ' of' after ' capital' is first from layer 19 on; 77% there, 100% first at 25.
    let p = at(&s, 3);
    let lens = lens_at(&p);
    assert_eq!(text(ss_id(&p, 2)), " of");
    let first = (0..=layers)
        .rev()
        .take_while(|&l| lens.cells[l][1].target.unwrap().0 == 0)
        .last()
        .unwrap();
    assert_eq!(first, 19);
    let prob = |l: usize| {
        percent(lens.cells[l][1].target.unwrap().1)
            .trim()
            .to_string()
    };
    let full = (0..=layers).find(|&l| prob(l) == "100%").unwrap();
    assert_eq!(full, 25);
    both_say(&s, 4, &[prob(first), "100%".into()]);
    let (en, zh) = said(&s, 4);
    for l in [first, full] {
        assert!(en.contains(&format!("layer {l}")), "{en}");
        assert!(zh.contains(&format!("第 {l} 层")), "{zh}");
    }
    // Step 5: mid-depth, the last position reads a space.
    let mut p = at(&s, 4);
    let cell = &lens_at(&p).cells[20][last].top[0];
    assert_eq!(text(cell.id), " ");
    let shown = percent(cell.prob).trim().to_string();
    both_say(&s, 5, std::slice::from_ref(&shown));
    let t = screen(&mut p);
    assert!(t.contains(&format!("{:.3}", cell.prob)), "{t}");
}

fn ss_id(p: &attnviz::record::Headless, i: usize) -> u32 {
    session(p).ids[i]
}

#[test]
fn answer_heads_splits_the_answer_and_tests_the_largest_part() {
    use attnviz::tui::views::attribution::{AttributionState, lab};
    let Some(s) = lesson("answer-heads") else {
        return;
    };
    let answer = |p: &attnviz::record::Headless| match &lab(p.state()).expect("a lab").state {
        AttributionState::Ready(a) => a.clone(),
        other => panic!("the attribution is not ready: {other:?}"),
    };
    // Step 1: the parts of logit(Paris) - logit(the) add up to the model's own difference.
    let mut p = at(&s, 0);
    let ss = session(&p);
    let model = ss.model.clone();
    let tok = &model.tokenizer;
    let a = answer(&p);
    assert_eq!(tok.decode(&[a.target.id]), " Paris");
    assert_eq!(tok.decode(&[a.foil.id]), " the");
    assert!(a.adds_up());
    let own = format!("{:.3}", a.own());
    both_say(&s, 1, std::slice::from_ref(&own));
    let t = screen(&mut p);
    assert!(t.contains(&own) && t.contains('✓'), "{t}");
    // Step 2: the largest head, larger than the whole; all heads and all MLPs.
    let mut p = at(&s, 1);
    let at2 = answer(&p).attribution.clone();
    let heads = &at2.heads;
    let big = (0..heads.len())
        .flat_map(|l| (0..heads[l].len()).map(move |h| (l, h)))
        .max_by(|x, y| heads[x.0][x.1].abs().total_cmp(&heads[y.0][y.1].abs()))
        .unwrap();
    assert_eq!(big, (23, 4));
    assert!(heads[23][4] > a.own());
    let all: f64 = heads.iter().flatten().sum();
    let mlp: f64 = at2.mlp.iter().sum();
    both_say(
        &s,
        2,
        &[signed(heads[23][4], 3), signed(all, 3), signed(mlp, 3)],
    );
    let t = screen(&mut p);
    assert!(t.contains("layer 24/30 head 5"), "{t}");
    assert!(t.contains(&format!("{:+.3}", heads[23][4])), "{t}");
    // Step 3: from ' is' the head looks at ' France'.
    let mut p = at(&s, 2);
    let ss = session(&p);
    let w = row(ss, 23, 4, ss.n() - 1);
    let j = argmax(&w);
    assert_eq!(ss.pieces[j].trim(), "France");
    both_say(&s, 3, &[format!("{:.3}", w[j])]);
    assert!(screen(&mut p).contains(&format!("{:.2}", w[j])));
    // Step 4: ablating it: ' Paris' before and after, and ' London' after.
    let mut p = at(&s, 3);
    let ss = session(&p);
    let pct = |v: f64| format!("{:.0}%", v * 100.0);
    let before = &ss.baseline.as_ref().expect("an intervened run").top_next;
    assert_eq!(before[0].id, a.target.id);
    let after = &ss.top_next;
    let find = |id: u32| after.iter().find(|t| t.id == id).map(|t| t.prob).unwrap();
    let london = after
        .iter()
        .find(|t| tok.decode(&[t.id]) == " London")
        .expect("London among the top tokens after");
    let figs = [
        pct(before[0].prob),
        pct(find(a.target.id)),
        pct(london.prob),
    ];
    assert!(find(a.target.id) < before[0].prob / 2.0);
    both_say(&s, 4, &figs);
    let t = screen(&mut p);
    assert!(figs.iter().all(|f| t.contains(f.as_str())), "{t}");
    // Step 5: layer 30's first two heads nearly cancel.
    let mut p = at(&s, 4);
    let h = &answer(&p).attribution.heads[29];
    assert!((h[0] + h[1]).abs() < 0.25 * h[0].abs().min(h[1].abs()));
    both_say(&s, 5, &[signed(h[0], 2), signed(h[1], 2)]);
    let t = screen(&mut p);
    assert!(
        t.contains(&format!("{:+.2}", h[0])) && t.contains(&format!("{:+.2}", h[1])),
        "{t}"
    );
}

#[test]
fn fact_patching_quotes_the_sweeps_of_the_model_at_play_time() {
    use attnviz::tui::views::patch::{PatchState, lab};
    let Some(s) = lesson("fact-patching") else {
        return;
    };
    let sweep = |p: &attnviz::record::Headless| match &lab(p.state()).expect("a lab").state {
        PatchState::Ready(o) => o.clone(),
        other => panic!("the sweep is not ready: {other:?}"),
    };
    // Step 1: the answer and the foil, and both runs' logit differences.
    let mut p = at(&s, 0);
    let ss = session(&p);
    let model = ss.model.clone();
    let tok = &model.tokenizer;
    let o = sweep(&p);
    assert_eq!(tok.decode(&[o.target.id]), " Paris");
    assert_eq!(tok.decode(&[o.foil.id]), " Rome");
    let (clean, corrupt) = (o.result.clean_ld, o.result.corrupt_ld);
    assert!(clean > 0.0 && corrupt < 0.0, "{clean} {corrupt}");
    both_say(&s, 1, &[format!("{clean:.3}"), signed(corrupt, 3)]);
    let t = screen(&mut p);
    assert!(t.contains(&format!("clean {clean:.3}")), "{t}");
    assert!(t.contains(&format!("corrupt {corrupt:.3}")), "{t}");
    // Step 2: the subject's residual entering block 24 restores the answer.
    let mut p = at(&s, 1);
    let o = sweep(&p);
    let m = o.result.rows[23][3];
    assert!((m - 1.0).abs() < 0.05, "{m}");
    let top = &o.tops[23][3][0];
    assert_eq!(top.id, o.target.id);
    let pct = format!("{:.0}%", top.prob * 100.0);
    both_say(&s, 2, &[format!("{m:.2}"), pct.clone()]);
    let t = screen(&mut p);
    assert!(t.contains(&format!("{m:.3}")) && t.contains(&pct), "{t}");
    // Step 3: one block later the subject no longer matters and the last position does;
    // entering block 24 it was the other way round.
    let mut p = at(&s, 2);
    let o = sweep(&p);
    let (gone, moved) = (o.result.rows[24][3], o.result.rows[24][4]);
    assert!(
        gone.abs() < 0.1 && (moved - 1.0).abs() < 0.05,
        "{gone} {moved}"
    );
    assert!(o.result.rows[23][4].abs() < 0.1);
    both_say(&s, 3, &[signed(gone, 2), format!("{moved:.2}")]);
    let t = screen(&mut p);
    assert!(t.contains(&format!("{moved:.3}")), "{t}");
    // Step 4: one head's output restores most of it: the head with the largest metric.
    let mut p = at(&s, 3);
    let o = sweep(&p);
    let rows = &o.result.rows;
    let best = (0..rows.len())
        .flat_map(|l| (0..rows[l].len()).map(move |h| (l, h)))
        .max_by(|a, b| rows[a.0][a.1].total_cmp(&rows[b.0][b.1]))
        .unwrap();
    assert_eq!(best, (23, 4));
    both_say(&s, 4, &[format!("{:.3}", rows[23][4])]);
    let t = screen(&mut p);
    assert!(
        t.contains("layer 24 · head 5") && t.contains(&format!("{:.3}", rows[23][4])),
        "{t}"
    );
    // The same head reads ' France' from ' is' (the answer-heads lesson's claim).
    let w = row(session(&p), 23, 4, 4);
    assert_eq!(argmax(&w), 3);
    // Step 5: at the subject, block 1's MLP output restores it all, later ones little.
    let mut p = at(&s, 4);
    let o = sweep(&p);
    let first = o.result.rows[0][3];
    let later = (1..o.result.rows.len())
        .map(|l| o.result.rows[l][3])
        .fold(f64::NEG_INFINITY, f64::max);
    assert!((first - 1.0).abs() < 0.05 && later < 0.5, "{first} {later}");
    both_say(&s, 5, &[format!("{first:.2}"), format!("{later:.2}")]);
    let t = screen(&mut p);
    assert!(
        t.contains("MLP output") && t.contains(&format!("{first:.3}")),
        "{t}"
    );
}

#[test]
fn induction_circuit_quotes_composition_and_ablation_of_the_model_at_play_time() {
    use attnviz::model::composition::composition_scores;
    let Some(s) = lesson("induction-circuit") else {
        return;
    };
    let (ind, prev) = ((18, 6), (16, 0));
    let score = |ss: &ModelSession, (l, h): (usize, usize)| {
        scores(ss)
            .into_iter()
            .find(|(k, _)| *k == (l, h))
            .unwrap()
            .1
    };
    // Step 1: the strongest induction head.
    let mut p = at(&s, 0);
    let ss = session(&p);
    let all = scores(ss);
    let best = all
        .iter()
        .max_by(|a, b| a.1.induction.total_cmp(&b.1.induction))
        .unwrap();
    assert_eq!(best.0, ind);
    let before = best.1.induction;
    both_say(&s, 1, &[format!("{before:.2}")]);
    let t = screen(&mut p);
    assert!(
        t.contains("layer 19/30 · head 7/9") && t.contains(&format!("induction {before:.2}")),
        "{t}"
    );
    // Step 2: the previous-token head, the strongest before the induction head's layer.
    let mut p = at(&s, 1);
    let ss = session(&p);
    let pt = score(ss, prev).prev_token;
    let strongest = scores(ss)
        .into_iter()
        .filter(|(k, _)| k.0 < ind.0)
        .max_by(|a, b| a.1.prev_token.total_cmp(&b.1.prev_token))
        .unwrap();
    assert_eq!(strongest.0, prev);
    both_say(&s, 2, &[format!("{pt:.2}")]);
    assert!(screen(&mut p).contains(&format!("prev-token {pt:.2}")));
    // Step 3: K-composition into the induction head, from the weights.
    let mut p = at(&s, 2);
    let ss = session(&p);
    let m = &ss.model;
    let layers: Vec<usize> = (0..=ind.0).collect();
    let comp = composition_scores(&m.config, &m.weights, &layers, 2).unwrap();
    let mut k: Vec<_> = comp
        .iter()
        .filter(|c| (c.layer_b, c.head_b) == ind)
        .map(|c| ((c.layer_a, c.head_a), c.k))
        .collect();
    k.sort_by(|a, b| b.1.total_cmp(&a.1));
    assert_eq!(k[1].0, prev, "{:?}", &k[..3]);
    let (first, second) = (k[0], k[1]);
    both_say(
        &s,
        3,
        &[
            format!("{:.3}", second.1),
            format!("{:.3}", first.1),
            format!("L{} h{}", first.0.0 + 1, first.0.1 + 1),
        ],
    );
    let t = screen(&mut p);
    let line = format!(
        "k L{} h{} {:.3}  L17 h1 {:.3}",
        first.0.0 + 1,
        first.0.1 + 1,
        first.1,
        second.1
    );
    assert!(t.contains(&line), "{line}\n{t}");
    // Step 4: ablating the previous-token head alone.
    let mut p = at(&s, 3);
    let ss = session(&p);
    let after = score(ss, ind).induction;
    assert!(after < before / 2.0, "{after} against {before}");
    // Layer 18's induction heads (over 0.5 before) fall too.
    let base = at(&s, 0);
    for h in 0..ss.config().heads {
        if score(session(&base), (17, h)).induction > 0.5 {
            assert!(score(ss, (17, h)).induction < 0.2, "L18 h{}", h + 1);
        }
    }
    let (l0, l1) = losses(ss);
    both_say(
        &s,
        4,
        &[
            format!("{before:.2}"),
            format!("{after:.2}"),
            format!("{l0:.3}"),
            format!("{l1:.3}"),
        ],
    );
    let t = screen(&mut p);
    assert!(t.contains(&format!("induction {after:.2}")), "{t}");
    assert!(t.contains(&format!("loss {l0:.3} -> {l1:.3}")), "{t}");
    // Step 5: patching each head's output from the repeat into the input with another
    // first half: the previous-token head restores the most of any head.
    use attnviz::tui::views::patch::{PatchState, lab};
    let mut p = at(&s, 4);
    let o = match &lab(p.state()).expect("a lab").state {
        PatchState::Ready(o) => o.clone(),
        other => panic!("the sweep is not ready: {other:?}"),
    };
    let rows = &o.result.rows;
    let best = (0..rows.len())
        .flat_map(|l| (0..rows[l].len()).map(move |h| (l, h)))
        .max_by(|a, b| rows[a.0][a.1].total_cmp(&rows[b.0][b.1]))
        .unwrap();
    assert_eq!(best, prev);
    let restored = format!("{:.3}", rows[prev.0][prev.1]);
    both_say(&s, 5, &["L17 h1".to_string(), restored.clone()]);
    let t = screen(&mut p);
    assert!(
        t.contains("layer 17 · head 1") && t.contains(&format!("head 1: {restored}")),
        "{t}"
    );
    // Step 6: back on the model view, on the induction head.
    let mut p = at(&s, 5);
    assert!(screen(&mut p).contains("layer 19/30 · head 7/9"));
}
