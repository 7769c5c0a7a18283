//! The decode view: the lesson decoded token by token with a KV cache, and the same
//! inputs with fewer KV heads (GQA/MQA).
//!
//! - The cache grows a row per step (a rolling buffer of W slots under `window:W`); the
//!   newest row is marked.
//! - The step's weights over the cache, and every earlier step's below the cache: the
//!   triangle of causal attention, one row appended per token.
//! - What the step cost with the cache, O(t d), against recomputing the prefix without
//!   one, and the running totals; the recomputation is rerun by the engine and its
//!   result compared.
//! - `g` cycles the KV heads over the divisors of the heads: which query heads share
//!   which K/V head, the cache bytes, and how far the output moves from the lesson's
//!   own K/V (mean-pooled groups, as `engine::gqa` converts a multi-head checkpoint).
//!
//! Every number comes from `engine::kv_cache` and `engine::gqa`; the cursor row is the
//! decoding step, its column a cached position.
//!
//! On a real model (`attnviz --model`) the view shows the model's own decoding instead:
//! `generate` step by step ([`real`]).

mod inputs;
mod real;

pub(crate) use inputs::HeadInputs;
pub use real::RealDecodeLab;

use ndarray::{Array2, s};
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Widget;

use super::panel::{MAX_CELL, MatrixPanel};
use crate::cli::Dtype;
use crate::engine::config::{MaskKind, PeKind};
use crate::engine::gqa::{self, GqaComparison};
use crate::engine::kv_cache::{self, CacheLayout, DecodeOptions, Decoding};
use crate::engine::memory::{decimal_bytes, group_digits};
use crate::engine::pipeline::{Matrix, Pipeline};
use crate::tui::action::Action;
use crate::tui::component::View;
use crate::tui::context::{Context, StatusKind};
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::{fit_number, significant};
use crate::widgets::{HBars, ValueScale};

pub struct DecodeView;

const CMD_NEXT: u8 = 0;
const CMD_PREV: u8 = 1;
const CMD_FIRST: u8 = 2;
const CMD_LAST: u8 = 3;
const CMD_GROUPS_DOWN: u8 = 4;
const CMD_GROUPS_UP: u8 = 5;

/// The dtype the cache bytes are given in: what deployed models keep K and V in.
pub const CACHE_DTYPE: Dtype = Dtype::F16;

/// Multiply-adds of a whole run's recomputation above which it is counted but not
/// rerun (it is O(n^3 d) over a run: 128 tokens of 64 heads would take seconds).
const RECOMPUTE_BUDGET: u64 = 50_000_000;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[KeyPat::Char('.')],
        action: Action::ViewCommand(CMD_NEXT),
        desc: "decode the next token (also Down / j)",
        hint: Some("step"),
        hint_keys: Some("./,"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char(',')],
        action: Action::ViewCommand(CMD_PREV),
        desc: "back one token (also Up / k)",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Code(KeyCode::Home)],
        action: Action::ViewCommand(CMD_FIRST),
        desc: "first token",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Code(KeyCode::End)],
        action: Action::ViewCommand(CMD_LAST),
        desc: "last token (the whole sentence decoded)",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('g')],
        action: Action::ViewCommand(CMD_GROUPS_DOWN),
        desc: "fewer KV heads: MHA -> GQA -> MQA (divisors of the heads, cycling)",
        hint: Some("KV heads"),
        hint_keys: Some("g/G"),
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Char('G')],
        action: Action::ViewCommand(CMD_GROUPS_UP),
        desc: "more KV heads",
        hint: None,
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
];

/// What the decode view derived from the lesson through the engine.
#[derive(Debug, Clone)]
pub struct DecodeLab {
    pub tokens: Vec<String>,
    pub inputs: HeadInputs,
    /// MHA (the lesson's K/V, one head per query head) against every grouping.
    pub groups: GqaComparison,
    /// Index into `groups.choices` of the KV heads being decoded with.
    pub choice: usize,
    pub layout: CacheLayout,
    /// The run with the chosen KV heads.
    pub decoding: Decoding,
    /// False when the recomputation is only counted (over [`RECOMPUTE_BUDGET`]).
    pub recomputed: bool,
    /// What differs from the lesson's own attention, said on screen.
    pub notes: Vec<String>,
}

