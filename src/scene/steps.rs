//! Checks of the `[[steps]]` of a scene: names, heads, dwell, the variants view's panel,
//! a trained model's layer, display and interventions, highlights and tiles against the
//! matrices the current view shows, and animations against the view's tiles or tokens
//! and the step's dwell.

use toml::Spanned;

use super::names::{stage_from_name, stage_name};
use super::pass::FlashPass;
use super::raw::{RawAnimate, RawStep};
use super::validate::{
    Checker, Current, DEFAULT_ANIMATE_RATE, DEFAULT_DWELL_S, MAX_ANIMATE_RATE, MAX_DWELL_S, Model,
    Shape, Shown,
};
use super::variant::Variant;
use super::view::{ModelShow, SceneView};
use super::{Animation, FlashBlocks, Intervention, Step};
use crate::engine::config::{MaskKind, PeKind};
use crate::engine::pipeline::{Pipeline, StageId};
use crate::model::patching::PatchWhat;

/// A step's keys that only a lesson on a trained model has.
#[derive(Default)]
struct TrainedKeys {
    layer: Option<usize>,
    show: Option<ModelShow>,
    contributions: Option<bool>,
    lens_target: Option<bool>,
    patch: Option<PatchWhat>,
    writers: Option<bool>,
    intervene: Option<Intervention>,
}

impl Checker<'_, '_> {
    pub(super) fn step(
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
            // A trained model's heads are counted when it is loaded (at play time).
            (Some(h), None) if model.pretrained => match usize::try_from(*h.get_ref()) {
                Ok(x) => {
                    current.head = x;
                    Some(x)
                }
                Err(_) => {
                    self.p.on(
                        h,
                        field("head"),
                        "must be a whole number >= 0 (heads count from 0)",
                    );
                    ok = false;
                    None
                }
            },
            (Some(_), None) => None,
            (None, _) => None,
        };
        // A [train] lesson's fixed-model keys are refused by `train_keys`, once.
        let trained = if model.train {
            Some(TrainedKeys::default())
        } else {
            self.trained_keys(i, s, model.pretrained)
        };
        ok &= trained.is_some();
        let TrainedKeys {
            layer,
            show,
            contributions,
            lens_target,
            patch,
            writers,
            intervene,
        } = trained.unwrap_or_default();
        let when = self.train_keys(i, s, model.train);
        ok &= when.is_some();
        let when = when.flatten();
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

