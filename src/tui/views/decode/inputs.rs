//! The lesson's attention inputs as the decode and variants views use them: each query
//! head's q and each KV group's k and v after the position encoding (RoPE already
//! turned), read from the engine's pipeline.

use ndarray::{Array2, Array3, Axis, stack};

use crate::engine::pipeline::{Pipeline, Source, StageId};

/// q [H, n, d], k [G, n, d], v [G, n, dv] of one lesson, and its score scale.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadInputs {
    pub q: Array3<f64>,
    pub k: Array3<f64>,
    pub v: Array3<f64>,
    /// The factor the scores are multiplied by (1 when the lesson's scale is off).
    pub scale: f64,
}

impl HeadInputs {
    /// From the pipeline's RoPE stage (which passes q and k through unrotated when the
    /// encoding is not RoPE), or why there is nothing to take.
    pub fn from_pipeline(p: &Pipeline) -> Result<HeadInputs, String> {
        if p.source == Source::Weights {
            return Err(
                "these attention weights came from a file: there are no queries, keys or values to decode with; open a lesson or `attnviz view --q --k --v`".into(),
            );
        }
        let stage = p
            .stage(StageId::Rope)
            .ok_or("the pipeline has no RoPE stage to read q, k and v from")?;
        let stack3 = |ms: Vec<&Array2<f64>>, what: &str| -> Result<Array3<f64>, String> {
            let views: Vec<_> = ms.iter().map(|m| m.view()).collect();
            stack(Axis(0), &views).map_err(|e| format!("{what}: {e}"))
        };
        let q = stack3(stage.matrices.iter().map(|m| &m.data).collect(), "q")?;
        let k = stack3(
            stage
                .kv_groups
                .iter()
                .filter_map(|g| g.first())
                .map(|m| &m.data)
                .collect(),
            "k",
        )?;
        let v = stack3(
            stage
                .kv_groups
                .iter()
                .filter_map(|g| g.get(1))
                .map(|m| &m.data)
                .collect(),
            "v",
        )?;
        Ok(HeadInputs {
            q,
            k,
            v,
            scale: p.scale.unwrap_or(1.0),
        })
    }

    pub fn heads(&self) -> usize {
        self.q.dim().0
    }

    pub fn kv_heads(&self) -> usize {
        self.k.dim().0
    }

    /// K or V with one head per query head: KV head g repeated for each query head that
    /// reads it. For an MHA lesson this is K (or V) itself; for a GQA lesson it is the
    /// multi-head layout whose mean-pooling gives back the lesson's own KV heads.
    pub fn per_query_head(&self, kv: &Array3<f64>) -> Array3<f64> {
        let (h, g) = (self.heads(), self.kv_heads());
        let per = h / g.max(1);
        let views: Vec<_> = (0..h).map(|qh| kv.index_axis(Axis(0), qh / per)).collect();
        stack(Axis(0), &views).expect("every KV head has the same shape")
    }
}
