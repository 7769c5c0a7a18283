//! The scaling view: the memory wall on this machine. Time and peak heap of the naive
//! path and of the flash kernel against n, measured live and drawn on log-log charts,
//! with a progress bar; Enter starts the sweep, Esc cancels it.
//!
//! The sweep runs off the UI thread ([`engine::scaling::Measurement`]). `update` stays
//! pure: a key only records a *request* in [`ScalingLab`], the event loop's [`Driver`](crate::tui::measure::Driver)
//! carries it out (starts or cancels the worker thread), and every report of the worker
//! comes back as an [`Action::Measurement`] that [`receive`] folds into the lab. So a
//! test can feed a fixed set of reports and draw exactly what a person would see, and
//! nothing is measured unless someone presses Enter.
//!
//! [`engine::scaling::Measurement`]: crate::engine::scaling::Measurement

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Widget;

use crate::engine::memory::decimal_bytes;
use crate::engine::scaling::{Job, KernelKind, Plan, Progress, Sample, Skip};
use crate::tui::action::Action;
use crate::tui::component::View;
use crate::tui::context::{Context, StatusKind};
use crate::tui::keys::{Binding, Group, KeyPat, When};
use crate::tui::view_kind::ViewKind;
use crate::widgets::lines::LineWriter;
use crate::widgets::loglog::{self, LogLogChart, Series};
use crate::widgets::text;

pub struct ScalingView;

pub const CMD_START: u8 = 0;
pub const CMD_CANCEL: u8 = 1;

static KEYS: &[Binding] = &[
    Binding {
        keys: &[KeyPat::Code(KeyCode::Enter)],
        action: Action::ViewCommand(CMD_START),
        desc: "measure: n = 256 ... 131072, naive and flash, on a worker thread",
        hint: Some("measure"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
    Binding {
        keys: &[KeyPat::Code(KeyCode::Esc)],
        action: Action::ViewCommand(CMD_CANCEL),
        desc: "cancel the measurement (stops within one run or flash slice)",
        hint: Some("cancel"),
        hint_keys: None,
        group: Group::ThisView,
        when: When::Always,
    },
];

/// Where one planned run stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Pending,
    /// Under way, this fraction done.
    Running(f64),
    Measured(Sample),
    Skipped(Skip),
    Failed(String),
}

impl Outcome {
    fn is_done(&self) -> bool {
        matches!(
            self,
            Outcome::Measured(_) | Outcome::Skipped(_) | Outcome::Failed(_)
        )
    }
}

/// What the sweep is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Nothing measured yet.
    Idle,
    /// Enter was pressed; the event loop has not started the worker yet.
    Starting,
    Running,
    /// Esc was pressed; waiting for the worker to stop.
    Cancelling,
    Finished {
        cancelled: bool,
    },
}

impl Phase {
    pub fn is_busy(self) -> bool {
        matches!(self, Phase::Starting | Phase::Running | Phase::Cancelling)
    }
}

/// Something only the event loop can do: start or stop the worker thread.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Start(Plan),
    Cancel,
}

/// The scaling view's data: the sweep's plan and every report of it so far.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingLab {
    /// What Enter measures.
    pub plan: Plan,
    pub phase: Phase,
    pub jobs: Vec<Job>,
    pub outcomes: Vec<Outcome>,
    pub d: usize,
    pub available_bytes: Option<u64>,
    /// None until a sweep starts; false where the counting allocator is not installed.
    pub heap_metered: Option<bool>,
    pub flash_threads: usize,
    /// A failure of the sweep itself (not of one run).
    pub error: Option<String>,
    /// The latest request, numbered; the driver carries out each number once. Numbers
    /// keep counting for the life of the state (the lab is never replaced, only reset
    /// by [`start`]), so a new request is always a larger number.
    pub request: Option<(u64, Request)>,
}

impl Default for ScalingLab {
    fn default() -> Self {
        ScalingLab {
            plan: Plan::memory_wall(),
            phase: Phase::Idle,
            jobs: Vec::new(),
            outcomes: Vec::new(),
            d: 0,
            available_bytes: None,
            heap_metered: None,
            flash_threads: 0,
            error: None,
            request: None,
        }
    }
}

impl ScalingLab {
    fn ask(&mut self, request: Request) {
        let id = self.request.as_ref().map_or(1, |(id, _)| id + 1);
        self.request = Some((id, request));
    }

