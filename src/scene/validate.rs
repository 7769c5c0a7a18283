//! From the file as written ([`RawScene`]) to a checked [`Scene`].
//!
//! Every check records its problem at the span of the offending value and carries on, so
//! one run of `attnviz scene check` lists everything wrong with a file, not just the
//! first thing.

use std::ops::Range;

use toml::Spanned;

use super::problem::{Problem, Problems, SceneError, from_toml, line_column};
use super::raw::{RawModel, RawPretrained, RawScene, RawText};
use super::view::SceneView;
use super::{
    CompareInput, FlashBlocks, Localized, Pretrained, PretrainedInput, Scene, SceneModel, Step,
};
use crate::engine::config::{MaskKind, PeKind};
use crate::engine::pipeline::{ModelConfig, Pipeline, StageId};

/// The only format version there is.
pub const VERSION: i64 = 1;
/// Most tokens a scene may have: every view must still fit a 100x30 terminal.
pub const MAX_TOKENS: usize = 32;
pub const MAX_D_MODEL: usize = 512;
pub const MAX_HEADS: usize = 16;
/// Longest dwell of one step, in seconds.
pub const MAX_DWELL_S: f64 = 120.0;
/// Longest a scene may last at speed 1, in milliseconds: a recording plays it in
/// virtual time and refuses to go on past this (at speed s, past this / s).
pub const MAX_DURATION_MS: u64 = 6 * 60 * 60 * 1000;
/// Dwell of a step that does not say, in seconds.
pub const DEFAULT_DWELL_S: f64 = 4.0;
/// The flash view's block size when a scene does not set one.
pub const DEFAULT_FLASH_BLOCK: usize = 2;
/// Longest random half (`repeat`) of a trained model's lesson: twice this plus a BOS
/// still fits the model view's maps.
pub const MAX_REPEAT: usize = 64;
/// Most tokens `pad_to` may ask for.
pub const MAX_PAD_TO: usize = 64;
/// Tiles or tokens a second of a step's `animate` that does not say.
pub const DEFAULT_ANIMATE_RATE: f64 = 2.0;
/// The fastest `animate` plays: the flash view's own top speed.
pub const MAX_ANIMATE_RATE: f64 = 64.0;
/// Tiles per side of the flash grid when a scene sets no `[flash]`: the app's own
/// choice for n tokens, blocks of ceil(n / 4) (`tui::views::flash::default_block`; a test
/// keeps the two equal).
pub const DEFAULT_FLASH_TILES_PER_SIDE: usize = 4;

/// The flash view's block size for `n` tokens when a scene does not set one.
pub fn default_flash_block(n: usize) -> usize {
    n.div_ceil(DEFAULT_FLASH_TILES_PER_SIDE).max(1)
}

/// Parse and check a scene's source. `file` is how errors name it.
pub fn parse(name: &str, file: &str, src: &str) -> Result<Scene, SceneError> {
    let single = |p: Problem| SceneError {
        file: file.to_string(),
        problems: vec![p],
    };
    // The version decides how to read the rest, so look at it alone first: a file of a
    // future version should get one clear message, not a list of unknown keys.
    check_version(src).map_err(single)?;
    let raw: RawScene = toml::from_str(src).map_err(|e| single(from_toml(src, &e)))?;
    let mut problems = Problems::new(src);
    let scene = Checker { p: &mut problems }.scene(name, file, raw);
    match scene {
        Some(scene) if problems.is_empty() => Ok(scene),
        None if problems.is_empty() => {
            // Every check that fails records a problem; this is a bug in the checks.
            problems.at(
                0..0,
                "",
                "internal error: the scene was refused without a reason",
            );
            Err(problems.into_error(file))
        }
        _ => Err(problems.into_error(file)),
    }
}

