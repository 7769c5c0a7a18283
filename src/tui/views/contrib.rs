//! What `w` switches between in the model and tokens views: a real model's attention
//! weights A, or its contributions ||A[i, j] v_j W_O^h|| with each row normalised to
//! sum 1 (Kobayashi et al. 2020, `model::contrib`), and how the screen names them. The
//! model session computes and keeps both; a view only chooses which to read.

use crate::cli::Lang;
use crate::model::session::{Measure, ModelSession};

/// What a view set to show contributions (`contrib`) has on screen: the contributions
/// once the model session keeps them, else the weights.
pub fn shown(s: &ModelSession, contrib: bool) -> Measure {
    if contrib && s.contributions.is_some() {
        Measure::Contributions
    } else {
        Measure::Weights
    }
}

/// The measure's name on screen.
pub fn name(m: Measure, lang: Lang) -> &'static str {
    match (m, lang) {
        (Measure::Weights, Lang::En) => "weights A",
        (Measure::Contributions, Lang::En) => "contributions ||A v W_O||",
        (Measure::Weights, Lang::Zh) => "注意力权重 A",
        (Measure::Contributions, Lang::Zh) => "贡献 ||A v W_O||",
    }
}

/// The line saying what is on screen and what `w` switches to, then (`about`) what it
/// means.
pub fn line(m: Measure, lang: Lang, about: bool) -> String {
    let other = match m {
        Measure::Weights => Measure::Contributions,
        Measure::Contributions => Measure::Weights,
    };
    let what = match (m, lang) {
        (Measure::Weights, Lang::En) => "where each query looks",
        (Measure::Contributions, Lang::En) => {
            "each weight times the size of what its value adds, rows summing to 1 (Kobayashi et al. 2020)"
        }
        (Measure::Weights, Lang::Zh) => "每个查询看向哪里",
        (Measure::Contributions, Lang::Zh) => {
            "每个权重乘以其值向量实际加入的大小，每行之和为 1（Kobayashi 等 2020）"
        }
    };
    let (shown, other) = (name(m, lang), name(other, lang));
    match (lang, about) {
        (Lang::En, false) => format!("showing {shown} · w: {other}"),
        (Lang::En, true) => format!("showing {shown} · w: {other} · {what}"),
        (Lang::Zh, false) => format!("显示{shown} · w：{other}"),
        (Lang::Zh, true) => format!("显示{shown} · w：{other} · {what}"),
    }
}