    /// Runs done (measured, skipped or failed) plus the running one's fraction, over all.
    pub fn fraction(&self) -> f64 {
        if self.outcomes.is_empty() {
            return 0.0;
        }
        let done: f64 = self
            .outcomes
            .iter()
            .map(|o| match o {
                Outcome::Running(f) => f.clamp(0.0, 1.0),
                o if o.is_done() => 1.0,
                _ => 0.0,
            })
            .sum();
        done / self.outcomes.len() as f64
    }

    pub fn samples(&self, kernel: KernelKind) -> Vec<&Sample> {
        self.outcomes
            .iter()
            .filter_map(|o| match o {
                Outcome::Measured(s) if s.kernel == kernel => Some(s),
                _ => None,
            })
            .collect()
    }

    fn running(&self) -> Option<(Job, f64)> {
        self.outcomes
            .iter()
            .zip(&self.jobs)
            .find_map(|(o, j)| match o {
                Outcome::Running(f) => Some((*j, *f)),
                _ => None,
            })
    }

    /// The naive skips, one line per distinct reason kind, from the first n it applies.
    fn skips(&self) -> Vec<(usize, Skip)> {
        let mut out: Vec<(usize, Skip)> = Vec::new();
        for (o, j) in self.outcomes.iter().zip(&self.jobs) {
            if let Outcome::Skipped(s) = o
                && out.last().is_none_or(|(_, last)| {
                    std::mem::discriminant(last) != std::mem::discriminant(s)
                })
            {
                out.push((j.n, *s));
            }
        }
        out
    }
}

/// The lab, made on first use.
fn lab_mut(state: &mut Context) -> &mut ScalingLab {
    if state.views.get::<ScalingLab>(ViewKind::Scaling).is_none() {
        state.views.set(ViewKind::Scaling, ScalingLab::default());
    }
    state
        .views
        .get_mut::<ScalingLab>(ViewKind::Scaling)
        .expect("the lab was just made")
}

pub fn lab(state: &Context) -> Option<&ScalingLab> {
    state.views.get::<ScalingLab>(ViewKind::Scaling)
}

/// Fold one report of the worker into the lab (the update of `Action::Measurement`).
pub fn receive(state: &mut Context, progress: Progress) {
    let lab = lab_mut(state);
    match progress {
        Progress::Started {
            jobs,
            d,
            available_bytes,
            heap_metered,
            flash_threads,
        } => {
            lab.outcomes = vec![Outcome::Pending; jobs.len()];
            lab.jobs = jobs;
            lab.d = d;
            lab.available_bytes = available_bytes;
            lab.heap_metered = Some(heap_metered);
            lab.flash_threads = flash_threads;
            lab.error = None;
            if lab.phase != Phase::Cancelling {
                lab.phase = Phase::Running;
            }
        }
        Progress::Working { job, fraction } => {
            if let Some(o) = lab.outcomes.get_mut(job) {
                *o = Outcome::Running(fraction);
            }
        }
        Progress::Measured { job, sample } => {
            if let Some(o) = lab.outcomes.get_mut(job) {
                *o = Outcome::Measured(sample);
            }
        }
        Progress::Skipped { job, reason } => {
            if let Some(o) = lab.outcomes.get_mut(job) {
                *o = Outcome::Skipped(reason);
            }
        }
        Progress::Failed { job, message } => match lab.outcomes.get_mut(job) {
            Some(o) => *o = Outcome::Failed(message),
            None => lab.error = Some(message),
        },
        Progress::Finished { cancelled } => {
            for o in &mut lab.outcomes {
                if matches!(o, Outcome::Running(_)) {
                    *o = Outcome::Pending;
                }
            }
            lab.phase = Phase::Finished { cancelled };
            let text = if cancelled {
                format!("measurement cancelled: {}", tally(lab))
            } else {
                format!("measurement done: {}", tally(lab))
            };
            state.set_status(StatusKind::Info, text);
        }
    }
}

fn start(state: &mut Context) {
    let lab = lab_mut(state);
    if lab.phase.is_busy() {
        state.set_status(
            StatusKind::Warn,
            "a measurement is under way; Esc cancels it",
        );
        return;
    }
    let plan = lab.plan.clone();
    let first = plan.ns.first().copied().unwrap_or(0);
    let last = plan.ns.last().copied().unwrap_or(0);
    *lab = ScalingLab {
        plan: plan.clone(),
        request: lab.request.take(),
        ..ScalingLab::default()
    };
    lab.phase = Phase::Starting;
    lab.ask(Request::Start(plan));
    state.set_status(
        StatusKind::Info,
        format!("measuring n = {first} ... {last} on a worker thread; Esc cancels"),
    );
}