/// The cache layout decoding uses for a lesson's mask, and a note when the mask does
/// not carry over to decoding.
fn layout_for(mask: &MaskKind) -> (CacheLayout, Option<String>) {
    match mask {
        MaskKind::Window(w) => (
            CacheLayout::Rolling { window: *w },
            Some(format!(
                "window:{w}: a rolling buffer of {w} slots, position i in slot i mod {w}"
            )),
        ),
        MaskKind::Causal => (CacheLayout::Full, None),
        MaskKind::None => (
            CacheLayout::Full,
            Some("decoding is causal: later tokens do not exist yet (the lesson's mask none does not apply)".into()),
        ),
        other => (
            CacheLayout::Full,
            Some(format!(
                "decoding here is causal; the lesson's mask {other} is not applied"
            )),
        ),
    }
}

impl DecodeLab {
    pub fn build(p: &Pipeline, kv_heads: Option<usize>) -> Result<DecodeLab, String> {
        let inputs = HeadInputs::from_pipeline(p)?;
        let (h, n, _) = inputs.q.dim();
        if p.shape.n_q != p.shape.n_k {
            return Err(format!(
                "decoding needs one query per key; these tensors have {} queries and {} keys",
                p.shape.n_q, p.shape.n_k
            ));
        }
        let (layout, note) = layout_for(p.mask.kind());
        let mut notes: Vec<String> = note.into_iter().collect();
        if p.config.pe == PeKind::Alibi {
            notes.push("ALiBi's distance bias is not part of this decoding: weights here are softmax(q K^T) over the cache".into());
        }
        let mha_k = inputs.per_query_head(&inputs.k);
        let mha_v = inputs.per_query_head(&inputs.v);
        let mask = match layout {
            CacheLayout::Rolling { window } => MaskKind::Window(window),
            CacheLayout::Full => MaskKind::Causal,
        };
        let groups = gqa::compare(
            inputs.q.view(),
            mha_k.view(),
            mha_v.view(),
            &mask,
            Some(inputs.scale),
            CACHE_DTYPE,
        )
        .map_err(|e| e.to_string())?;
        let want = kv_heads.unwrap_or(inputs.kv_heads());
        let choice = groups
            .choices
            .iter()
            .position(|c| c.kv_heads == want)
            .unwrap_or(groups.choices.len() - 1);
        let (d, dv) = (inputs.q.dim().2, inputs.v.dim().2);
        let full_cost: u64 = (0..n)
            .map(|t| kv_cache::recompute_step_madds(h, t, layout, d, dv))
            .sum();
        let recomputed = full_cost <= RECOMPUTE_BUDGET;
        let decoding = run(&groups, choice, &inputs, layout, recomputed)?;
        Ok(DecodeLab {
            tokens: p.key_labels.clone(),
            inputs,
            groups,
            choice,
            layout,
            decoding,
            recomputed,
            notes,
        })
    }

    /// Decode again with KV-head choice `choice`.
    fn choose(&mut self, choice: usize) -> Result<(), String> {
        self.decoding = run(
            &self.groups,
            choice,
            &self.inputs,
            self.layout,
            self.recomputed,
        )?;
        self.choice = choice;
        Ok(())
    }

    pub fn kv_heads(&self) -> usize {
        self.groups.choices[self.choice].kv_heads
    }
}

fn run(
    groups: &GqaComparison,
    choice: usize,
    inputs: &HeadInputs,
    layout: CacheLayout,
    recompute: bool,
) -> Result<Decoding, String> {
    let c = &groups.choices[choice];
    kv_cache::decode(
        inputs.q.view(),
        c.k.view(),
        c.v.view(),
        DecodeOptions {
            layout,
            scale: Some(inputs.scale),
            recompute,
        },
    )
    .map_err(|e| e.to_string())
}

type LabResult = Result<DecodeLab, String>;

fn lab(state: &Context) -> Option<&LabResult> {
    state.views.get::<LabResult>(ViewKind::Decode)
}

