//! From the file as written ([`RawScene`]) to a checked [`Scene`].
//!
//! Every check records its problem at the span of the offending value and carries on, so
//! one run of `attnviz scene check` lists everything wrong with a file, not just the
//! first thing.

use std::ops::Range;

use toml::Spanned;

use super::names::{stage_from_name, stage_name};
use super::problem::{Problem, Problems, SceneError, from_toml, line_column};
use super::raw::{RawModel, RawScene, RawStep, RawText};
use super::{FlashBlocks, Localized, Scene, Step};
use crate::engine::config::{MaskKind, PeKind};
use crate::engine::pipeline::{ModelConfig, Pipeline, StageId};
use crate::tui::ViewKind;

/// The only format version there is.
pub const VERSION: i64 = 1;
/// Most tokens a scene may have: every view must still fit a 100x30 terminal.
pub const MAX_TOKENS: usize = 32;
pub const MAX_D_MODEL: usize = 512;
pub const MAX_HEADS: usize = 16;
/// Longest dwell of one step, in seconds.
pub const MAX_DWELL_S: f64 = 120.0;
/// Dwell of a step that does not say, in seconds.
pub const DEFAULT_DWELL_S: f64 = 4.0;
/// The flash view's block size when a scene does not set one.
pub const DEFAULT_FLASH_BLOCK: usize = 2;

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

struct Checker<'p, 's> {
    p: &'p mut Problems<'s>,
}

/// The model's shape as far as it is valid: what the steps are checked against. A
/// field that is wrong is already reported; checks that need it are skipped rather than
/// reported again as a consequence.
struct Shape {
    n: usize,
    d_model: usize,
    heads: usize,
    pe: Option<PeKind>,
}

/// What the steps of a scene are checked against.
#[derive(Clone, Copy)]
struct Model<'a> {
    shape: Option<&'a Shape>,
    /// Built when the whole model is valid.
    pipeline: Option<&'a Pipeline>,
}

/// The stage the app shows, as far as the steps so far tell.
#[derive(Clone, Copy)]
enum Shown<T> {
    /// Not set by any step yet.
    Unset,
    Set(T),
    /// Set by a step with a wrong name (already reported).
    Invalid,
}

/// What the app shows while a step plays: steps only say what changes.
struct Current {
    view: Shown<ViewKind>,
    stage: Shown<StageId>,
    /// The app starts on the first head.
    head: usize,
}