fn cancel(state: &mut Context) {
    let lab = lab_mut(state);
    if !lab.phase.is_busy() {
        state.set_status(StatusKind::Info, "nothing is being measured (Enter starts)");
        return;
    }
    lab.phase = Phase::Cancelling;
    lab.ask(Request::Cancel);
    state.set_status(
        StatusKind::Info,
        "cancelling: the worker stops at its next check",
    );
}

impl View for ScalingView {
    fn kind(&self) -> ViewKind {
        ViewKind::Scaling
    }

    fn commands(&self) -> &'static [Binding] {
        KEYS
    }

    fn update(&self, state: &mut Context, action: Action) {
        match action {
            Action::ViewCommand(CMD_START) => start(state),
            Action::ViewCommand(CMD_CANCEL) => cancel(state),
            Action::Measurement(p) => receive(state, p),
            _ => {}
        }
    }

    fn refresh(&self, state: &mut Context) {
        lab_mut(state);
    }

    fn grid(&self, _state: &Context) -> (usize, usize) {
        (0, 0)
    }

    fn subtitle(&self, _state: &Context) -> String {
        "the memory wall on this CPU: time and peak memory against n, naive vs flash, measured"
            .into()
    }

    fn render(&self, state: &Context, area: Rect, buf: &mut Buffer) {
        let default = ScalingLab::default();
        let lab = lab(state).unwrap_or(&default);
        render_lab(state, lab, area, buf);
    }
}

// ---- drawing --------------------------------------------------------------------

fn kernel_marker(state: &Context, k: KernelKind) -> &'static str {
    match (k, state.glyphs.ascii) {
        (KernelKind::Naive, false) => "●",
        (KernelKind::Naive, true) => "o",
        (KernelKind::Flash, false) => "▲",
        (KernelKind::Flash, true) => "*",
    }
}

fn kernel_style(state: &Context, k: KernelKind) -> Style {
    match k {
        KernelKind::Naive => state.theme.group(1),
        KernelKind::Flash => state.theme.group(0),
    }
}

fn ms_text(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1e3)
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.0} us", ms * 1e3)
    }
}

fn progress_bar(state: &Context, fraction: f64, width: usize) -> String {
    let g = &state.glyphs;
    let eighths = (fraction.clamp(0.0, 1.0) * width as f64 * 8.0).round() as usize;
    let mut s = g.eighths[7].repeat(eighths / 8);
    if !eighths.is_multiple_of(8) && !g.ascii {
        s.push_str(g.eighths[eighths % 8 - 1]);
    }
    let pad = width.saturating_sub(text::width(&s));
    let empty = if g.ascii { "." } else { "░" };
    format!("{s}{}", empty.repeat(pad))
}

/// The runs of a sweep, counted one way for the status line and the progress line:
/// "20/20 runs (16 measured, 4 skipped)".
fn tally(lab: &ScalingLab) -> String {
    let count = |f: fn(&Outcome) -> bool| lab.outcomes.iter().filter(|o| f(o)).count();
    let done = count(Outcome::is_done);
    let mut parts = vec![format!(
        "{} measured",
        count(|o| matches!(o, Outcome::Measured(_)))
    )];
    let skipped = count(|o| matches!(o, Outcome::Skipped(_)));
    if skipped > 0 {
        parts.push(format!("{skipped} skipped"));
    }
    let failed = count(|o| matches!(o, Outcome::Failed(_)));
    if failed > 0 {
        parts.push(format!("{failed} failed"));
    }
    format!("{done}/{} runs ({})", lab.jobs.len(), parts.join(", "))
}

