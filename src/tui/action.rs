//! Everything that can happen to the app, as data. Keys, mouse clicks, the clock and
//! scripts all become [`Action`]s, and [`update`](super::update::update) is the only
//! place that changes the state.

use crate::engine::pipeline::StageId;
use crate::tui::script::ScriptStep;
use crate::tui::view_kind::ViewKind;

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Quit,
    /// Step to the next / previous stage that does something with the current options.
    StageNext,
    StagePrev,
    StageFirst,
    StageLast,
    GoStage(StageId),
    /// Move the cell cursor by rows and columns (clamped to the matrix).
    Move {
        rows: isize,
        cols: isize,
    },
    /// Move the cursor to the stage's next matrix (e.g. from Q to K).
    NextPane,
    /// Put the cursor on a cell of the main matrix.
    Select {
        row: usize,
        col: usize,
    },
    /// A mouse click at a screen position; `update` finds what is under it.
    Click {
        x: u16,
        y: u16,
    },
    Resize {
        cols: u16,
        rows: u16,
    },
    NextView,
    PrevView,
    SetView(ViewKind),
    /// Select query head h (from 0).
    Head(usize),
    HeadNext,
    HeadPrev,
    CycleMask,
    CyclePe,
    ToggleScale,
    /// One token more / fewer.
    Longer,
    Shorter,
    Reseed,
    /// Previous / next layer of a 4-D attention file.
    LayerPrev,
    LayerNext,
    /// Zoom the n x n maps out (one cell covers twice the entries each way) or in.
    ZoomOut,
    ZoomIn,
    /// A cell covering several entries shows their mean / their maximum.
    TogglePool,
    Edit(EditAction),
    ToggleHelp,
    HelpScroll(isize),
    CloseOverlay,
    /// Apply one scripted step (view, stage, head, highlights, tiles, narration).
    ApplyStep(Box<ScriptStep>),
    /// Jump to step k of the loaded script.
    GotoStep(usize),
    PlayPause,
    StepNext,
    StepPrev,
    Faster,
    Slower,
    /// Virtual time passes (the event loop measures it; a recorder chooses it).
    Tick {
        ms: u64,
    },
    /// A command of the current view's own key table (see `View::bindings`).
    ViewCommand(u8),
    /// A report of the scaling view's measuring thread, delivered by the event loop.
    Measurement(crate::engine::scaling::Progress),
    /// A control of the flash view.
    Flash(FlashAction),
    /// A control of the training run (the train view).
    Train(TrainAction),
    /// What the training worker reports, delivered by the event loop.
    TrainReport(Box<TrainReport>),
    /// The logit lens a worker computed for the lens view, delivered by the event loop.
    Lens(Box<LensReport>),
    /// The direct logit attribution a worker computed for the attribution view.
    Attribution(Box<AttributionReport>),
    /// What a worker running the model again or decoding reports, delivered by the
    /// event loop.
    Work(Box<WorkReport>),
    /// Stop waiting for the model running again or decoding (Esc): its result is dropped.
    CancelWork,
    /// The composition scores of a model's heads a worker computed for the model view.
    Composition(Box<CompositionReport>),
    /// What a worker derived from a model session for the model or position view.
    Derived(Box<DerivedReport>),
    /// A patching sweep between the two texts a worker made for the patch view.
    Patch(Box<PatchReport>),
}