fn rebuild(state: &mut Context) {
    let keep = lab(state)
        .and_then(|l| l.as_ref().ok())
        .map(|l| l.kv_heads());
    let fresh = DecodeLab::build(&state.pipeline, keep);
    state.views.set(ViewKind::Decode, fresh);
}

fn step_to(state: &mut Context, t: isize) {
    let n = if state.source.session().is_some() {
        real::grid(state).0 as isize
    } else {
        state.pipeline.shape.n_q as isize
    };
    let t = t.clamp(0, (n - 1).max(0)) as usize;
    state.cursor.0 = t;
    let grid = DecodeView.grid(state);
    state.clamp_cursor(grid);
}

fn cycle_groups(state: &mut Context, delta: isize) {
    if let Some(s) = state.source.session() {
        let c = s.config();
        let text = format!(
            "{} has {} KV head{} for {} query heads, fixed by its training; the cache line compares MHA",
            s.model.name,
            c.kv_heads,
            if c.kv_heads == 1 { "" } else { "s" },
            c.heads
        );
        state.set_status(StatusKind::Info, text);
        return;
    }
    let Some(Ok(lab)) = state.views.get_mut::<LabResult>(ViewKind::Decode) else {
        return;
    };
    let k = lab.groups.choices.len() as isize;
    let next = (lab.choice as isize + delta).rem_euclid(k) as usize;
    match lab.choose(next) {
        Ok(()) => {
            let c = &lab.groups.choices[next];
            let text = format!(
                "{} KV head{} ({}): cache {} per layer in {}",
                c.kv_heads,
                if c.kv_heads == 1 { "" } else { "s" },
                c.sharing.name(),
                decimal_bytes(c.cache_bytes),
                crate::engine::memory::dtype_name(CACHE_DTYPE)
            );
            state.set_status(StatusKind::Info, text);
        }
        Err(e) => state.set_status(StatusKind::Error, e),
    }
}

impl View for DecodeView {
    fn kind(&self) -> ViewKind {
        ViewKind::Decode
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn update(&self, state: &mut Context, action: Action) {
        let Action::ViewCommand(id) = action else {
            return;
        };
        let t = state.cursor.0 as isize;
        match id {
            CMD_NEXT => step_to(state, t + 1),
            CMD_PREV => step_to(state, t - 1),
            CMD_FIRST => step_to(state, 0),
            CMD_LAST => step_to(state, isize::MAX / 2),
            // `g` goes towards MQA (choices are ordered MQA first).
            CMD_GROUPS_DOWN => cycle_groups(state, -1),
            CMD_GROUPS_UP => cycle_groups(state, 1),
            _ => {}
        }
    }

    fn refresh(&self, state: &mut Context) {
        if state.source.session().is_some() {
            real::ensure(state);
        } else {
            rebuild(state);
        }
    }

    /// Rows: the decoding steps; columns: the positions a step can attend to.
    fn grid(&self, state: &Context) -> (usize, usize) {
        if state.source.session().is_some() {
            return real::grid(state);
        }
        let n = state.pipeline.shape.n_q;
        match lab(state) {
            Some(Ok(_)) => (n, n),
            _ => (0, 0),
        }
    }

    /// A scripted animation decodes token by token.
    fn frames(&self, state: &Context) -> usize {
        self.grid(state).0
    }

    fn show_frame(&self, state: &mut Context, k: usize) {
        step_to(state, k as isize);
    }

    fn subtitle(&self, state: &Context) -> String {
        if state.source.session().is_some() {
            return real::subtitle(state);
        }
        "KV-cache decoding token by token · cost with and without the cache · GQA/MQA groups".into()
    }

    fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        if state.source.session().is_some() {
            return real::render(state, area, buf);
        }
        match lab(state) {
            Some(Ok(lab)) => render_lab(state, lab, area, buf),
            Some(Err(e)) => LineWriter::new(area, buf).text(e, state.theme.warn),
            None => LineWriter::new(area, buf).text("preparing the decoding...", state.theme.dim),
        }
    }
}

// ---- drawing --------------------------------------------------------------------