fn render_lab(state: &Context, lab: &ScalingLab, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let mut w = LineWriter::new(area, buf);
    let total = lab.jobs.len();
    let done = lab.outcomes.iter().filter(|o| o.is_done()).count();
    let first = lab.plan.ns.first().copied().unwrap_or(0);
    let last = lab.plan.ns.last().copied().unwrap_or(0);

    // Line 1: what is happening, with the progress bar.
    let bar_w = (area.width as usize / 4).clamp(10, 40);
    let bar = |f: f64| Span::styled(progress_bar(state, f, bar_w), t.good);
    match lab.phase {
        Phase::Idle => w.line(vec![
            Span::styled("Enter", t.key),
            Span::styled(
                format!(
                    " measures n = {first} ... {last} (doubling), naive and flash, one head of d = {}; Esc cancels",
                    lab.plan.d
                ),
                t.base,
            ),
        ]),
        Phase::Starting => w.line(vec![bar(0.0), Span::styled("  starting the worker thread", t.dim)]),
        Phase::Running | Phase::Cancelling => {
            let mut spans = vec![
                bar(lab.fraction()),
                Span::styled(format!(" {:>3.0}%", lab.fraction() * 100.0), t.value),
                Span::styled(format!("  {done}/{total} runs"), t.base),
            ];
            if let Some((job, f)) = lab.running() {
                spans.push(Span::styled(
                    format!("  {} n = {} ({:.0}%)", job.kernel.name(), job.n, f * 100.0),
                    t.field_value,
                ));
            }
            if lab.phase == Phase::Cancelling {
                spans.push(Span::styled("  cancelling...", t.warn));
            } else {
                spans.push(Span::styled("  Esc cancels", t.dim));
            }
            w.line(spans);
        }
        Phase::Finished { cancelled } => {
            let (what, style) = if cancelled {
                ("cancelled", t.warn)
            } else {
                ("done", t.good)
            };
            w.line(vec![
                bar(lab.fraction()),
                Span::styled(format!("  {what}: {}", tally(lab)), style),
                Span::styled("  Enter measures again", t.dim),
            ]);
        }
    }

    // Line 2: how it is measured.
    let meter = match lab.heap_metered {
        Some(true) | None => "peak: heap allocated beyond the inputs (counting allocator)",
        Some(false) => "peak memory not measured: this binary has no counting allocator",
    };
    let sep = if state.glyphs.ascii { " | " } else { " · " };
    let mut how = vec![Span::styled(meter.to_string(), t.dim)];
    if let Some(avail) = lab.available_bytes {
        how.push(Span::styled(
            format!("{sep}{} available", decimal_bytes(avail)),
            t.dim,
        ));
    }
    if lab.flash_threads > 0 {
        let tier = lab
            .samples(KernelKind::Flash)
            .iter()
            .find_map(|s| s.tier)
            .map(|t| format!(" {t}"))
            .unwrap_or_default();
        how.push(Span::styled(
            format!(
                "{sep}naive 1 thread, flash {} thread{}{tier}",
                lab.flash_threads,
                if lab.flash_threads == 1 { "" } else { "s" }
            ),
            t.dim,
        ));
    }
    w.line(how);
    if let Some(e) = &lab.error {
        w.text(&format!("the sweep failed: {e}"), t.error);
    }

    // Notes under the charts: why the naive path stops, failed runs.
    let mut notes: Vec<(String, Style)> = lab
        .skips()
        .into_iter()
        .map(|(n, s)| (format!("naive skipped from n = {n}: {s}"), t.warn))
        .collect();
    for (o, j) in lab.outcomes.iter().zip(&lab.jobs) {
        if let Outcome::Failed(m) = o {
            notes.push((
                format!("{} n = {} failed: {m}", j.kernel.name(), j.n),
                t.error,
            ));
        }
    }
    let note_rows: u16 = notes
        .iter()
        .map(|(s, _)| text::wrap(s, area.width.max(1) as usize).len() as u16)
        .sum();

    let rows_left = w.rows_left();
    let table_rows = if rows_left >= 28 {
        (lab.plan.ns.len() as u16 + 1).min(rows_left.saturating_sub(note_rows + 14))
    } else {
        0
    };
    let chart_h = rows_left.saturating_sub(note_rows + table_rows + u16::from(table_rows > 0));
    let charts = w.take(chart_h);
    render_charts(state, lab, charts, w.buf);
    for (s, style) in &notes {
        w.text(s, *style);
    }
    if table_rows > 0 {
        w.blank();
        let table = w.take(table_rows);
        render_table(state, lab, table, w.buf);
    }
}