fn check_version(src: &str) -> Result<(), Problem> {
    #[derive(serde::Deserialize)]
    struct VersionOnly {
        version: Option<Spanned<toml::Value>>,
    }
    let at = |span: Range<usize>, message: String| {
        let (line, column) = line_column(src, span.start);
        Problem {
            line,
            column,
            field: "version".into(),
            message,
        }
    };
    let only: VersionOnly = toml::from_str(src).map_err(|e| from_toml(src, &e))?;
    match only.version {
        None => Err(at(
            0..0,
            format!("missing: write `version = {VERSION}` at the top of the file"),
        )),
        Some(v) => match v.get_ref() {
            toml::Value::Integer(VERSION) => Ok(()),
            toml::Value::Integer(other) => Err(at(
                v.span(),
                format!("version {other} is not supported; this attnviz reads version = {VERSION}"),
            )),
            other => Err(at(
                v.span(),
                format!("expected the integer {VERSION}, found {}", other.type_str()),
            )),
        },
    }
}

pub(super) struct Checker<'p, 's> {
    pub(super) p: &'p mut Problems<'s>,
}

/// The model's shape as far as it is valid: what the steps are checked against. A
/// field that is wrong is already reported; checks that need it are skipped rather than
/// reported again as a consequence.
pub(super) struct Shape {
    pub(super) n: usize,
    pub(super) d_model: usize,
    pub(super) heads: usize,
    pub(super) pe: Option<PeKind>,
}

/// What the steps of a scene are checked against.
#[derive(Clone, Copy)]
pub(super) struct Model<'a> {
    pub(super) shape: Option<&'a Shape>,
    /// Built when the whole model is valid.
    pub(super) pipeline: Option<&'a Pipeline>,
    /// The lesson runs on a trained model: its sizes are known only when it is loaded.
    pub(super) pretrained: bool,
    /// The lesson trains its model as it plays (`[train]`).
    pub(super) train: bool,
}

/// The stage the app shows, as far as the steps so far tell.
#[derive(Clone, Copy)]
pub(super) enum Shown<T> {
    /// Not set by any step yet.
    Unset,
    Set(T),
    /// Set by a step with a wrong name (already reported).
    Invalid,
}

/// What the app shows while a step plays: steps only say what changes.
pub(super) struct Current {
    pub(super) view: Shown<SceneView>,
    pub(super) stage: Shown<StageId>,
    /// The app starts on the first head.
    pub(super) head: usize,
}

