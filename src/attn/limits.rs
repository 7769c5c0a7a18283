//! Size limits, each with the reason for its value. Inputs over a limit are refused
//! with a message that names the limit and, where there is one, the way around it.

/// Tokens of a model lesson (`--tokens`, scene files). The app draws n x n matrices
/// with a label per row and column; past this no terminal shows them legibly.
pub const MAX_MODEL_TOKENS: usize = 128;

/// d_model of a model lesson: the inspector lists d_model terms per projection cell.
pub const MAX_D_MODEL: usize = 1024;

/// Query heads of a model lesson or of tensors opened in the app.
pub const MAX_HEADS: usize = 64;

/// Queries or keys of tensors opened in the app (`view --q/--k/--v`, `view --attn`).
pub const MAX_VIEW_TOKENS: usize = 2048;

/// Score cells (heads x Nq x Nk) of a pipeline. The pipeline keeps five score-shaped
/// matrices per head (scores, scaled, biased, masked, weights) in f64: 2^22 cells is
/// 32 MiB each, 160 MiB in all.
pub const MAX_PIPELINE_SCORE_CELLS: u64 = 1 << 22;

/// Weights (heads x Nq x Nk) of a pipeline that holds only the weights (`view --attn`,
/// a real model's layer too long for every stage): one matrix per head instead of five,
/// so five times the cells in the same 160 MiB (SmolLM2's 9 heads at 1,024 tokens).
pub const MAX_WEIGHT_CELLS: u64 = 5 * MAX_PIPELINE_SCORE_CELLS;

/// Elements of one .npy tensor. Tensors are held in f64: 2^28 elements is 2 GiB, and
/// the header is checked against this before anything is allocated.
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 28;

/// Multiply-adds of the f64 reference path, B*H*Nq*Nk*(d + dv). It is plain loops:
/// 2^33 (H=4, N=4096, d=64) took 2.4 s in a release build on a 2-core CI-class machine
/// (and far longer in a debug build); a bigger problem belongs to the fast paths.
pub const MAX_REFERENCE_MACS: u64 = 1 << 33;

/// Bytes of one head's f32 score matrix in the naive path (it materialises Nq x Nk):
/// 512 MiB admits n = 8192 (268 MB, the articles' example) and refuses n = 16384.
pub const MAX_NAIVE_SCORE_BYTES: u64 = 512 << 20;

/// Worker threads a user may ask for, on any machine.
pub const MAX_THREADS: usize = 1024;

/// Worker threads per core a user may ask for: past a few per core more threads only
/// add switching and memory (each worker keeps its own buffers).
pub const THREADS_PER_CORE: usize = 4;

/// The most worker threads a user may ask for here: [`THREADS_PER_CORE`] per core, at
/// least 8, at most [`MAX_THREADS`].
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores * THREADS_PER_CORE).clamp(8, MAX_THREADS)
}

/// Ceilings on the sizes a model's header or config.json states, checked before anything
/// is allocated from them: a damaged or hostile file then gets a message naming the key,
/// not an abort allocating terabytes. Each is several times the largest real model's.
pub mod model {
    /// Blocks (the largest open models have 126).
    pub const MAX_LAYERS: usize = 1024;
    /// Query or key/value heads (the largest have 128).
    pub const MAX_HEADS: usize = 1024;
    /// d_model, d_ff, a head's width (Llama 3.1 405B: d_model 16,384, d_ff 53,248).
    pub const MAX_WIDTH: usize = 1 << 18;
    /// Vocabulary (Gemma's 262,144 tokens is among the largest).
    pub const MAX_VOCAB: usize = 1 << 22;
    /// Context length a model states (Llama 4 Scout states 10,485,760).
    pub const MAX_CONTEXT: usize = 1 << 26;
}