/// A value a worker made, compared by identity (the same allocation), so that an
/// action can carry it without the value itself being comparable.
#[derive(Debug)]
pub struct Shared<T>(pub std::sync::Arc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What the worker of a long model computation reports.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkReport {
    /// The line the screen shows while workers run; None when none runs any more.
    Progress(Option<String>),
    /// The model run again with `options` on the text of the session `base` (see
    /// [`session_key`](crate::tui::views::decode::session_key)), or why it failed.
    Rerun {
        base: String,
        options: crate::model::forward::ForwardOptions,
        /// It was asked to keep the contributions too.
        contributions: bool,
        session: Result<Shared<crate::model::session::ModelSession>, String>,
        /// The engine's pipeline of the new session's block `.0` (the layer on screen
        /// when the run started), built by the worker too; None if it could not be.
        pipeline: Option<(usize, Shared<crate::engine::pipeline::Pipeline>)>,
    },
    /// The decoding after the text of session `key`, or why it failed.
    Decoded {
        key: String,
        decoding: Result<Shared<crate::model::decode_steps::Decoding>, String>,
    },
}

/// What a worker derived from one model session (named by its address, see
/// [`session_key`](crate::tui::views::model::session_key)) for a view.
#[derive(Debug, Clone, PartialEq)]
pub enum DerivedReport {
    /// Every head's scores of the session's weights or contributions, [layer * heads +
    /// head], for the model view.
    HeadScores {
        session: usize,
        measure: crate::model::session::Measure,
        scores: Shared<Vec<crate::model::scores::HeadScores>>,
    },
    /// The rollout (n x n) of the session's weights or contributions, for the model view.
    Rollout {
        session: usize,
        measure: crate::model::session::Measure,
        rollout: Shared<Vec<f64>>,
    },
    /// The session's position encoding and the panels' matrices, for the position view
    /// (`key` as the view names the session).
    Position {
        key: String,
        data: Shared<PositionData>,
    },
}

/// A real model's position encoding as the position view shows it.
#[derive(Debug)]
pub struct PositionData {
    pub info: crate::model::positions::PositionInfo,
    /// RoPE: cos(angle) [position x pair]; learned: the table's rows [position x dim].
    pub table: Option<crate::engine::pipeline::Matrix>,
    /// Learned: cosine similarity of the rows [position x position].
    pub similarity: Option<crate::engine::pipeline::Matrix>,
}

/// The logit lens of a session's text, or why it could not be computed.
#[derive(Debug, Clone, PartialEq)]
pub struct LensReport {
    /// What it was computed for: the model (the address of its weights) and the text's
    /// token ids; a report for a text the app no longer shows is dropped.
    pub key: (usize, Vec<u32>),
    pub lens: Result<std::sync::Arc<crate::model::lens::TextLens>, String>,
}

/// The direct logit attribution of a session's answer, or why it could not be computed.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributionReport {
    /// As [`LensReport::key`].
    pub key: (usize, Vec<u32>),
    pub attribution: Result<std::sync::Arc<crate::model::attribution::Attribution>, String>,
}

/// What the patch view shows of a sweep: the metric of every site, the answer and the
/// foil it measures, and every patched run's top tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchOutcome {
    pub result: crate::model::patching::PatchResult,
    pub target: crate::model::predict::TopToken,
    pub foil: crate::model::predict::TopToken,
    /// [layers][columns]: the patched run's top tokens.
    pub tops: Vec<Vec<Vec<crate::model::predict::TopToken>>>,
}

/// A patching sweep a worker made: for which model, clean and corrupt ids and sites;
/// the second text's run; the sweep or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchReport {
    pub key: (usize, Vec<u32>, Vec<u32>, crate::model::patching::PatchWhat),
    pub compare: Option<Shared<crate::model::session::ModelSession>>,
    pub outcome: Result<std::sync::Arc<PatchOutcome>, String>,
}

/// Every pair of heads' composition scores of one model, or why they could not be
/// computed.
#[derive(Debug, Clone, PartialEq)]
pub struct CompositionReport {
    /// The model (the address of its weights) they were computed for.
    pub model: usize,
    pub scores: Result<std::sync::Arc<Vec<crate::model::composition::Composition>>, String>,
}

/// The training run's controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainAction {
    /// Pause or resume (in a lesson: the lesson and its run together).
    PlayPause,
    /// Train to the next evaluation, then pause.
    Step,
}

/// A report of the training worker.
#[derive(Debug, Clone, PartialEq)]
pub enum TrainReport {
    /// An evaluation happened: the run as of now.
    Snapshot(crate::train::Snapshot),
    /// A step or an evaluation failed; the run stops.
    Failed(String),
}

/// The flash view's controls (FlashAttention tile by tile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashAction {
    /// One tile forward / back in the loop order.
    NextTile,
    PrevTile,
    FirstTile,
    LastTile,
    PlayPause,
    /// More / fewer tiles per second.
    Faster,
    Slower,
    /// Query rows per block (Br) up / down.
    MoreRows,
    FewerRows,
    /// Keys per block (Bc) up / down.
    MoreKeys,
    FewerKeys,
    /// FlashAttention-2 order (query blocks outer) / FlashAttention-1 (key blocks outer).
    ToggleOrder,
    /// The forward pass / the backward pass (dQ, dK, dV, key blocks outer).
    TogglePass,
}

/// Editing the sentence (`e`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditAction {
    Start,
    Insert(char),
    Backspace,
    Delete,
    Left,
    Right,
    Home,
    End,
    Clear,
    Apply,
    Cancel,
}
