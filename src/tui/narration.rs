//! What each stage and view is about, in one or two sentences per language. Scripted
//! lessons replace this line with their own narration.

use crate::cli::Lang;
use crate::engine::pipeline::StageId;

/// The default narration of a stage.
pub fn stage(id: StageId, lang: Lang) -> &'static str {
    match lang {
        Lang::En => stage_en(id),
        Lang::Zh => stage_zh(id),
    }
}

fn stage_en(id: StageId) -> &'static str {
    match id {
        StageId::Tokens => {
            "The sentence, split into tokens. Every row and column of what follows is one of them."
        }
        StageId::Embeddings => {
            "Each token becomes a vector of d_model numbers: the same token always gets the same vector."
        }
        StageId::PositionEncoding => {
            "Attention by itself ignores order; the position encoding gives each position its own signature."
        }
        StageId::QkvProjection => {
            "One fused matrix product X·W makes a query, a key and a value for every token."
        }
        StageId::SplitHeads => {
            "The columns are cut into heads of d_k numbers; with GQA several query heads share one K/V head."
        }
        StageId::Rope => {
            "RoPE turns each pair of q and k by an angle proportional to the position, so q·k depends on the distance."
        }
        StageId::Scores => {
            "Score[i,j] = q_i·k_j: how well the query of token i matches the key of token j."
        }
        StageId::Scale => {
            "Dividing by sqrt(d_k) keeps the scores' spread independent of d_k, so softmax does not saturate."
        }
        StageId::Alibi => {
            "ALiBi adds -m·distance to each score: nearer keys win, each head with its own slope m."
        }
        StageId::Mask => "Masked pairs get -inf: after softmax their weight is exactly zero.",
        StageId::Softmax => {
            "Softmax turns each row into weights that sum to 1 (the row max is subtracted first, for stability)."
        }
        StageId::WeightedSum => {
            "Each token's output is the weighted average of the value vectors: weights times V."
        }
        StageId::Concat => "The heads' outputs are put side by side again: n x d_model.",
        StageId::OutputProjection => {
            "A last matrix W_O mixes the heads: this is the layer's output."
        }
        StageId::Norm => {
            "The block first normalises each token's vector, so that attention reads inputs of a steady size."
        }
        StageId::Residual => {
            "Attention's output is added to the stream it read: the residual keeps what came before."
        }
        StageId::Mlp => {
            "The MLP works on each token alone: widen, activate, narrow. Attention moves information between tokens; the MLP transforms it."
        }
        StageId::BlockOut => "The stream leaves the block, and the next block reads it.",
    }
}

fn stage_zh(id: StageId) -> &'static str {
    match id {
        StageId::Tokens => "句子被切分成词元。后面每个矩阵的每一行、每一列都对应其中一个词元。",
        StageId::Embeddings => "每个词元变成一个 d_model 维的向量：相同的词元总是得到相同的向量。",
        StageId::PositionEncoding => "注意力本身不看顺序；位置编码给每个位置一个独特的标记。",
        StageId::QkvProjection => "一次融合的矩阵乘法 X·W，为每个词元生成查询、键和值。",
        StageId::SplitHeads => "把列切成若干个 d_k 维的头；在 GQA 中几个查询头共享一个 K/V 头。",
        StageId::Rope => {
            "RoPE 把 q 和 k 的每一对分量按与位置成正比的角度旋转，于是 q·k 只取决于相对距离。"
        }
        StageId::Scores => "分数[i,j] = q_i·k_j：词元 i 的查询与词元 j 的键有多匹配。",
        StageId::Scale => "除以 sqrt(d_k) 让分数的离散程度不随 d_k 增长，softmax 就不会饱和。",
        StageId::Alibi => "ALiBi 给每个分数加上 -m·距离：越近的键越占优，每个头有自己的斜率 m。",
        StageId::Mask => "被遮盖的位置得到 -inf：经过 softmax 后它们的权重恰好为零。",
        StageId::Softmax => "softmax 把每一行变成和为 1 的权重（先减去行最大值，保证数值稳定）。",
        StageId::WeightedSum => "每个词元的输出是值向量的加权平均：权重乘以 V。",
        StageId::Concat => "各个头的输出重新并排拼接：n x d_model。",
        StageId::OutputProjection => "最后的矩阵 W_O 把各个头混合起来：这就是这一层的输出。",
        StageId::Norm => "每个块先把每个词元的向量归一化，让注意力读到尺度稳定的输入。",
        StageId::Residual => "注意力的输出加回它读取的残差流：残差保留了之前的信息。",
        StageId::Mlp => {
            "MLP 对每个词元单独处理：先升维、激活，再降维。注意力在词元之间传递信息，MLP 负责变换它。"
        }
        StageId::BlockOut => "残差流离开这个块，下一个块读取它。",
    }
}