/// The step on screen and the selected position (at most the step).
fn focus(state: &Context, lab: &DecodeLab) -> (usize, usize) {
    let n = lab.decoding.steps.len();
    let t = state.cursor.0.min(n.saturating_sub(1));
    (t, state.cursor.1.min(t))
}

fn label(tokens: &[String], i: usize) -> String {
    tokens.get(i).cloned().unwrap_or_else(|| format!("t{i}"))
}

fn render_lab(state: &Context, lab: &DecodeLab, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let (t, j) = focus(state, lab);
    let Some(step) = lab.decoding.steps.get(t) else {
        return;
    };
    let n = lab.decoding.steps.len();
    let h = state.head.min(lab.inputs.heads().saturating_sub(1));
    let choice = &lab.groups.choices[lab.choice];
    let g = choice.kv_head_of[h];
    let mut w = LineWriter::new(area, buf);
    w.line(vec![
        Span::styled(format!("step {}/{n}", t + 1), th.value),
        Span::styled(
            format!("  decoding '{}' (position {t})", label(&lab.tokens, t)),
            th.field_value,
        ),
        Span::styled(
            format!(
                "  its k, v {} slot {}{}",
                if state.glyphs.ascii { "->" } else { "→" },
                step.written_slot,
                step.evicted
                    .map(|e| format!(", overwriting position {e}"))
                    .unwrap_or_default()
            ),
            th.base,
        ),
        Span::styled(
            format!(
                "  cache {} row{} x {} KV head{}",
                step.cache_len,
                if step.cache_len == 1 { "" } else { "s" },
                choice.kv_heads,
                if choice.kv_heads == 1 { "" } else { "s" }
            ),
            th.dim,
        ),
    ]);
    for note in &lab.notes {
        w.text(note, th.dim);
    }
    // The cache and weights need a title, a column header, a row per step and the
    // legend; the detail line under the weights comes when there is room.
    let rows = w.rows_left();
    let want_upper = n as u16 + 5;
    let lower_min = 4;
    let upper_h = want_upper
        .min(rows.saturating_sub(lower_min))
        .max(rows.min(6));
    let upper = w.take(upper_h);
    let lower = w.take(w.rows_left());

    // Upper band: the cache (K, V of the selected head's KV head) and the weights.
    let [k_area, v_area, w_area] = Layout::horizontal([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
    ])
    .spacing(2)
    .areas(upper);
    let slot_rows: Vec<usize> = step.slot_positions.clone();
    let slot_labels: Vec<String> = slot_rows
        .iter()
        .enumerate()
        .map(|(s, &pos)| match lab.layout {
            CacheLayout::Full => label(&lab.tokens, pos),
            CacheLayout::Rolling { .. } => format!("{s} {}", label(&lab.tokens, pos)),
        })
        .collect();
    let newest = [(step.written_slot, 0usize)];
    for (area, name, data) in [(k_area, "K", &choice.k), (v_area, "V", &choice.v)] {
        let width = data.dim().2;
        let rows = Array2::from_shape_fn((slot_rows.len(), width), |(r, c)| {
            data[[g, slot_rows[r], c]]
        });
        let what = match lab.layout {
            CacheLayout::Full => format!("{name} cache (kv {})", g + 1),
            CacheLayout::Rolling { .. } => format!("{name} cache (kv {}), by slot", g + 1),
        };
        let m = Matrix::new(
            what,
            rows,
            slot_labels.clone(),
            (0..width).map(|c| c.to_string()).collect(),
        );
        let selected_slot = slot_rows.iter().position(|&p| p == j);
        MatrixPanel {
            matrix: &m,
            title: m.name.clone(),
            title_style: th.group(g),
            cursor: selected_slot.map(|s| (s, 0)),
            highlight: &newest,
            masked: None,
            scale: ValueScale::fit(data.slice(s![g, .., ..]).iter().copied()),
            legend: false,
            max_cell: MAX_CELL,
        }
        .render(state, area, w.buf);
    }
    render_weights(state, lab, (t, j), h, w_area, w.buf);

    // Lower band: cost on the left, KV groups on the right.
    let [cost, groups] = Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)])
        .spacing(2)
        .areas(lower);
    render_cost(state, lab, t, cost, w.buf);
    render_groups(state, lab, h, groups, w.buf);
}

