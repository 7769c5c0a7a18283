//! The names scene files use for pipeline stages.

use crate::engine::pipeline::StageId;

/// Every stage with its name in scene files, in pipeline order.
pub const STAGES: [(&str, StageId); 14] = [
    ("tokens", StageId::Tokens),
    ("embeddings", StageId::Embeddings),
    ("position_encoding", StageId::PositionEncoding),
    ("qkv_projection", StageId::QkvProjection),
    ("split_heads", StageId::SplitHeads),
    ("rope", StageId::Rope),
    ("scores", StageId::Scores),
    ("scale", StageId::Scale),
    ("alibi", StageId::Alibi),
    ("mask", StageId::Mask),
    ("softmax", StageId::Softmax),
    ("weighted_sum", StageId::WeightedSum),
    ("concat", StageId::Concat),
    ("output_projection", StageId::OutputProjection),
];

pub fn stage_from_name(name: &str) -> Result<StageId, String> {
    STAGES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, id)| *id)
        .ok_or_else(|| {
            let names: Vec<&str> = STAGES.iter().map(|(n, _)| *n).collect();
            format!(
                "unknown stage '{name}'; expected one of {}",
                names.join(", ")
            )
        })
}

pub fn stage_name(id: StageId) -> &'static str {
    STAGES
        .iter()
        .find(|(_, s)| *s == id)
        .map(|(n, _)| *n)
        .expect("STAGES lists every StageId")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for (name, id) in STAGES {
            assert_eq!(stage_from_name(name), Ok(id));
            assert_eq!(stage_name(id), name);
        }
        assert!(
            stage_from_name("softmaxx")
                .unwrap_err()
                .contains("expected one of tokens")
        );
    }
}