impl Checker<'_, '_> {
    fn scene(&mut self, name: &str, file: &str, raw: RawScene) -> Option<Scene> {
        let title = self.text(&raw.title, "title");
        let tables = [
            raw.model.as_ref().map(|m| m.span()),
            raw.pretrained.as_ref().map(|m| m.span()),
            raw.train.as_ref().map(|m| m.span()),
        ];
        let (model, shape, pipeline) = match (&raw.model, &raw.pretrained, &raw.train) {
            (Some(m), None, None) => {
                let (config, shape) = self.model(m);
                // The engine's own pipeline gives the true shape of every stage's matrices.
                let pipeline = config.as_ref().and_then(|c| match Pipeline::build(c) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        self.p.on(m, "model", e.to_string());
                        None
                    }
                });
                (config.map(SceneModel::Toy), shape, pipeline)
            }
            (None, Some(p), None) => (self.pretrained(p).map(SceneModel::Pretrained), None, None),
            (None, None, Some(t)) => (self.train(t).map(SceneModel::Train), None, None),
            (None, None, None) => {
                self.p.at(
                    0..0,
                    "model",
                    "missing: a scene needs a [model] table (a small seeded model), a [pretrained] table (a trained model) or a [train] table (a model trained as the lesson plays)",
                );
                (None, None, None)
            }
            _ => {
                let second = tables.into_iter().flatten().nth(1).unwrap_or(0..0);
                self.p.at(
                    second,
                    "model",
                    "a scene runs one of a seeded [model], a trained [pretrained] model or a [train] run; remove the others",
                );
                (None, None, None)
            }
        };
        let is_train = raw.train.is_some() && raw.model.is_none() && raw.pretrained.is_none();
        let is_pretrained = raw.pretrained.is_some() && raw.model.is_none();
        let view = match &raw.view {
            Some(v) if is_train && v.get_ref() != "train" => {
                self.p.on(
                    v,
                    "view",
                    "a [train] lesson plays in the train view; leave `view` out",
                );
                None
            }
            Some(v) => self.view(v, "view"),
            None if is_train => Some(SceneView::Train),
            None => Some(SceneView::Pipeline),
        };
        let flash = self.flash(&raw, shape.as_ref().map_or(1, |s| s.n));
        if raw.steps.get_ref().is_empty() {
            self.p.on(
                &raw.steps,
                "steps",
                "a scene needs at least one [[steps]] table",
            );
        }
        let mut current = Current {
            view: view.map_or(Shown::Invalid, Shown::Set),
            stage: Shown::Unset,
            head: 0,
        };
        let steps: Vec<Option<Step>> = raw
            .steps
            .get_ref()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let model = Model {
                    shape: shape.as_ref(),
                    pipeline: pipeline.as_ref(),
                    pretrained: is_pretrained,
                    train: is_train,
                };
                self.step(i, s, model, flash, &mut current)
            })
            .collect();
        let run_ms = match &model {
            Some(SceneModel::Train(t)) => t.duration_ms(),
            _ => 0,
        };
        let total_ms: u64 = steps.iter().flatten().map(|s| s.dwell_ms).sum::<u64>() + run_ms;
        if total_ms > MAX_DURATION_MS {
            self.p.on(
                &raw.steps,
                "steps",
                format!(
                    "the steps last {:.0} s in all at speed 1; a scene may last at most {} hours ({} s, MAX_DURATION_MS), the longest a recording plays: shorten the dwell times or split the scene",
                    total_ms as f64 / 1000.0,
                    MAX_DURATION_MS / 3_600_000,
                    MAX_DURATION_MS / 1000
                ),
            );
            return None;
        }
        Some(Scene {
            name: name.to_string(),
            source: file.to_string(),
            title: title?,
            model: model?,
            view: view?,
            flash: flash?,
            flash_set: raw.flash.is_some(),
            steps: steps.into_iter().collect::<Option<Vec<_>>>()?,
        })
    }

    pub(super) fn text(&mut self, raw: &Spanned<RawText>, field: &str) -> Option<Localized> {
        let t = raw.get_ref();
        let mut ok = true;
        for (lang, s) in [("en", &t.en), ("zh", &t.zh)] {
            if s.get_ref().trim().is_empty() {
                self.p
                    .on(s, format!("{field}.{lang}"), "is empty; write the text");
                ok = false;
            }
        }
        ok.then(|| Localized {
            en: t.en.get_ref().trim().to_string(),
            zh: t.zh.get_ref().trim().to_string(),
        })
    }

    pub(super) fn view(&mut self, v: &Spanned<String>, field: &str) -> Option<SceneView> {
        v.get_ref()
            .parse::<SceneView>()
            .map_err(|msg| self.p.on(v, field, msg))
            .ok()
    }

    /// A whole number within `range`, or a problem saying what would be right.
    pub(super) fn count(
        &mut self,
        v: &Spanned<i64>,
        field: &str,
        range: std::ops::RangeInclusive<usize>,
    ) -> Option<usize> {
        match usize::try_from(*v.get_ref()) {
            Ok(x) if range.contains(&x) => Some(x),
            _ => {
                self.p.on(
                    v,
                    field,
                    format!(
                        "{} is out of range; expected {}..={}",
                        v.get_ref(),
                        range.start(),
                        range.end()
                    ),
                );
                None
            }
        }
    }

    /// The model config if every field is right, and the shape the steps are checked
    /// against if the fields it needs are.
    fn model(&mut self, raw: &Spanned<RawModel>) -> (Option<ModelConfig>, Option<Shape>) {
        let m = raw.get_ref();
        let tokens = ModelConfig::tokens_from_text(m.tokens.get_ref());
        let n = if tokens.is_empty() || tokens.len() > MAX_TOKENS {
            self.p.on(
                &m.tokens,
                "model.tokens",
                format!(
                    "has {} tokens; a scene needs 1..={MAX_TOKENS} so every view fits",
                    tokens.len()
                ),
            );
            None
        } else {
            Some(tokens.len())
        };
        let d_model = self.count(&m.d_model, "model.d_model", 1..=MAX_D_MODEL);
        let mut heads = self.count(&m.heads, "model.heads", 1..=MAX_HEADS);
        let mut kv_heads = match &m.kv_heads {
            Some(g) => self.count(g, "model.kv_heads", 1..=MAX_HEADS),
            None => heads,
        };
        let seed = match &m.seed {
            Some(s) => u64::try_from(*s.get_ref())
                .map_err(|_| self.p.on(s, "model.seed", "must be a whole number >= 0"))
                .ok(),
            None => Some(0),
        };
        let mut pe = match &m.pe {
            Some(s) => s
                .get_ref()
                .parse::<PeKind>()
                .map_err(|msg| self.p.on(s, "model.pe", msg))
                .ok(),
            None => Some(PeKind::default()),
        };
        let mask = match (&m.mask, n) {
            (Some(s), Some(n)) => self.mask(s, n),
            (Some(_), None) => None,
            (None, _) => Some(MaskKind::None),
        };
        if let (Some(d), Some(h)) = (d_model, heads)
            && d % h != 0
        {
            let divisors: Vec<String> = (1..=MAX_HEADS.min(d))
                .filter(|x| d % x == 0)
                .map(|x| x.to_string())
                .collect();
            self.p.on(
                &m.heads,
                "model.heads",
                format!(
                    "d_model {d} is not divisible by heads {h}; heads must divide d_model (one of {})",
                    divisors.join(", ")
                ),
            );
            heads = None;
        }
        if let (Some(h), Some(g)) = (heads, kv_heads)
            && h % g != 0
        {
            let divisors: Vec<String> = (1..=h)
                .filter(|x| h % x == 0)
                .map(|x| x.to_string())
                .collect();
            let span = m.kv_heads.as_ref().map_or(m.heads.span(), |g| g.span());
            self.p.at(
                span,
                "model.kv_heads",
                format!(
                    "kv_heads {g} does not divide heads {h}; each KV head serves a whole group of query heads (one of {})",
                    divisors.join(", ")
                ),
            );
            kv_heads = None;
        }
        if let (Some(d), Some(h), Some(PeKind::Rope { .. }), Some(span)) =
            (d_model, heads, pe, m.pe.as_ref())
            && (d / h) % 2 != 0
        {
            self.p.on(
                span,
                "model.pe",
                format!(
                    "RoPE rotates pairs of dimensions, but d_k = d_model / heads = {} is odd; make d_k even",
                    d / h
                ),
            );
            pe = None;
        }
        let shape = match (n, d_model, heads) {
            (Some(n), Some(d_model), Some(heads)) => Some(Shape {
                n,
                d_model,
                heads,
                pe,
            }),
            _ => None,
        };
        let config = (|| {
            Some(ModelConfig {
                tokens,
                d_model: d_model?,
                heads: heads?,
                kv_heads: kv_heads?,
                seed: seed?,
                pe: pe?,
                mask: mask?,
                scaled: m.scale.as_ref().is_none_or(|s| *s.get_ref()),
            })
        })();
        (config, shape)
    }

    /// `[pretrained]`: the model's name and its input. Whether the model exists is known
    /// only at play time (it may be fetched later); its sizes are checked then.
    fn pretrained(&mut self, raw: &Spanned<RawPretrained>) -> Option<Pretrained> {
        let p = raw.get_ref();
        let model = p.model.get_ref().trim();
        if model.is_empty() {
            self.p.on(
                &p.model,
                "pretrained.model",
                "is empty; name a model as `attnviz models` lists it (e.g. SmolLM2-135M-Instruct.Q4_1) or give a path",
            );
        }
        let seed = match &p.seed {
            Some(s) => Some(
                u64::try_from(*s.get_ref())
                    .map_err(|_| {
                        self.p
                            .on(s, "pretrained.seed", "must be a whole number >= 0")
                    })
                    .ok()?,
            ),
            None => None,
        };
        let input = match (&p.text, &p.repeat) {
            (Some(t), None) => {
                if seed.is_some() {
                    self.p.on(
                        p.seed.as_ref().expect("seed is set"),
                        "pretrained.seed",
                        "seeds the random tokens of `repeat`; a `text` needs none: remove it",
                    );
                }
                if t.get_ref().trim().is_empty() {
                    self.p.on(
                        t,
                        "pretrained.text",
                        "is empty; write the text the model reads",
                    );
                    None
                } else {
                    Some(PretrainedInput::Text(t.get_ref().clone()))
                }
            }
            (None, Some(r)) => self.count(r, "pretrained.repeat", 1..=MAX_REPEAT).map(|t| {
                PretrainedInput::Repeat {
                    t,
                    seed: seed.unwrap_or(0),
                }
            }),
            (Some(t), Some(_)) => {
                self.p.on(
                    t,
                    "pretrained.text",
                    "give either `text` or `repeat` (random tokens repeated), not both",
                );
                None
            }
            (None, None) => {
                self.p.on(
                    raw,
                    "pretrained",
                    "needs the model's input: `text = \"...\"` or `repeat = T` (T random tokens, then the same T again)",
                );
                None
            }
        };
        let pad_to = match &p.pad_to {
            Some(v) => Some(self.count(v, "pretrained.pad_to", 2..=MAX_PAD_TO)?),
            None => None,
        };
        let compare = match &p.compare {
            Some(c) if c.get_ref().trim().is_empty() => {
                self.p.on(
                    c,
                    "pretrained.compare",
                    "is empty; write the second text (as many tokens as `text`), or remove it",
                );
                return None;
            }
            Some(c) if p.text.is_none() => {
                self.p.on(
                    c,
                    "pretrained.compare",
                    "is a second text beside `text`; a `repeat` input has none",
                );
                return None;
            }
            Some(c) => Some(CompareInput::Text(c.get_ref().clone())),
            None => match &p.compare_seed {
                Some(s) if p.repeat.is_none() => {
                    self.p.on(
                        s,
                        "pretrained.compare_seed",
                        "draws another first half for a `repeat` input; beside `text`, give `compare = \"...\"`",
                    );
                    return None;
                }
                Some(s) => Some(CompareInput::FirstHalf {
                    seed: self.count(s, "pretrained.compare_seed", 0..=u32::MAX as usize)? as u64,
                }),
                None => None,
            },
        };
        if let (Some(_), Some(s)) = (&p.compare, &p.compare_seed) {
            self.p.on(
                s,
                "pretrained.compare_seed",
                "give either `compare` (a text) or `compare_seed` (with `repeat`), not both",
            );
            return None;
        }
        Some(Pretrained {
            model: (!model.is_empty()).then(|| model.to_string())?,
            input: input?,
            pad_to,
            compare,
        })
    }

    fn mask(&mut self, s: &Spanned<String>, n: usize) -> Option<MaskKind> {
        let mask = match s.get_ref().parse::<MaskKind>() {
            Ok(m) => m,
            Err(msg) => {
                self.p.on(s, "model.mask", msg);
                return None;
            }
        };
        let problem = match &mask {
            MaskKind::File(_) => Some(
                "a scene must be self-contained: file: masks are for the command line; \
                 use none, causal, window:W, padding:L or bigbird"
                    .to_string(),
            ),
            MaskKind::Padding(lens) if lens.len() != 1 => Some(format!(
                "a scene is one sequence, so padding takes one valid length, e.g. padding:{}; got {}",
                n.saturating_sub(1).max(1),
                lens.len()
            )),
            MaskKind::Padding(lens) if lens[0] == 0 || lens[0] > n => Some(format!(
                "padding length {} must be 1..={n} (the number of tokens)",
                lens[0]
            )),
            _ => None,
        };
        match problem {
            Some(msg) => {
                self.p.on(s, "model.mask", msg);
                None
            }
            None => Some(mask),
        }
    }

    fn flash(&mut self, raw: &RawScene, n: usize) -> Option<FlashBlocks> {
        let Some(f) = &raw.flash else {
            return Some(FlashBlocks {
                br: default_flash_block(n),
                bc: default_flash_block(n),
            });
        };
        let f = f.get_ref();
        let br = self.count(&f.br, "flash.br", 1..=MAX_TOKENS);
        let bc = self.count(&f.bc, "flash.bc", 1..=MAX_TOKENS);
        Some(FlashBlocks { br: br?, bc: bc? })
    }
}