/// Every step so far, one row each: step r's weights over the positions it saw.
fn render_weights(
    state: &Context,
    lab: &DecodeLab,
    (t, j): (usize, usize),
    h: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    let steps = &lab.decoding.steps[..=t];
    let mut data = Array2::zeros((t + 1, t + 1));
    let mut seen = Array2::from_elem((t + 1, t + 1), false);
    for (r, st) in steps.iter().enumerate() {
        for (c, &pos) in st.cache_positions.iter().enumerate() {
            data[[r, pos]] = st.weights[[h, c]];
            seen[[r, pos]] = true;
        }
    }
    let labels: Vec<String> = (0..=t).map(|i| label(&lab.tokens, i)).collect();
    let m = Matrix::new(
        format!("weights per step (head {})", h + 1),
        data,
        labels.clone(),
        labels,
    );
    let masked = |r: usize, c: usize| !seen[[r, c]];
    let panel_h = t as u16 + 4;
    let detail_h = if area.height >= panel_h + 2 { 2 } else { 0 };
    let [panel, detail, _] = Layout::vertical([
        Constraint::Length(panel_h.min(area.height)),
        Constraint::Length(detail_h),
        Constraint::Fill(1),
    ])
    .areas(area);
    MatrixPanel {
        matrix: &m,
        title: m.name.clone(),
        title_style: state.theme.panel_title,
        cursor: Some((t, j)),
        highlight: &[],
        masked: Some(&masked),
        scale: ValueScale::Sequential { lo: 0.0, hi: 1.0 },
        legend: true,
        max_cell: MAX_CELL,
    }
    .render(state, panel, buf);
    let step = &lab.decoding.steps[t];
    let weight = step
        .cache_positions
        .iter()
        .position(|&p| p == j)
        .map(|c| step.weights[[h, c]]);
    let text = match weight {
        Some(wt) => format!(
            "'{}' attends to '{}' with {} (head {})",
            label(&lab.tokens, t),
            label(&lab.tokens, j),
            significant(wt, 4),
            h + 1
        ),
        // A key after the query is not decoded yet; one before it that is missing was
        // overwritten in the rolling buffer. Either way the query (row t) cannot see it.
        None if j > t => format!(
            "'{}' (position {j}) comes after '{}': not decoded yet",
            label(&lab.tokens, j),
            label(&lab.tokens, t)
        ),
        None => format!(
            "'{}' (position {j}) has left the rolling buffer: '{}' cannot see it",
            label(&lab.tokens, j),
            label(&lab.tokens, t)
        ),
    };
    LineWriter::new(detail, buf).text(&text, state.theme.dim);
}

fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".to_string()
    } else {
        format!("{:.1}x", a as f64 / b as f64)
    }
}

