//! From the file as written ([`RawScene`]) to a checked [`Scene`].
//!
//! Every check records its problem at the span of the offending value and carries on, so
//! one run of `attnviz scene check` lists everything wrong with a file, not just the
//! first thing.

use std::ops::Range;

use toml::Spanned;

use super::names::stage_from_name;
use super::problem::{Problem, Problems, SceneError, from_toml, line_column};
use super::raw::{RawModel, RawScene, RawStep, RawText};
use super::{FlashBlocks, Localized, Scene, Step};
use crate::engine::config::{MaskKind, PeKind};
use crate::engine::pipeline::{ModelConfig, StageId};
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
                format!(
                    "expected the integer {VERSION}, found {}",
                    other.type_str()
                ),
            )),
        },
    }
}

struct Checker<'p, 's> {
    p: &'p mut Problems<'s>,
}

/// What the app shows while a step plays: steps only say what changes.
struct Current {
    view: ViewKind,
    stage: Option<StageId>,
}

impl Checker<'_, '_> {
    fn scene(&mut self, name: &str, file: &str, raw: RawScene) -> Option<Scene> {
        let title = self.text(&raw.title, "title");
        let config = self.model(&raw.model);
        let view = match &raw.view {
            Some(v) => self.view(v, "view"),
            None => Some(ViewKind::Pipeline),
        };
        // Check the steps even when the opening view is wrong, from the default view.
        let opening = view.unwrap_or_default();
        let flash = self.flash(&raw);
        if raw.steps.get_ref().is_empty() {
            self.p
                .on(&raw.steps, "steps", "a scene needs at least one [[steps]] table");
        }
        let (config, flash) = (config?, flash?);
        let mut current = Current {
            view: opening,
            stage: None,
        };
        let n = config.tokens.len();
        let steps: Vec<Option<Step>> = raw
            .steps
            .get_ref()
            .iter()
            .enumerate()
            .map(|(i, s)| self.step(i, s, &config, n, flash, &mut current))
            .collect();
        Some(Scene {
            name: name.to_string(),
            source: file.to_string(),
            title: title?,
            config,
            view: view?,
            flash,
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
        match v.get_ref().parse::<ViewKind>() {
            Ok(k) => Some(k),
            Err(msg) => {
                self.p.on(v, field, msg);
                None
            }
        }
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

    fn model(&mut self, raw: &Spanned<RawModel>) -> Option<ModelConfig> {
        let m = raw.get_ref();
        let tokens = crate::scene::tokens_of(m.tokens.get_ref());
        if tokens.is_empty() || tokens.len() > MAX_TOKENS {
            self.p.on(
                &m.tokens,
                "model.tokens",
                format!(
                    "has {} tokens; a scene needs 1..={MAX_TOKENS} so every view fits",
                    tokens.len()
                ),
            );
        }
        let d_model = self.count(&m.d_model, "model.d_model", 1..=MAX_D_MODEL);
        let heads = self.count(&m.heads, "model.heads", 1..=MAX_HEADS);
        let kv_heads = match &m.kv_heads {
            Some(g) => self.count(g, "model.kv_heads", 1..=MAX_HEADS),
            None => heads,
        };
        let seed = match &m.seed {
            Some(s) => match u64::try_from(*s.get_ref()) {
                Ok(s) => Some(s),
                Err(_) => {
                    self.p.on(s, "model.seed", "must be a whole number >= 0");
                    None
                }
            },
            None => Some(0),
        };
        let pe = match &m.pe {
            Some(s) => match s.get_ref().parse::<PeKind>() {
                Ok(pe) => Some(pe),
                Err(msg) => {
                    self.p.on(s, "model.pe", msg);
                    None
                }
            },
            None => Some(PeKind::default()),
        };
        let mask = match &m.mask {
            Some(s) => self.mask(s, tokens.len()),
            None => Some(MaskKind::None),
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
        }
        if let (Some(d), Some(h), Some(PeKind::Rope { .. })) = (d_model, heads, pe)
            && h > 0
            && d % h == 0
            && (d / h) % 2 != 0
        {
            self.p.on(
                m.pe.as_ref().expect("pe was given"),
                "model.pe",
                format!(
                    "RoPE rotates pairs of dimensions, but d_k = d_model / heads = {} is odd; make d_k even",
                    d / h
                ),
            );
        }
        let scaled = m.scale.as_ref().is_none_or(|s| *s.get_ref());
        Some(ModelConfig {
            tokens,
            d_model: d_model?,
            heads: heads?,
            kv_heads: kv_heads?,
            seed: seed?,
            pe: pe?,
            mask: mask?,
            scaled,
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
                 use none, causal, window:W, padding:L1,.. or bigbird"
                    .to_string(),
            ),
            MaskKind::Padding(lens) => lens
                .iter()
                .find(|&&l| l == 0 || l > n)
                .map(|l| format!("padding length {l} must be 1..={n} (the number of tokens)")),
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
        config: &ModelConfig,
        n: usize,
        flash: FlashBlocks,
        current: &mut Current,
    ) -> Option<Step> {
        let s = raw.get_ref();
        let field = |name: &str| format!("steps[{i}].{name}");
        let mut ok = true;
        let view = match &s.view {
            Some(v) => {
                let k = self.view(v, &field("view"));
                if let Some(k) = k {
                    current.view = k;
                }
                ok &= k.is_some();
                k
            }
            None => None,
        };
        let stage = match &s.stage {
            Some(st) => match stage_from_name(st.get_ref()) {
                Ok(id) => {
                    if let Some(msg) = stage_unavailable(id, config) {
                        self.p.on(st, field("stage"), msg);
                        ok = false;
                    }
                    current.stage = Some(id);
                    Some(id)
                }
                Err(msg) => {
                    self.p.on(st, field("stage"), msg);
                    ok = false;
                    None
                }
            },
            None => None,
        };
        let head = match &s.head {
            Some(h) => {
                let last = config.heads - 1;
                match usize::try_from(*h.get_ref()) {
                    Ok(x) if x <= last => Some(x),
                    _ => {
                        self.p.on(
                            h,
                            field("head"),
                            format!(
                                "head {} does not exist; the model has {} heads, numbered 0..={last}",
                                h.get_ref(),
                                config.heads
                            ),
                        );
                        ok = false;
                        None
                    }
                }
            }
            None => None,
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
                self.p
                    .on(m, field("marker"), "is empty; leave it out or write a label");
                ok = false;
                None
            }
            Some(m) => Some(m.get_ref().trim().to_string()),
            None => None,
        };

        let shape = highlight_shape(current, config, n);
        let mut highlight = Vec::new();
        for (j, cell) in s.highlight.iter().enumerate() {
            let f = format!("steps[{i}].highlight[{j}]");
            let Some((r, c)) = self.pair(cell, &f, "[row, col]") else {
                ok = false;
                continue;
            };
            match &shape {
                Err(msg) => {
                    self.p.on(cell, &f, msg.clone());
                    ok = false;
                }
                &Ok((rows, cols, ref what)) if r >= rows || c >= cols => {
                    self.p.on(
                        cell,
                        &f,
                        format!(
                            "cell [{r}, {c}] is outside the {what}, which is {rows} x {cols} (rows 0..={}, columns 0..={})",
                            rows - 1,
                            cols - 1
                        ),
                    );
                    ok = false;
                }
                Ok(_) => highlight.push((r, c)),
            }
        }

        let q_blocks = n.div_ceil(flash.br);
        let k_blocks = n.div_ceil(flash.bc);
        let mut tiles = Vec::new();
        for (j, tile) in s.tiles.iter().enumerate() {
            let f = format!("steps[{i}].tiles[{j}]");
            let Some((qb, kb)) = self.pair(tile, &f, "[q_block, k_block]") else {
                ok = false;
                continue;
            };
            if current.view != ViewKind::Flash {
                self.p.on(
                    tile,
                    &f,
                    format!(
                        "tiles belong to the flash view, but this step shows the {} view; set view = \"flash\"",
                        current.view
                    ),
                );
                ok = false;
            } else if qb >= q_blocks || kb >= k_blocks {
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
            } else {
                tiles.push((qb, kb));
            }
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
fn stage_unavailable(id: StageId, config: &ModelConfig) -> Option<String> {
    match (id, config.pe) {
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

/// The rows and columns of the matrix a highlight refers to in the current view, with
/// its description; or why this view has none.
fn highlight_shape(
    current: &Current,
    config: &ModelConfig,
    n: usize,
) -> Result<(usize, usize, String), String> {
    let d_k = config.d_model / config.heads.max(1);
    let square = |what: &str| Ok((n, n, format!("{what} matrix")));
    match current.view {
        ViewKind::Pipeline => {
            let Some(stage) = current.stage else {
                return Err(
                    "a highlight in the pipeline view needs a stage; set `stage` in this step or an earlier one"
                        .into(),
                );
            };
            match stage {
                StageId::Scores
                | StageId::Scale
                | StageId::Alibi
                | StageId::Mask
                | StageId::Softmax => square(&format!("{} (n x n)", super::names::stage_name(stage))),
                StageId::SplitHeads | StageId::Rope | StageId::WeightedSum => Ok((
                    n,
                    d_k,
                    format!("{} matrix (n x d_k)", super::names::stage_name(stage)),
                )),
                StageId::Tokens
                | StageId::Embeddings
                | StageId::PositionEncoding
                | StageId::QkvProjection
                | StageId::Concat
                | StageId::OutputProjection => Ok((
                    n,
                    config.d_model,
                    format!("{} matrix (n x d_model)", super::names::stage_name(stage)),
                )),
            }
        }
        ViewKind::Heads | ViewKind::Flash | ViewKind::Decode | ViewKind::Variants => {
            square(&format!("{} view's weight (n x n)", current.view))
        }
        ViewKind::Position => Ok((
            n,
            config.d_model,
            "position view's encoding table (n x d_model)".into(),
        )),
        ViewKind::Scaling => Err("the scaling view has no matrix to highlight".into()),
    }
}