/// Narration of a view on a real model, where it differs from the lesson's.
pub fn view_on_model(kind: crate::tui::view_kind::ViewKind, lang: Lang) -> Option<&'static str> {
    use crate::tui::view_kind::ViewKind as V;
    Some(match (kind, lang) {
        (V::Position, Lang::En) => {
            "Attention itself ignores order: this model's positions enter as RoPE's turn of q and k (so q·k depends on the distance) or as a learned row added to each token."
        }
        (V::Position, Lang::Zh) => {
            "注意力本身不看顺序：这个模型的位置信息要么是 RoPE 对 q 和 k 的旋转（q·k 只取决于距离），要么是加到每个词元上的一行学到的位置向量。"
        }
        (V::Decode, Lang::En) => {
            "The model writes one token at a time: each new token's keys and values join the cache in every layer, so a step costs one row of work instead of the whole prefix again."
        }
        (V::Decode, Lang::Zh) => {
            "模型一次写一个词元：新词元在每一层的键和值追加进缓存，所以每一步只算一行，不必把整个前缀重算一遍。"
        }
        _ => return None,
    })
}

/// Narration of a view that is not about one stage.
pub fn view(kind: crate::tui::view_kind::ViewKind, lang: Lang) -> Option<&'static str> {
    use crate::tui::view_kind::ViewKind as V;
    Some(match (kind, lang) {
        (V::Heads, Lang::En) => {
            "Every head computes its own weights from the same tokens; heads in one GQA group read the same keys and values."
        }
        (V::Heads, Lang::Zh) => {
            "每个头用同样的词元算出自己的权重；同一 GQA 组里的头读取同一份键和值。"
        }
        (V::Position, Lang::En) => {
            "Without a position encoding, shuffling the tokens only shuffles the outputs; RoPE scores depend only on distance."
        }
        (V::Position, Lang::Zh) => {
            "没有位置编码时，打乱词元只会同样地打乱输出；RoPE 的分数只取决于相对距离。"
        }
        (V::Decode, Lang::En) => {
            "A decoder adds one token at a time: its key and value join the cache, so each step costs O(t·d) instead of recomputing the whole prefix."
        }
        (V::Decode, Lang::Zh) => {
            "解码器一次生成一个词元：它的键和值追加进缓存，所以每一步只需 O(t·d)，不必重新计算整个前缀。"
        }
        (V::Variants, Lang::En) => {
            "Structure instead of n×n: a sliding window reaches further with every layer, BigBird mixes local, global and random blocks, linear attention keeps a d×d state."
        }
        (V::Variants, Lang::Zh) => {
            "用结构换掉 n×n：滑动窗口每多一层看得更远，BigBird 组合局部、全局和随机块，线性注意力只保留 d×d 的状态。"
        }
        (V::Scaling, Lang::En) => {
            "The naive path stores all n×n scores, so its memory grows fourfold per doubling of n until it no longer fits; flash stays O(n·d)."
        }
        (V::Scaling, Lang::Zh) => {
            "朴素实现要存下全部 n×n 个分数，n 每翻一倍内存就涨四倍，直到放不下；flash 始终是 O(n·d)。"
        }
        (V::Flash, Lang::En) => {
            "FlashAttention never builds the n x n matrix: tile by tile it keeps each row's running max m and sum l, and rescales the partial output by exp(m_old - m_new) when the max grows."
        }
        (V::Flash, Lang::Zh) => {
            "FlashAttention 从不构造 n x n 矩阵：它逐块计算，为每一行保留当前最大值 m 和累积和 l，最大值变大时把部分输出乘以 exp(m_old - m_new) 重新缩放。"
        }
        (V::Model, Lang::En) => {
            "Every head of every layer at once: trained heads divide the work (some look one token back, some at the first token, some at an earlier copy). Enter opens the head under the cursor."
        }
        (V::Model, Lang::Zh) => {
            "一次看到每一层的每个头：训练过的头各有分工（有的看前一个词元，有的看第一个词元，有的看前面出现过的同一个词元）。按 Enter 打开光标下的头。"
        }
        (V::Train, Lang::En) => {
            "A model learns to predict random tokens with a span repeated: the repeat is predictable only by copying, which needs two heads in two layers working together."
        }
        (V::Train, Lang::Zh) => {
            "模型学习预测随机词元，其中有一段会重复：只有“复制”才能预测重复的部分，这需要两层里的两个头配合。"
        }
        (V::Lens, Lang::En) => {
            "The logit lens: every layer's residual stream read through the model's unembedding as if it were the last layer. Watch the next token's prediction form through the depth; t shows the target's rank in every cell."
        }
        (V::Lens, Lang::Zh) => {
            "logit lens：把每一层的残差流当作最后一层，经过模型的反嵌入读出来。看下一个词元的预测怎样随深度逐渐形成；按 t 显示目标词元在每格中的排名。"
        }
        (V::Attribution, Lang::En) => {
            "Direct logit attribution: the final logits are a sum of what every head and MLP wrote into the residual stream, so the answer's lead over the runner-up splits into their parts. The parts add up to the model's own difference."
        }
        (V::Attribution, Lang::Zh) => {
            "直接 logit 归因：最终的 logit 是每个头和 MLP 写入残差流的内容之和，所以答案领先第二名的差距可以拆成它们各自的部分。各部分加起来等于模型自己的差值。"
        }
        (V::Tokens, Lang::En) => {
            "Where the selected token looks: a line to each token it attends to, one colour per head; a strong weight is a bright line."
        }
        (V::Tokens, Lang::Zh) => {
            "选中的词元看向哪里：每条线连到它关注的一个词元，每个头一种颜色；权重越大，线越亮。"
        }
        _ => return None,
    })
}