fn render_cost(state: &Context, lab: &DecodeLab, t: usize, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let steps = &lab.decoding.steps;
    let step = &steps[t];
    let sh = &lab.decoding.shape;
    let so_far_cached: u64 = steps[..=t].iter().map(|s| s.cached_madds).sum();
    let so_far_recompute: u64 = steps[..=t].iter().map(|s| s.recompute_madds).sum();
    let (total_c, total_r) = (
        lab.decoding.total_cached_madds(),
        lab.decoding.total_recompute_madds(),
    );
    let check = match step.recompute_max_abs_diff {
        Some(d) => format!("recomputed here too: max|diff| {}", sci(d)),
        None => "recomputation counted, not rerun at this size".into(),
    };
    let mut w = LineWriter::new(area, buf);
    if area.height < 8 {
        // Short screens: the figures alone.
        w.line(vec![
            Span::styled("step ", th.panel_title),
            Span::styled(group_digits(step.cached_madds), th.good),
            Span::styled(" / ", th.dim),
            Span::styled(
                format!(
                    "{} recomputed ({})",
                    group_digits(step.recompute_madds),
                    ratio(step.recompute_madds, step.cached_madds)
                ),
                th.warn,
            ),
        ]);
        w.line(vec![Span::styled(
            format!(
                "so far {} / {}, all {} / {}",
                group_digits(so_far_cached),
                group_digits(so_far_recompute),
                group_digits(total_c),
                group_digits(total_r),
            ),
            th.base,
        )]);
        w.text(&check, th.dim);
        return;
    }
    let visible = lab.layout.visible(t);
    w.line(vec![Span::styled("cost in multiply-adds", th.panel_title)]);
    w.text(
        &format!(
            "cached: {} heads x {visible} key{} x ({} + {}) = {}, O(t d)",
            sh.heads,
            if visible == 1 { "" } else { "s" },
            sh.d,
            sh.dv,
            group_digits(step.cached_madds)
        ),
        th.good,
    );
    w.text(
        &format!(
            "no cache: all {} row{} again = {} ({}), O(t^2 d)",
            t + 1,
            if t == 0 { "" } else { "s" },
            group_digits(step.recompute_madds),
            ratio(step.recompute_madds, step.cached_madds)
        ),
        th.warn,
    );
    w.text(&check, th.dim);
    w.text(
        &format!(
            "so far {} / {} ({}), sentence {} / {} ({})",
            group_digits(so_far_cached),
            group_digits(so_far_recompute),
            ratio(so_far_recompute, so_far_cached),
            group_digits(total_c),
            group_digits(total_r),
            ratio(total_r, total_c)
        ),
        th.base,
    );
    // One bar per step: the cached part solid, the rest of the recomputation shaded.
    let rows = w.rows_left() as usize;
    let first = (t + 1).saturating_sub(rows);
    let max = steps[t].recompute_madds.max(1) as f64;
    let num_w = group_digits(steps[t].recompute_madds).len();
    for (r, st) in steps.iter().enumerate().take(t + 1).skip(first) {
        let row = w.take(1);
        render_step_bar(
            state,
            lab,
            r,
            st.cached_madds,
            st.recompute_madds,
            max,
            num_w,
            row,
            w.buf,
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn render_step_bar(
    state: &Context,
    lab: &DecodeLab,
    r: usize,
    cached: u64,
    recompute: u64,
    max: f64,
    num_w: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    let th = &state.theme;
    let g = &state.glyphs;
    let name = crate::widgets::text::fit(&label(&lab.tokens, r), 6, g.ellipsis);
    let head = format!("{r:>3} {name:<6} ");
    let tail = format!(
        " {:>num_w$} / {:>num_w$}",
        group_digits(cached),
        group_digits(recompute)
    );
    let bar_w = (area.width as usize).saturating_sub(head.len() + tail.len());
    let solid = ((cached as f64 / max) * bar_w as f64).round() as usize;
    let total = ((recompute as f64 / max) * bar_w as f64)
        .round()
        .max(solid as f64) as usize;
    let shade = if g.ascii { ":" } else { "░" };
    let spans = vec![
        Span::styled(head, th.label),
        Span::styled(g.eighths[7].repeat(solid.max(1)), th.good),
        Span::styled(shade.repeat(total.saturating_sub(solid.max(1))), th.warn),
        Span::styled(" ".repeat(bar_w.saturating_sub(total.max(1))), th.base),
        Span::styled(tail, th.dim),
    ];
    LineWriter::new(area, buf).line(spans);
}

fn sci(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() < 1e-3 {
        format!("{x:.1e}")
    } else {
        fit_number(x, 6, true)
    }
}

fn render_groups(state: &Context, lab: &DecodeLab, h: usize, area: Rect, buf: &mut Buffer) {
    let th = &state.theme;
    let c = &lab.groups.choices[lab.choice];
    let mha = lab.groups.choices.last().expect("MHA is always a choice");
    let heads = lab.groups.heads;
    let dtype = crate::engine::memory::dtype_name(CACHE_DTYPE);
    let baseline = if lab.inputs.kv_heads() == heads {
        "MHA"
    } else {
        "the lesson's KV heads"
    };
    let mut w = LineWriter::new(area, buf);
    w.line(vec![
        Span::styled(
            format!(
                "{} KV head{} of {heads}: {}",
                c.kv_heads,
                if c.kv_heads == 1 { "" } else { "s" },
                c.sharing.name()
            ),
            th.panel_title,
        ),
        Span::styled(
            format!(
                "  {} query head{} per K/V",
                c.group_size,
                if c.group_size == 1 { "" } else { "s" }
            ),
            th.dim,
        ),
    ]);
    // Which query heads read which K/V head, each group in its colour.
    let mut spans = Vec::new();
    for (g, qs) in c.query_heads_of.iter().enumerate() {
        let list: Vec<String> = qs.iter().map(|q| (q + 1).to_string()).collect();
        let mut style = th.group(g);
        if qs.contains(&h) {
            style = style.add_modifier(th.highlight);
        }
        spans.push(Span::styled(
            format!(
                "kv{}{}q{}",
                g + 1,
                if state.glyphs.ascii { "<-" } else { "←" },
                list.join(",")
            ),
            style,
        ));
        spans.push(Span::raw(" "));
    }
    w.line(spans);
    if area.height < 8 {
        w.line(vec![Span::styled(
            format!(
                "cache {} {dtype} (MHA {})",
                decimal_bytes(c.cache_bytes),
                decimal_bytes(mha.cache_bytes),
            ),
            th.base,
        )]);
        w.line(vec![Span::styled(
            format!("out vs {baseline}: max|diff| {}", sci(c.max_abs_diff)),
            th.base,
        )]);
        return;
    }
    w.text(
        &format!(
            "cache, one layer: {} tokens x {} x ({} + {}) x {} B {dtype} = {}",
            lab.groups.n,
            c.kv_heads,
            lab.groups.d,
            lab.groups.dv,
            CACHE_DTYPE.bytes(),
            decimal_bytes(c.cache_bytes),
        ),
        th.base,
    );
    w.text(
        &format!(
            "out vs {baseline}: max|diff| {}, relative {} (K/V pooled)",
            sci(c.max_abs_diff),
            sci(c.rel_diff)
        ),
        if c.max_abs_diff == 0.0 {
            th.good
        } else {
            th.warn
        },
    );
    // Every choice at once, the current one marked.
    if w.rows_left() as usize > lab.groups.choices.len() + 1 {
        w.line(vec![Span::styled(
            format!(
                "  {:>4} {:<4} {:>10} {:>8} {:>10} {:>9}",
                "KV", "", "cache", "vs MHA", "max|diff|", "relative"
            ),
            th.label,
        )]);
        for (k, ch) in lab.groups.choices.iter().enumerate().rev() {
            let mark = if k == lab.choice {
                state.glyphs.marker
            } else {
                " "
            };
            let style = if k == lab.choice {
                th.field_value
            } else {
                th.base
            };
            w.line(vec![Span::styled(
                format!(
                    "{mark} {:>4} {:<4} {:>10} {:>8} {:>10} {:>9}",
                    ch.kv_heads,
                    ch.sharing.name(),
                    decimal_bytes(ch.cache_bytes),
                    format!("1/{}", mha.cache_bytes / ch.cache_bytes.max(1)),
                    sci(ch.max_abs_diff),
                    sci(ch.rel_diff)
                ),
                style,
            )]);
        }
    }
    let rows = w.rows_left() as usize;
    if rows > 0 {
        let items: Vec<(String, f64, Style)> = c
            .head_max_abs_diff
            .iter()
            .enumerate()
            .map(|(q, d)| (format!("q{} |diff|", q + 1), *d, th.group(c.kv_head_of[q])))
            .collect();
        // A window of heads around the selected one when not all fit.
        let first = h
            .saturating_sub(rows.saturating_sub(1) / 2)
            .min(items.len().saturating_sub(rows));
        let shown: Vec<_> = items.iter().skip(first).take(rows).cloned().collect();
        // One scale for every choice: MQA moves the output most.
        let max = lab
            .groups
            .choices
            .iter()
            .flat_map(|ch| ch.head_max_abs_diff.iter().copied())
            .fold(0.0, f64::max);
        let area = w.take(rows as u16);
        (&HBars {
            items: &shown,
            max: (max > 0.0).then_some(max),
            glyphs: &state.glyphs,
            label: th.label,
            value_w: 6,
        })
            .render(area, w.buf);
    }
}