        if model.pretrained
            && let Some(first) = s.tiles.first()
        {
            self.p.on(
                first,
                field("tiles"),
                "tiles are for lessons on a seeded [model]; a trained model's lesson has no flash grid",
            );
            ok = false;
        }
        let mut tiles = Vec::new();
        for (j, tile) in s.tiles.iter().enumerate() {
            let f = format!("steps[{i}].tiles[{j}]");
            let Some((qb, kb)) = self.pair(tile, &f, "[q_block, k_block]") else {
                ok = false;
                continue;
            };
            match current.view {
                Shown::Set(SceneView::Flash) => {}
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

        let variant = match &s.variant {
            Some(v) => match v.get_ref().parse::<Variant>() {
                Ok(x) => {
                    if let Shown::Set(other) = current.view
                        && other != SceneView::Variants
                    {
                        self.p.on(
                            v,
                            field("variant"),
                            format!(
                                "a variant is a panel of the variants view, but this step shows the {other} view; set view = \"variants\""
                            ),
                        );
                        ok = false;
                    }
                    Some(x)
                }
                Err(msg) => {
                    self.p.on(v, field("variant"), msg);
                    ok = false;
                    None
                }
            },
            None => None,
        };
        let pass = match &s.pass {
            Some(v) => match v.get_ref().parse::<FlashPass>() {
                Ok(x) => {
                    if let Shown::Set(other) = current.view
                        && other != SceneView::Flash
                    {
                        self.p.on(
                            v,
                            field("pass"),
                            format!(
                                "pass chooses what the flash view plays, but this step shows the {other} view; set view = \"flash\""
                            ),
                        );
                        ok = false;
                    }
                    Some(x)
                }
                Err(msg) => {
                    self.p.on(v, field("pass"), msg);
                    ok = false;
                    None
                }
            },
            None => None,
        };
        let animate = match &s.animate {
            Some(a) => {
                let got = self.animation(i, a, shape, flash, current, dwell_ms);
                ok &= got.is_some();
                got
            }
            None => None,
        };

        if !ok {
            return None;
        }
        Some(Step {
            view,
            stage,
            head,
            layer,
            show,
            contributions,
            lens_target,
            patch,
            writers,
            intervene,
            highlight,
            tiles,
            variant,
            pass,
            narration: narration?,
            dwell_ms: dwell_ms?,
            marker,
            animate,
            when,
        })
    }

    /// The keys only a lesson on a trained model has: `layer`, `show`, `measure`, `lens`
    /// and `intervene`. `None` when one is wrong (reported).
    fn trained_keys(&mut self, i: usize, s: &RawStep, pretrained: bool) -> Option<TrainedKeys> {
        let field = |name: &str| format!("steps[{i}].{name}");
        let mut ok = true;
        if !pretrained {
            let spans = [
                s.layer.as_ref().map(|v| (v.span(), "layer")),
                s.show.as_ref().map(|v| (v.span(), "show")),
                s.measure.as_ref().map(|v| (v.span(), "measure")),
                s.lens.as_ref().map(|v| (v.span(), "lens")),
                s.patch.as_ref().map(|v| (v.span(), "patch")),
                s.writers.as_ref().map(|v| (v.span(), "writers")),
                s.intervene.as_ref().map(|v| (v.span(), "intervene")),
            ];
            for (span, name) in spans.into_iter().flatten() {
                self.p.at(
                    span,
                    field(name),
                    format!("`{name}` is for lessons on a trained model ([pretrained]); this scene runs a seeded [model]"),
                );
                ok = false;
            }
            return ok.then_some(TrainedKeys::default());
        }
        let layer = match &s.layer {
            Some(l) => match usize::try_from(*l.get_ref()) {
                Ok(x) => Some(x),
                Err(_) => {
                    self.p.on(
                        l,
                        field("layer"),
                        "must be a whole number >= 0 (layers count from 0)",
                    );
                    ok = false;
                    None
                }
            },
            None => None,
        };
        let show = self.parsed(
            &mut ok,
            s.show.as_ref(),
            field("show"),
            str::parse::<ModelShow>,
        );
        let contributions =
            self.parsed(&mut ok, s.measure.as_ref(), field("measure"), |m| match m {
                "weights" => Ok(false),
                "contributions" => Ok(true),
                other => Err(format!(
                    "{other:?} is not a measure: give \"weights\" or \"contributions\""
                )),
            });
        let lens_target = self.parsed(&mut ok, s.lens.as_ref(), field("lens"), |m| match m {
            "top" => Ok(false),
            "target" => Ok(true),
            other => Err(format!(
                "{other:?} is not what lens cells show: give \"top\" or \"target\""
            )),
        });
        let patch = self.parsed(&mut ok, s.patch.as_ref(), field("patch"), |m| {
            PatchWhat::from_name(m).ok_or_else(|| {
                format!(
                    "{m:?} is not a kind of site: give \"resid\", \"heads\", \"attn-out\" or \"mlp-out\""
                )
            })
        });
        let writers = s.writers.as_ref().map(|v| *v.get_ref());
        let intervene = match &s.intervene {
            Some(iv) => {
                let r = iv.get_ref();
                let mut out = Intervention::default();
                for (j, h) in r.ablate.iter().enumerate() {
                    match self.pair(
                        h,
                        &format!("steps[{i}].intervene.ablate[{j}]"),
                        "[layer, head]",
                    ) {
                        Some(x) => out.ablate.push(x),
                        None => ok = false,
                    }
                }
                if let Some(m) = &r.mask {
                    match m.get_ref().parse::<MaskKind>() {
                        Ok(
                            k @ (MaskKind::None
                            | MaskKind::Causal
                            | MaskKind::Window(_)
                            | MaskKind::WindowSinks { .. }),
                        ) => out.mask = Some(k),
                        Ok(_) => {
                            self.p.on(
                                m,
                                field("intervene.mask"),
                                "a trained model's mask can be replaced by none, causal, window:W or window:W,S (padding comes from [pretrained] pad_to)",
                            );
                            ok = false;
                        }
                        Err(msg) => {
                            self.p.on(m, field("intervene.mask"), msg);
                            ok = false;
                        }
                    }
                }
                if let Some(b) = &r.rope_base {
                    let base = *b.get_ref();
                    if base.is_finite() && base > 1.0 {
                        out.rope_base = Some(base);
                    } else {
                        self.p.on(
                            b,
                            field("intervene.rope_base"),
                            format!("{base} is not a RoPE base; give a number above 1, e.g. 10000"),
                        );
                        ok = false;
                    }
                }
                out.no_pe = r.no_pe.as_ref().is_some_and(|v| *v.get_ref());
                Some(out)
            }
            None => None,
        };
        ok.then_some(TrainedKeys {
            layer,
            show,
            contributions,
            lens_target,
            patch,
            writers,
            intervene,
        })
    }

    /// `animate = { from, to, rate }`: the view can play it, the positions exist, and it
    /// fits in the step's dwell. `None` when it is wrong (reported) or cannot be checked
    /// because something it depends on is wrong (reported already).
    fn animation(
        &mut self,
        i: usize,
        raw: &Spanned<RawAnimate>,
        shape: Option<&Shape>,
        flash: Option<FlashBlocks>,
        current: &Current,
        dwell_ms: Option<u64>,
    ) -> Option<Animation> {
        let field = |name: &str| format!("steps[{i}].animate{name}");
        let a = raw.get_ref();
        let (shape, view) = match (shape, current.view) {
            (Some(sh), Shown::Set(v)) => (sh, v),
            _ => return None,
        };
        let (frames, what) = match view {
            SceneView::Flash => {
                let flash = flash?;
                let n = shape.n;
                (n.div_ceil(flash.br) * n.div_ceil(flash.bc), "tile")
            }
            SceneView::Decode => (shape.n, "token"),
            other => {
                self.p.on(
                    raw,
                    field(""),
                    format!(
                        "animate plays the flash view's tiles or the decode view's tokens, but this step shows the {other} view; set view = \"flash\" or view = \"decode\""
                    ),
                );
                return None;
            }
        };
        let last = frames - 1;
        let mut position = |v: &Option<Spanned<i64>>, name: &str, default: usize| match v {
            None => Some(default),
            Some(x) => match usize::try_from(*x.get_ref()) {
                Ok(k) if k <= last => Some(k),
                _ => {
                    self.p.on(
                        x,
                        field(&format!(".{name}")),
                        format!(
                            "{what} {} does not exist; the {view} view has {frames} {what}s here, numbered 0..={last} in the order it plays them",
                            x.get_ref()
                        ),
                    );
                    None
                }
            },
        };
        let from = position(&a.from, "from", 0);
        let to = position(&a.to, "to", last);
        let rate = match &a.rate {
            None => Some(DEFAULT_ANIMATE_RATE),
            Some(r) => {
                let v = *r.get_ref();
                if v.is_finite() && v > 0.0 && v <= MAX_ANIMATE_RATE {
                    Some(v)
                } else {
                    self.p.on(
                        r,
                        field(".rate"),
                        format!(
                            "{v} {what}s a second is out of range; expected more than 0 and at most {MAX_ANIMATE_RATE}"
                        ),
                    );
                    None
                }
            }
        };
        let (from, to, rate) = (from?, to?, rate?);
        if from > to {
            let at = a.to.as_ref().map_or(raw.span(), |t| t.span());
            self.p.at(
                at,
                field(".to"),
                format!("to = {to} comes before from = {from}; the animation plays forwards"),
            );
            return None;
        }
        let anim = Animation { from, to, rate };
        let dwell_ms = dwell_ms?;
        let needs_ms = anim.duration_ms();
        if needs_ms > dwell_ms as f64 {
            let count = to - from + 1;
            self.p.on(
                raw,
                field(""),
                format!(
                    "{what}s {from}..={to} ({count}) at {rate} a second take {:.2} s, longer than this step's dwell of {} s; set dwell = {} or more, or rate = {} or more",
                    needs_ms / 1000.0,
                    dwell_ms as f64 / 1000.0,
                    (needs_ms / 100.0).ceil() / 10.0,
                    ((to - from) as f64 * 100_000.0 / dwell_ms as f64).ceil() / 100.0
                ),
            );
            return None;
        }
        Some(anim)
    }

    /// An optional text key read by `parse`; what `parse` rejects is reported at the key
    /// and clears `ok`.
    fn parsed<T>(
        &mut self,
        ok: &mut bool,
        v: Option<&Spanned<String>>,
        field: String,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let v = v?;
        match parse(v.get_ref()) {
            Ok(x) => Some(x),
            Err(msg) => {
                self.p.on(v, field, msg);
                *ok = false;
                None
            }
        }
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
        Shown::Unset => SceneView::Pipeline,
        Shown::Invalid => return Ok(None),
    };
    let target = |rows: usize, cols: usize, what: String| Ok(Some(Target { rows, cols, what }));
    match view {
        SceneView::Pipeline => {
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
        SceneView::Heads | SceneView::Flash | SceneView::Decode | SceneView::Variants => {
            target(n, n, format!("the {view} view's weights (n x n)"))
        }
        SceneView::Position => target(
            n,
            shape.d_model,
            "the position view's encoding table (n x d_model)".into(),
        ),
        SceneView::Scaling => Err("the scaling view has no matrix to highlight".into()),
        SceneView::Model
        | SceneView::Tokens
        | SceneView::Lens
        | SceneView::Attribution
        | SceneView::Patch
        | SceneView::Train => Err(format!("the {view} view has no matrix to highlight")),
    }
}
