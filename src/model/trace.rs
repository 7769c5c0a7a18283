//! Every intermediate tensor of one block, kept for the app's pipeline view so that each
//! cell can be shown with the arithmetic that produced it.

/// One named tensor of a block, row-major with the given shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// Stable name (see [`LayerTrace`] for the list).
    pub name: &'static str,
    /// How the stage is computed, in one line.
    pub formula: &'static str,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// The stages of block `layer` in the order they are computed, n tokens, H query heads,
/// G KV heads. Names (shapes):
///
/// - `block_input` [n, d_model]: the residual stream entering the block;
/// - `attn_norm` [n, d_model]: pre-norm models only, the normed input of attention;
/// - `q`, `k`, `v` [H|G, n, d_head]: the projections (biases included), split into heads;
/// - `q_rope`, `k_rope` [H|G, n, d_head]: RoPE models only (not with `no_pe`), rotated;
/// - `scores` [H, n, n]: scale q.k (before the mask);
/// - `masked_scores` [H, n, n]: scores plus the mask (-inf where a key is masked);
/// - `weights` [H, n, n]: the softmax, P = exp(masked_scores - lse);
/// - `head_out` [H, n, d_head]: P V per head (before any ablation);
/// - `concat` [n, H d_head]: the heads side by side, ablated heads zeroed;
/// - `attn_out` [n, d_model]: concat W_O^T + b;
/// - `attn_residual` [n, d_model]: block_input + attn_out;
/// - `attn_norm` (post-norm models, here instead of above) [n, d_model]: norm(attn_residual);
/// - `mlp_norm` [n, d_model]: pre-norm models, the normed input of the MLP;
/// - `mlp_pre_act` [n, d_ff]: gate x (gated MLP) or up x (plain), before the activation;
/// - `mlp_up` [n, d_ff]: gated MLPs only, up x;
/// - `mlp_hidden` [n, d_ff]: act(gate x) * up x, or act(up x);
/// - `mlp_out` [n, d_model]: the down projection;
/// - `mlp_residual` [n, d_model]: the MLP's input residual + mlp_out;
/// - `mlp_norm` (post-norm models, here instead of above) [n, d_model]: norm(mlp_residual);
/// - `block_output` [n, d_model]: the residual stream leaving the block.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerTrace {
    pub layer: usize,
    pub stages: Vec<Stage>,
}

impl LayerTrace {
    pub fn new(layer: usize) -> Self {
        LayerTrace {
            layer,
            stages: Vec::new(),
        }
    }

    /// The stage called `name`, if this block has it.
    pub fn get(&self, name: &str) -> Option<&Stage> {
        self.stages.iter().find(|s| s.name == name)
    }

    /// The names in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.stages.iter().map(|s| s.name).collect()
    }

    pub(crate) fn push(
        &mut self,
        name: &'static str,
        formula: &'static str,
        shape: &[usize],
        data: &[f32],
    ) {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len(), "{name}");
        self.stages.push(Stage {
            name,
            formula,
            shape: shape.to_vec(),
            data: data.to_vec(),
        });
    }
}