/// (n, value) of one measurement.
type Point = (f64, f64);
/// One chart line: its name, its points and the kernel it measured.
type Line = (&'static str, Vec<Point>, KernelKind);

fn render_charts(state: &Context, lab: &ScalingLab, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let ns = &lab.plan.ns;
    let x_range = (
        ns.first().copied().unwrap_or(1) as f64,
        ns.last().copied().unwrap_or(2) as f64,
    );
    let pts = |k: KernelKind, f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
        lab.samples(k)
            .into_iter()
            .filter_map(|s| f(s).map(|y| (s.n as f64, y)))
            .collect()
    };
    let time = |s: &Sample| Some(s.ms);
    let peak = |s: &Sample| s.peak_bytes.map(|b| b as f64);
    let (tn, tf) = (pts(KernelKind::Naive, &time), pts(KernelKind::Flash, &time));
    let (mn, mf) = (pts(KernelKind::Naive, &peak), pts(KernelKind::Flash, &peak));
    let series = |naive: Vec<Point>, flash: Vec<Point>| -> Vec<Line> {
        vec![
            ("naive", naive, KernelKind::Naive),
            ("flash", flash, KernelKind::Flash),
        ]
    };
    let time_series = series(tn, tf);
    let mem_series = series(mn, mf);
    let empty = match lab.phase {
        Phase::Idle => "no measurements yet: Enter starts them",
        _ => "waiting for the first run",
    };
    let [left, right] = if area.width >= 70 {
        Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)])
            .spacing(2)
            .areas(area)
    } else {
        Layout::vertical([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(area)
    };
    for (rect, title, data, y_tick) in [
        (
            left,
            "time per call",
            &time_series,
            loglog::ms_tick as fn(f64) -> String,
        ),
        (
            right,
            "peak memory",
            &mem_series,
            loglog::bytes_tick as fn(f64) -> String,
        ),
    ] {
        let s: Vec<Series> = data
            .iter()
            .map(|(name, points, k)| Series {
                name,
                points,
                marker: kernel_marker(state, *k),
                style: kernel_style(state, *k),
            })
            .collect();
        (&LogLogChart {
            title,
            series: &s,
            x_range,
            y_range: None,
            x_tick: loglog::count_tick,
            y_tick,
            glyphs: &state.glyphs,
            title_style: t.panel_title,
            axis: t.border,
            label: t.label,
            empty,
        })
            .render(rect, buf);
    }
}

fn render_table(state: &Context, lab: &ScalingLab, area: Rect, buf: &mut Buffer) {
    let t = &state.theme;
    let mut w = LineWriter::new(area, buf);
    let cols = [8usize, 12, 12, 9, 12, 12, 12];
    let cell = |s: String, i: usize| text::right(&s, cols[i], state.glyphs.ellipsis);
    let header = [
        "n",
        "naive",
        "flash",
        "speedup",
        "naive peak",
        "flash peak",
        "n x n f32",
    ];
    w.line(
        header
            .iter()
            .enumerate()
            .map(|(i, h)| Span::styled(cell(h.to_string(), i), t.label))
            .collect(),
    );
    for &n in &lab.plan.ns {
        let find = |k: KernelKind| {
            lab.jobs
                .iter()
                .zip(&lab.outcomes)
                .find(|(j, _)| j.n == n && j.kernel == k)
                .map(|(_, o)| o)
        };
        let (naive, flash) = (find(KernelKind::Naive), find(KernelKind::Flash));
        let time = |o: Option<&Outcome>| match o {
            Some(Outcome::Measured(s)) => ms_text(s.ms),
            Some(Outcome::Skipped(_)) => "skipped".into(),
            Some(Outcome::Failed(_)) => "failed".into(),
            Some(Outcome::Running(f)) => format!("{:.0}%", f * 100.0),
            _ => "-".into(),
        };
        let peak = |o: Option<&Outcome>| match o {
            Some(Outcome::Measured(s)) => s.peak_bytes.map_or_else(|| "n/a".into(), decimal_bytes),
            _ => "-".into(),
        };
        let speedup = match (naive, flash) {
            (Some(Outcome::Measured(a)), Some(Outcome::Measured(b))) if b.ms > 0.0 => {
                format!("{:.1}x", a.ms / b.ms)
            }
            _ => "-".into(),
        };
        let scores = decimal_bytes(n as u64 * n as u64 * 4);
        let row = [
            n.to_string(),
            time(naive),
            time(flash),
            speedup,
            peak(naive),
            peak(flash),
            scores,
        ];
        w.line(
            row.into_iter()
                .enumerate()
                .map(|(i, s)| {
                    let style = match i {
                        1 | 4 => kernel_style(state, KernelKind::Naive),
                        2 | 5 => kernel_style(state, KernelKind::Flash),
                        0 => t.label,
                        _ => t.base,
                    };
                    Span::styled(cell(s, i), style)
                })
                .collect(),
        );
    }
}