impl Checker<'_, '_> {
    fn scene(&mut self, name: &str, file: &str, raw: RawScene) -> Option<Scene> {
        let title = self.text(&raw.title, "title");
        let (config, shape) = self.model(&raw.model);
        // The engine's own pipeline gives the true shape of every stage's matrices.
        let pipeline = config.as_ref().and_then(|c| match Pipeline::build(c) {
            Ok(p) => Some(p),
            Err(e) => {
                self.p.on(&raw.model, "model", e.to_string());
                None
            }
        });
        let view = match &raw.view {
            Some(v) => self.view(v, "view"),
            None => Some(ViewKind::Pipeline),
        };
        let flash = self.flash(&raw);
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
                };
                self.step(i, s, model, flash, &mut current)
            })
            .collect();
        Some(Scene {
            name: name.to_string(),
            source: file.to_string(),
            title: title?,
            config: config?,
            view: view?,
            flash: flash?,
            steps: steps.into_iter().collect::<Option<Vec<_>>>()?,
        })
    }

    fn text(&mut self, raw: &Spanned<RawText>, field: &str) -> Option<Localized> {
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

    fn view(&mut self, v: &Spanned<String>, field: &str) -> Option<ViewKind> {
        v.get_ref()
            .parse::<ViewKind>()
            .map_err(|msg| self.p.on(v, field, msg))
            .ok()
    }

    /// A whole number within `range`, or a problem saying what would be right.
    fn count(
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

    fn flash(&mut self, raw: &RawScene) -> Option<FlashBlocks> {
        let Some(f) = &raw.flash else {
            return Some(FlashBlocks {
                br: DEFAULT_FLASH_BLOCK,
                bc: DEFAULT_FLASH_BLOCK,
            });
        };
        let f = f.get_ref();
        let br = self.count(&f.br, "flash.br", 1..=MAX_TOKENS);
        let bc = self.count(&f.bc, "flash.bc", 1..=MAX_TOKENS);
        Some(FlashBlocks { br: br?, bc: bc? })
    }

    fn step(
        &mut self,
        i: usize,
        raw: &Spanned<RawStep>,
        model: Model<'_>,
        flash: Option<FlashBlocks>,
        current: &mut Current,
    ) -> Option<Step> {
        let shape = model.shape;
        let s = raw.get_ref();
        let field = |name: &str| format!("steps[{i}].{name}");
        let mut ok = true;
        let view = match &s.view {
            Some(v) => {
                let k = self.view(v, &field("view"));
                current.view = k.map_or(Shown::Invalid, Shown::Set);
                ok &= k.is_some();
                k
            }
            None => None,
        };
        let stage = match &s.stage {
            Some(st) => match stage_from_name(st.get_ref()) {
                Ok(id) => {
                    if let Some(msg) = shape.and_then(|sh| stage_unavailable(id, sh.pe?)) {
                        self.p.on(st, field("stage"), msg);
                        ok = false;
                    }
                    current.stage = Shown::Set(id);
                    Some(id)
                }
                Err(msg) => {
                    self.p.on(st, field("stage"), msg);
                    current.stage = Shown::Invalid;
                    ok = false;
                    None
                }
            },
            None => None,
        };
        let head = match (&s.head, shape) {
            (Some(h), Some(shape)) => {
                let last = shape.heads - 1;
                match usize::try_from(*h.get_ref()) {
                    Ok(x) if x <= last => {
                        current.head = x;
                        Some(x)
                    }
                    _ => {
                        self.p.on(
                            h,
                            field("head"),
                            format!(
                                "head {} does not exist; the model has {} heads, numbered 0..={last}",
                                h.get_ref(),
                                shape.heads
                            ),
                        );
                        ok = false;
                        None
                    }
                }
            }
            (Some(_), None) => None,
            (None, _) => None,
        };
        let narration = self.text(&s.narration, &field("narration"));
        let dwell_ms = match &s.dwell {
            Some(d) => {
                let secs = *d.get_ref();
                if secs.is_finite() && secs > 0.0 && secs <= MAX_DWELL_S {
                    Some((secs * 1000.0).round() as u64)
                } else {
                    self.p.on(
                        d,
                        field("dwell"),
                        format!("{secs} seconds is out of range; expected more than 0 and at most {MAX_DWELL_S}"),
                    );
                    None
                }
            }
            None => Some((DEFAULT_DWELL_S * 1000.0) as u64),
        };
        let marker = match &s.marker {
            Some(m) if m.get_ref().trim().is_empty() => {
                self.p.on(
                    m,
                    field("marker"),
                    "is empty; leave it out or write a label",
                );
                ok = false;
                None
            }
            Some(m) => Some(m.get_ref().trim().to_string()),
            None => None,
        };

        let matrix = shape.map(|sh| highlight_target(current, sh, model.pipeline));
        let mut highlight = Vec::new();
        for (j, cell) in s.highlight.iter().enumerate() {
            let f = format!("steps[{i}].highlight[{j}]");
            let Some((r, c)) = self.pair(cell, &f, "[row, col]") else {
                ok = false;
                continue;
            };
            match &matrix {
                // The view, the stage or the model is wrong: reported already.
                None | Some(Ok(None)) => {}
                Some(Err(msg)) => {
                    self.p.on(cell, &f, msg.clone());
                    ok = false;
                }
                Some(Ok(Some(Target { rows, cols, what }))) if r >= *rows || c >= *cols => {
                    self.p.on(
                        cell,
                        &f,
                        format!(
                            "cell [{r}, {c}] is outside {what}, which is {rows} x {cols} (rows 0..={}, columns 0..={})",
                            rows - 1,
                            cols - 1
                        ),
                    );
                    ok = false;
                }
                Some(Ok(Some(_))) => {}
            }
            highlight.push((r, c));
        }

        let mut tiles = Vec::new();
        for (j, tile) in s.tiles.iter().enumerate() {
            let f = format!("steps[{i}].tiles[{j}]");
            let Some((qb, kb)) = self.pair(tile, &f, "[q_block, k_block]") else {
                ok = false;
                continue;
            };
            match current.view {
                Shown::Set(ViewKind::Flash) => {}
                Shown::Set(other) => {
                    self.p.on(
                        tile,
                        &f,
                        format!(
                            "tiles belong to the flash view, but this step shows the {other} view; set view = \"flash\""
                        ),
                    );
                    ok = false;
                }
                Shown::Unset | Shown::Invalid => {}
            }
            if let (Some(shape), Some(flash)) = (shape, flash) {
                let n = shape.n;
                let (q_blocks, k_blocks) = (n.div_ceil(flash.br), n.div_ceil(flash.bc));
                if qb >= q_blocks || kb >= k_blocks {
                    self.p.on(
                        tile,
                        &f,
                        format!(
                            "tile [{qb}, {kb}] is outside the flash grid: {n} tokens in blocks of br = {} x bc = {} make {q_blocks} x {k_blocks} tiles (q_block 0..={}, k_block 0..={})",
                            flash.br,
                            flash.bc,
                            q_blocks - 1,
                            k_blocks - 1
                        ),
                    );
                    ok = false;
                }
            }
            tiles.push((qb, kb));
        }

        if !ok {
            return None;
        }
        Some(Step {
            view,
            stage,
            head,
            highlight,
            tiles,
            narration: narration?,
            dwell_ms: dwell_ms?,
            marker,
        })
    }

    /// Two whole numbers >= 0, e.g. a cell `[row, col]`.
    fn pair(
        &mut self,
        v: &Spanned<Vec<Spanned<i64>>>,
        field: &str,
        form: &str,
    ) -> Option<(usize, usize)> {
        let items = v.get_ref();
        if items.len() != 2 {
            self.p.on(
                v,
                field,
                format!("expected two numbers {form}, found {}", items.len()),
            );
            return None;
        }
        let a = usize::try_from(*items[0].get_ref());
        let b = usize::try_from(*items[1].get_ref());
        match (a, b) {
            (Ok(a), Ok(b)) => Some((a, b)),
            _ => {
                self.p
                    .on(v, field, format!("{form} must be whole numbers >= 0"));
                None
            }
        }
    }
}

/// Why a stage cannot be shown for this model, if it cannot.
fn stage_unavailable(id: StageId, pe: PeKind) -> Option<String> {
    match (id, pe) {
        (StageId::Rope, PeKind::Rope { .. }) | (StageId::Alibi, PeKind::Alibi) => None,
        (StageId::Rope, pe) => Some(format!(
            "the rope stage exists only with pe = \"rope\"; this model uses pe = \"{pe}\""
        )),
        (StageId::Alibi, pe) => Some(format!(
            "the alibi stage exists only with pe = \"alibi\"; this model uses pe = \"{pe}\""
        )),
        _ => None,
    }
}

/// The matrix a highlight refers to: its rows, columns and a description.
struct Target {
    rows: usize,
    cols: usize,
    what: String,
}

/// The matrix a highlight refers to in the current view; `Ok(None)` when it cannot be
/// known because the view, the stage or the model is wrong (reported already); `Err`
/// when this view has no matrix to highlight.
fn highlight_target(
    current: &Current,
    shape: &Shape,
    pipeline: Option<&Pipeline>,
) -> Result<Option<Target>, String> {
    let n = shape.n;
    let view = match current.view {
        Shown::Set(v) => v,
        Shown::Unset => ViewKind::Pipeline,
        Shown::Invalid => return Ok(None),
    };
    let target = |rows: usize, cols: usize, what: String| Ok(Some(Target { rows, cols, what }));
    match view {
        ViewKind::Pipeline => {
            let stage = match current.stage {
                Shown::Set(s) => s,
                Shown::Invalid => return Ok(None),
                Shown::Unset => {
                    return Err(
                        "a highlight in the pipeline view needs a stage; set `stage` in this step or an earlier one"
                            .into(),
                    );
                }
            };
            let Some(pipeline) = pipeline else {
                return Ok(None);
            };
            // The view shows the selected head's matrix of a per-head stage, and the
            // result (the first matrix) of any other stage.
            let index = if stage.is_per_head() { current.head } else { 0 };
            match pipeline.stage(stage).and_then(|st| st.matrices.get(index)) {
                Some(m) => target(
                    m.data.nrows(),
                    m.data.ncols(),
                    format!("matrix '{}' of the {} stage", m.name, stage_name(stage)),
                ),
                None => Err(format!(
                    "the {} stage has no matrix to highlight for this model",
                    stage_name(stage)
                )),
            }
        }
        ViewKind::Heads | ViewKind::Flash | ViewKind::Decode | ViewKind::Variants => {
            target(n, n, format!("the {view} view's weights (n x n)"))
        }
        ViewKind::Position => target(
            n,
            shape.d_model,
            "the position view's encoding table (n x d_model)".into(),
        ),
        ViewKind::Scaling => Err("the scaling view has no matrix to highlight".into()),
    }
}
