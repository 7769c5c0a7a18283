//! Byte and memory-traffic accounting: the KV cache of a model, the attention matrix of
//! one head, and how many elements standard attention and FlashAttention move between
//! HBM and on-chip SRAM.
//!
//! Everything is counted exactly in integers (u128 inside, u64 out; a figure that does
//! not fit in 64 bits is refused rather than wrapped). The HBM counts follow the
//! algorithms as Dao et al. 2022 write them ("FlashAttention: Fast and Memory-Efficient
//! Exact Attention with IO-Awareness"): Algorithm 0 for standard attention and
//! Algorithm 1 for FlashAttention, whose totals Theorem 2 bounds by Theta(N d + N^2) and
//! Theta(N^2 d^2 / M); FlashAttention-2 (Dao 2023, Algorithm 1) swaps the loops and moves
//! Theta(N^2 d^2 / M) too. Counts are in elements, as in the papers; bytes multiply by
//! the element size. [`tiled_traffic`] walks either loop order tile by tile, for the
//! counters of the flash view.

use crate::cli::Dtype;
use crate::error::{Error, Result};
use crate::kernel::LoopOrder;

/// The name a user types for a dtype (`f32`, `f16`, `bf16`, `int8`).
pub fn dtype_name(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::F32 => "f32",
        Dtype::F16 => "f16",
        Dtype::Bf16 => "bf16",
        Dtype::Int8 => "int8",
    }
}

/// A u128 intermediate as u64, or a usage error naming what overflowed.
fn fit(x: u128, what: &str) -> Result<u64> {
    u64::try_from(x).map_err(|_| {
        Error::usage(format!(
            "{what} is {x}, more than 64 bits can count; choose smaller sizes"
        ))
    })
}

// ---------------------------------------------------------------------------------
// KV cache
// ---------------------------------------------------------------------------------

/// The shape that sizes a decoder's KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct KvCacheShape {
    pub layers: u64,
    pub d_model: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads (GQA groups): `heads` for MHA, 1 for MQA.
    pub kv_heads: u64,
    /// Tokens held in the cache per sequence.
    pub seq: u64,
    pub batch: u64,
    pub dtype: Dtype,
    /// A sliding window (Mistral) lets a rolling buffer of this many positions replace
    /// the full cache.
    pub sliding_window: Option<u64>,
}

impl KvCacheShape {
    /// Refuse zero sizes, a d_model that heads do not divide, and KV heads that do not
    /// divide the query heads; every message names the flag and what would be right.
    pub fn validate(&self) -> Result<()> {
        for (flag, v) in [
            ("--layers", self.layers),
            ("--d-model", self.d_model),
            ("--heads", self.heads),
            ("--kv-heads", self.kv_heads),
            ("--seq", self.seq),
            ("--batch", self.batch),
        ] {
            if v == 0 {
                return Err(Error::usage(format!("{flag} is 0; it must be at least 1")));
            }
        }
        if !self.d_model.is_multiple_of(self.heads) {
            let below = self.d_model / self.heads * self.heads;
            let above = below + self.heads;
            let hint = if below == 0 {
                format!("e.g. {above}")
            } else {
                format!("e.g. {below} or {above}")
            };
            return Err(Error::usage(format!(
                "--d-model {} is not divisible by --heads {}: each head is d_model / heads wide; \
                 choose a d_model that is a multiple of {} ({hint})",
                self.d_model, self.heads, self.heads
            )));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            let choices: Vec<String> = divisors(self.heads).iter().map(u64::to_string).collect();
            return Err(Error::usage(format!(
                "--kv-heads {} does not divide --heads {}: each KV head serves heads / kv_heads \
                 query heads (GQA); choose one of {}",
                self.kv_heads,
                self.heads,
                choices.join(", ")
            )));
        }
        if self.sliding_window == Some(0) {
            return Err(Error::usage(
                "the sliding window is 0; it must be at least 1",
            ));
        }
        Ok(())
    }

    pub fn d_head(&self) -> u64 {
        self.d_model / self.heads
    }

    /// 2 (K and V) x batch x seq x layers x kv_heads x d_head x dtype bytes.
    fn bytes_with(&self, kv_heads: u64, seq: u64, batch: u64) -> Result<u64> {
        let b = 2u128
            * batch as u128
            * seq as u128
            * self.layers as u128
            * kv_heads as u128
            * self.d_head() as u128
            * self.dtype.bytes() as u128;
        fit(b, "the KV cache size in bytes")
    }
}

/// Which attention a head count describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum KvSharing {
    /// Multi-head: one K/V head per query head.
    #[serde(rename = "MHA")]
    Mha,
    /// Grouped-query: groups of query heads share one K/V head.
    #[serde(rename = "GQA")]
    Gqa,
    /// Multi-query: every query head shares one K/V head.
    #[serde(rename = "MQA")]
    Mqa,
}

impl KvSharing {
    pub fn of(heads: u64, kv_heads: u64) -> KvSharing {
        if kv_heads == heads {
            KvSharing::Mha
        } else if kv_heads == 1 {
            KvSharing::Mqa
        } else {
            KvSharing::Gqa
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KvSharing::Mha => "MHA",
            KvSharing::Gqa => "GQA",
            KvSharing::Mqa => "MQA",
        }
    }
}

/// The cache of one choice of KV heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct KvChoice {
    pub kv_heads: u64,
    /// Query heads per KV head (heads / kv_heads).
    pub group_size: u64,
    pub sharing: KvSharing,
    pub bytes: u64,
    pub per_token_bytes: u64,
}

/// The KV cache of a [`KvCacheShape`], against full MHA, with the formula.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KvCacheSize {
    pub config: KvCacheShape,
    pub d_head: u64,
    pub sharing: KvSharing,
    /// heads / kv_heads: how many times smaller than MHA the cache is.
    pub gqa_ratio: u64,
    /// The cache of all `batch` sequences at `seq` tokens.
    pub bytes: u64,
    /// The same with one K/V head per query head.
    pub mha_bytes: u64,
    pub mqa_bytes: u64,
    /// Bytes one more token adds to one sequence's cache.
    pub per_token_bytes: u64,
    pub mha_per_token_bytes: u64,
    /// With a sliding window W: the rolling buffer's bytes (min(seq, W) positions).
    pub rolling_buffer_bytes: Option<u64>,
    /// e.g. "2 (K and V) x batch 1 x seq 4096 x layers 80 x kv_heads 8 x d_head 128 x 2 B (f16) = 1342177280 B".
    pub formula: String,
    /// Every KV-head count that divides the query heads, MQA first.
    pub choices: Vec<KvChoice>,
}

/// Every divisor of `n`, ascending.
pub fn divisors(n: u64) -> Vec<u64> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut i = 1;
    while i * i <= n {
        if n.is_multiple_of(i) {
            small.push(i);
            if i * i != n {
                large.push(n / i);
            }
        }
        i += 1;
    }
    small.extend(large.into_iter().rev());
    small
}

/// Size the KV cache of `shape` (validated first).
pub fn kv_cache_size(shape: &KvCacheShape) -> Result<KvCacheSize> {
    shape.validate()?;
    let s = shape;
    let bytes = s.bytes_with(s.kv_heads, s.seq, s.batch)?;
    let choices = divisors(s.heads)
        .into_iter()
        .map(|g| {
            Ok(KvChoice {
                kv_heads: g,
                group_size: s.heads / g,
                sharing: KvSharing::of(s.heads, g),
                bytes: s.bytes_with(g, s.seq, s.batch)?,
                per_token_bytes: s.bytes_with(g, 1, 1)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let formula = format!(
        "2 (K and V) x batch {} x seq {} x layers {} x kv_heads {} x d_head {} x {} B ({}) = {bytes} B",
        s.batch,
        s.seq,
        s.layers,
        s.kv_heads,
        s.d_head(),
        s.dtype.bytes(),
        dtype_name(s.dtype)
    );
    Ok(KvCacheSize {
        config: *s,
        d_head: s.d_head(),
        sharing: KvSharing::of(s.heads, s.kv_heads),
        gqa_ratio: s.heads / s.kv_heads,
        bytes,
        mha_bytes: s.bytes_with(s.heads, s.seq, s.batch)?,
        mqa_bytes: s.bytes_with(1, s.seq, s.batch)?,
        per_token_bytes: s.bytes_with(s.kv_heads, 1, 1)?,
        mha_per_token_bytes: s.bytes_with(s.heads, 1, 1)?,
        rolling_buffer_bytes: s
            .sliding_window
            .map(|w| s.bytes_with(s.kv_heads, s.seq.min(w), s.batch))
            .transpose()?,
        formula,
        choices,
    })
}

// ---------------------------------------------------------------------------------
// Attention matrix and HBM traffic
// ---------------------------------------------------------------------------------

/// The sizes `attnviz memory` works on: H heads of N x d (batch 1), elements of
/// `dtype`, and an SRAM of `sram_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MemoryShape {
    pub n: u64,
    pub heads: u64,
    pub d: u64,
    pub dtype: Dtype,
    pub sram_bytes: u64,
    /// Query block rows; Algorithm 1's min(ceil(M / 4d), d) unless given.
    pub br: Option<u64>,
    /// Key/value block columns; Algorithm 1's ceil(M / 4d) unless given.
    pub bc: Option<u64>,
}

/// FlashAttention's blocks for a [`MemoryShape`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FlashBlocks {
    /// M: the SRAM size in elements of the dtype.
    pub sram_elements: u64,
    pub br: u64,
    pub bc: u64,
    /// How Br and Bc were chosen, e.g. "Bc = ceil(M / 4d) = 192".
    pub br_rule: String,
    pub bc_rule: String,
    /// Tr = ceil(N / Br) query blocks, Tc = ceil(N / Bc) key/value blocks.
    pub tr: u64,
    pub tc: u64,
    /// Elements one inner step holds on chip: Q_i, O_i (Br x d each), K_j, V_j (Bc x d
    /// each) and the score block S_ij (Br x Bc).
    pub tile_elements: u64,
    pub tiles_fit_sram: bool,
}

impl FlashBlocks {
    fn new(s: &MemoryShape) -> Result<FlashBlocks> {
        let m = s.sram_bytes / s.dtype.bytes();
        if m == 0 {
            return Err(Error::usage(format!(
                "--sram-kib gives {} bytes, less than one {} element; give at least 1 KiB",
                s.sram_bytes,
                dtype_name(s.dtype)
            )));
        }
        let auto_bc = m.div_ceil(4 * s.d);
        let (bc, bc_rule) = match s.bc {
            Some(bc) => (bc, format!("Bc = {bc} (--bc)")),
            None => (auto_bc, format!("Bc = ceil(M / 4d) = {auto_bc}")),
        };
        let (br, br_rule) = match s.br {
            Some(br) => (br, format!("Br = {br} (--br)")),
            None => {
                let br = auto_bc.min(s.d);
                (br, format!("Br = min(ceil(M / 4d), d) = {br}"))
            }
        };
        for (flag, v) in [("--br", br), ("--bc", bc)] {
            if v == 0 {
                return Err(Error::usage(format!(
                    "{flag} is 0; a block needs at least 1 row"
                )));
            }
        }
        let tile = tile_elements(br, bc, s.d);
        Ok(FlashBlocks {
            sram_elements: m,
            br,
            bc,
            br_rule,
            bc_rule,
            tr: s.n.div_ceil(br),
            tc: s.n.div_ceil(bc),
            tile_elements: fit(tile, "the tile size in elements")?,
            tiles_fit_sram: tile <= m as u128,
        })
    }
}

/// Elements one inner step of FlashAttention holds on chip: Q_i and O_i (Br x d each),
/// K_j and V_j (Bc x d each) and the score block S_ij (Br x Bc).
pub fn tile_elements(br: u64, bc: u64, d: u64) -> u128 {
    2 * (br as u128 + bc as u128) * d as u128 + br as u128 * bc as u128
}

/// Direction of one HBM access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Read,
    Write,
}

/// One line of an algorithm's HBM traffic, over all heads.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HbmTerm {
    /// What moves and which line of the algorithm moves it, e.g. "write S (line 1)".
    pub what: String,
    pub access: Access,
    /// Per head, as an expression in N, d and Tc, e.g. "N^2".
    pub expr: String,
    pub elements: u64,
}

/// The HBM traffic of one algorithm, over all heads.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HbmCount {
    pub reads: u64,
    pub writes: u64,
    /// reads + writes, in elements.
    pub accesses: u64,
    /// accesses x element size.
    pub bytes: u64,
    /// The exact count per head as a formula, e.g. "4 N d + 4 N^2".
    pub formula: String,
    /// Theorem 2's order of growth, e.g. "N d + N^2".
    pub theta: &'static str,
    /// That order evaluated (times the heads), without the constant the Theta hides.
    pub theta_value: f64,
    pub terms: Vec<HbmTerm>,
}

impl HbmCount {
    fn from_terms(
        terms: Vec<HbmTerm>,
        dtype: Dtype,
        formula: String,
        theta: &'static str,
        theta_value: f64,
    ) -> Result<HbmCount> {
        let sum = |a: Access| -> u128 {
            terms
                .iter()
                .filter(|t| t.access == a)
                .map(|t| t.elements as u128)
                .sum()
        };
        let (reads, writes) = (sum(Access::Read), sum(Access::Write));
        Ok(HbmCount {
            reads: fit(reads, "the HBM reads")?,
            writes: fit(writes, "the HBM writes")?,
            accesses: fit(reads + writes, "the HBM accesses")?,
            bytes: fit((reads + writes) * dtype.bytes() as u128, "the HBM bytes")?,
            formula,
            theta,
            theta_value,
            terms,
        })
    }
}

/// The attention matrix and HBM traffic of a [`MemoryShape`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MemoryReport {
    pub config: MemoryShape,
    /// N x N entries of one head's scores.
    pub matrix_entries: u64,
    /// One head's N x N scores in the dtype.
    pub matrix_bytes: u64,
    /// Every head's scores at once (what a batched naive kernel holds).
    pub all_heads_matrix_bytes: u64,
    pub blocks: FlashBlocks,
    pub standard: HbmCount,
    pub flash: HbmCount,
    /// FlashAttention-2's loop order (Dao 2023, Algorithm 1) with the same blocks.
    pub flash2: HbmCount,
    /// standard accesses / flash accesses.
    pub ratio: f64,
}

/// Standard attention, Algorithm 0 of Dao et al. 2022, per head (Q, K, V, O are N x d;
/// S and P are N x N; blocks of Q, K, P and V stream through SRAM but every element is
/// read once per line that uses it):
///
/// 1. load Q and K, compute S = Q K^T, write S: reads 2 N d, writes N^2;
/// 2. read S, compute P = softmax(S), write P: reads N^2, writes N^2;
/// 3. load P and V, compute O = P V, write O: reads N^2 + N d, writes N d.
///
/// Total 4 N d + 4 N^2 = Theta(N d + N^2) (Theorem 2).
fn standard_hbm(s: &MemoryShape) -> Result<HbmCount> {
    let (n, d, h) = (s.n as u128, s.d as u128, s.heads as u128);
    let term = |what: &str, access, expr: &str, per_head: u128| -> Result<HbmTerm> {
        Ok(HbmTerm {
            what: what.to_string(),
            access,
            expr: expr.to_string(),
            elements: fit(per_head * h, what)?,
        })
    };
    let terms = vec![
        term("read Q, K (line 1)", Access::Read, "2 N d", 2 * n * d)?,
        term("write S (line 1)", Access::Write, "N^2", n * n)?,
        term("read S (line 2)", Access::Read, "N^2", n * n)?,
        term("write P (line 2)", Access::Write, "N^2", n * n)?,
        term(
            "read P, V (line 3)",
            Access::Read,
            "N^2 + N d",
            n * n + n * d,
        )?,
        term("write O (line 3)", Access::Write, "N d", n * d)?,
    ];
    let (nf, df, hf) = (s.n as f64, s.d as f64, s.heads as f64);
    HbmCount::from_terms(
        terms,
        s.dtype,
        "4 N d + 4 N^2".into(),
        "N d + N^2",
        hf * (nf * df + nf * nf),
    )
}

/// FlashAttention, Algorithm 1 of Dao et al. 2022, per head, with Tc = ceil(N / Bc):
///
/// - line 2: initialise O (N x d), l and m (N each) in HBM: writes N d + 2 N;
/// - line 6, once per outer iteration j: load K_j and V_j, so over all j every element
///   of K and V is read once: reads 2 N d;
/// - line 8, for each inner block i of each outer iteration: load Q_i, O_i, l_i, m_i;
///   over the Tr inner blocks that is all of Q, O, l and m: reads Tc (2 N d + 2 N);
/// - lines 12-13, for each inner block: write O_i, l_i, m_i: writes Tc (N d + 2 N).
///
/// Total N d + 2 N + 2 N d + Tc (3 N d + 4 N). The last blocks may be shorter than
/// Br or Bc; the sums over blocks are still exactly N rows, so Br drops out of the
/// total (it only decides what fits on chip). With Bc = ceil(M / 4d), Tc is about
/// 4 N d / M and the total Theta(N d Tc) = Theta(N^2 d^2 / M) (Theorem 2).
fn flash_hbm(s: &MemoryShape, blocks: &FlashBlocks) -> Result<HbmCount> {
    let (n, d, h, tc) = (s.n as u128, s.d as u128, s.heads as u128, blocks.tc as u128);
    let term = |what: &str, access, expr: &str, per_head: u128| -> Result<HbmTerm> {
        Ok(HbmTerm {
            what: what.to_string(),
            access,
            expr: expr.to_string(),
            elements: fit(per_head * h, what)?,
        })
    };
    let terms = vec![
        term(
            "initialise O, l, m (line 2)",
            Access::Write,
            "N d + 2 N",
            n * d + 2 * n,
        )?,
        term("load K_j, V_j (line 6)", Access::Read, "2 N d", 2 * n * d)?,
        term(
            "load Q_i, O_i, l_i, m_i (line 8)",
            Access::Read,
            "Tc (2 N d + 2 N)",
            tc * (2 * n * d + 2 * n),
        )?,
        term(
            "write O_i, l_i, m_i (lines 12-13)",
            Access::Write,
            "Tc (N d + 2 N)",
            tc * (n * d + 2 * n),
        )?,
    ];
    let (nf, df, hf, mf) = (
        s.n as f64,
        s.d as f64,
        s.heads as f64,
        blocks.sram_elements as f64,
    );
    HbmCount::from_terms(
        terms,
        s.dtype,
        format!(
            "N d + 2 N + 2 N d + Tc (3 N d + 4 N), Tc = ceil(N / Bc) = {}",
            blocks.tc
        ),
        "N^2 d^2 / M",
        hf * nf * nf * df * df / mf,
    )
}

/// FlashAttention-2, Algorithm 1 of Dao 2023 (forward pass), per head, with
/// Tr = ceil(N / Br): the loops of Algorithm 1 swapped, so each query block is loaded
/// once and its output written once, while K and V stream past every query block:
///
/// - line 4, once per outer iteration i: load Q_i; over all i, reads N d;
/// - line 7, for each inner block j of each outer iteration: load K_j and V_j; over the
///   Tc inner blocks that is all of K and V: reads Tr 2 N d;
/// - lines 14-15, once per outer iteration: write O_i and the log-sum-exp L_i: writes
///   N d + N (O, l and m are initialised on chip, line 5, so nothing is written first).
///
/// Total 2 N d + N + Tr 2 N d. With Br = Theta(M / d), Tr is Theta(N d / M) and the
/// total Theta(N^2 d^2 / M), the order of Algorithm 1.
fn flash2_hbm(s: &MemoryShape, blocks: &FlashBlocks) -> Result<HbmCount> {
    let (n, d, h, tr) = (s.n as u128, s.d as u128, s.heads as u128, blocks.tr as u128);
    let term = |what: &str, access, expr: &str, per_head: u128| -> Result<HbmTerm> {
        Ok(HbmTerm {
            what: what.to_string(),
            access,
            expr: expr.to_string(),
            elements: fit(per_head * h, what)?,
        })
    };
    let terms = vec![
        term("load Q_i (line 4)", Access::Read, "N d", n * d)?,
        term(
            "load K_j, V_j (line 7)",
            Access::Read,
            "Tr 2 N d",
            tr * 2 * n * d,
        )?,
        term(
            "write O_i, L_i (lines 14-15)",
            Access::Write,
            "N d + N",
            n * d + n,
        )?,
    ];
    let (nf, df, hf, mf) = (
        s.n as f64,
        s.d as f64,
        s.heads as f64,
        blocks.sram_elements as f64,
    );
    HbmCount::from_terms(
        terms,
        s.dtype,
        format!("2 N d + N + Tr 2 N d, Tr = ceil(N / Br) = {}", blocks.tr),
        "N^2 d^2 / M",
        hf * nf * nf * df * df / mf,
    )
}

/// The attention matrix and the HBM traffic of both algorithms for `s`.
pub fn memory_report(s: &MemoryShape) -> Result<MemoryReport> {
    for (flag, v) in [("--n", s.n), ("--heads", s.heads), ("--d", s.d)] {
        if v == 0 {
            return Err(Error::usage(format!("{flag} is 0; it must be at least 1")));
        }
    }
    let entries = s.n as u128 * s.n as u128;
    let matrix_bytes = entries * s.dtype.bytes() as u128;
    let blocks = FlashBlocks::new(s)?;
    let standard = standard_hbm(s)?;
    let flash = flash_hbm(s, &blocks)?;
    let flash2 = flash2_hbm(s, &blocks)?;
    Ok(MemoryReport {
        config: *s,
        matrix_entries: fit(entries, "the score matrix's entries")?,
        matrix_bytes: fit(matrix_bytes, "the score matrix's bytes")?,
        all_heads_matrix_bytes: fit(matrix_bytes * s.heads as u128, "all heads' score bytes")?,
        ratio: standard.accesses as f64 / flash.accesses as f64,
        blocks,
        standard,
        flash,
        flash2,
    })
}

// ---------------------------------------------------------------------------------
// Traffic tile by tile
// ---------------------------------------------------------------------------------

/// One head of a tiled run: Q [n_q, d], K [n_k, d], V [n_k, dv], blocks of Br query
/// rows and Bc keys (the last blocks may be shorter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TiledShape {
    pub n_q: u64,
    pub n_k: u64,
    pub d: u64,
    pub dv: u64,
    pub br: u64,
    pub bc: u64,
}

impl TiledShape {
    /// Tr: query blocks.
    pub fn tr(&self) -> u64 {
        self.n_q.div_ceil(self.br)
    }

    /// Tc: key/value blocks.
    pub fn tc(&self) -> u64 {
        self.n_k.div_ceil(self.bc)
    }

    /// Rows of query block `i`.
    pub fn rows(&self, i: u64) -> u64 {
        self.br.min(self.n_q - i * self.br)
    }

    /// Keys of key block `j`.
    pub fn cols(&self, j: u64) -> u64 {
        self.bc.min(self.n_k - j * self.bc)
    }

    /// Standard attention (Algorithm 0) on these sizes: read Q and K, write S; read S,
    /// write P; read P and V, write O.
    pub fn standard(&self) -> Traffic {
        let (nq, nk, d, dv) = (self.n_q, self.n_k, self.d, self.dv);
        Traffic {
            reads: nq * d + nk * d + nq * nk + nq * nk + nk * dv,
            writes: nq * nk + nq * nk + nq * dv,
        }
    }
}

/// Elements read from and written to HBM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Traffic {
    pub reads: u64,
    pub writes: u64,
}

impl Traffic {
    pub fn total(&self) -> u64 {
        self.reads + self.writes
    }

    fn add(&mut self, reads: u64, writes: u64) {
        self.reads += reads;
        self.writes += writes;
    }
}

/// The HBM traffic of one tiled run, after each tile, in the run's loop order.
#[derive(Debug, Clone, PartialEq)]
pub struct TiledTraffic {
    pub shape: TiledShape,
    pub order: LoopOrder,
    /// Before the first tile: FlashAttention-1 initialises O, l and m in HBM (line 2).
    pub start: Traffic,
    /// `after[k]`: everything moved up to and including the k-th tile of the loop
    /// (start included); the last entry is the run's total.
    pub after: Vec<Traffic>,
    /// The same loops with no tile skipped: the count the papers write (for Fa1 equal
    /// to [`memory_report`]'s `flash`, for Fa2 to its `flash2`, when n_q = n_k, d = dv).
    pub dense: Traffic,
    /// Standard attention on the same sizes (Algorithm 0; it materialises all of S and
    /// P whatever the mask).
    pub standard: Traffic,
}

impl TiledTraffic {
    /// Moved once the run is over.
    pub fn total(&self) -> Traffic {
        self.after.last().copied().unwrap_or(self.start)
    }
}

/// Walk one tiled run tile by tile and count its HBM traffic as the papers write the
/// loops. `skipped(i, j)` says whether the mask empties tile (query block i, key block
/// j); a skipped tile computes nothing and moves nothing of its own:
///
/// - [`LoopOrder::Fa1`], Dao et al. 2022 Algorithm 1 (key blocks outer): O, l, m are
///   initialised in HBM first (line 2); at the first tile of each outer iteration j,
///   K_j and V_j are loaded (line 6); each tile loads Q_i, O_i, l_i, m_i (line 8) and
///   writes O_i, l_i, m_i back (lines 12-13). A skipped tile leaves out lines 8-13, as
///   block-sparse FlashAttention (Algorithm 5 of the same paper) does; K_j and V_j are
///   loaded all the same.
/// - [`LoopOrder::Fa2`], Dao 2023 Algorithm 1 (query blocks outer): at the first tile
///   of each outer iteration i, Q_i is loaded (line 4); each tile loads K_j and V_j
///   (line 7), except a skipped one; after the last tile of the row, O_i and L_i are
///   written (lines 14-15).
pub fn tiled_traffic(
    shape: &TiledShape,
    order: LoopOrder,
    skipped: impl Fn(usize, usize) -> bool,
) -> Result<TiledTraffic> {
    let s = shape;
    for (name, v) in [
        ("n_q", s.n_q),
        ("n_k", s.n_k),
        ("d", s.d),
        ("dv", s.dv),
        ("Br", s.br),
        ("Bc", s.bc),
    ] {
        if v == 0 {
            return Err(Error::usage(format!("{name} is 0; it must be at least 1")));
        }
    }
    let (tr, tc) = (s.tr(), s.tc());
    let tiles = tr
        .checked_mul(tc)
        .filter(|t| *t <= 1 << 24)
        .ok_or_else(|| {
            Error::usage(format!(
                "{tr} x {tc} tiles are too many to walk one by one; choose larger Br and Bc"
            ))
        })?;
    let mut now = Traffic::default();
    let mut dense = Traffic::default();
    if order == LoopOrder::Fa1 {
        for t in [&mut now, &mut dense] {
            t.add(0, s.n_q * s.dv + 2 * s.n_q);
        }
    }
    let start = now;
    let mut after = Vec::with_capacity(tiles as usize);
    // Tile (i, j) in the loop order; `first` and `last` mark the outer loop's edges.
    let tile = |i: u64, j: u64, now: &mut Traffic, dense: &mut Traffic| {
        let (rows, cols) = (s.rows(i), s.cols(j));
        let skip = skipped(i as usize, j as usize);
        let (mut r, mut w) = (0, 0);
        let (mut rd, mut wd) = (0, 0);
        match order {
            LoopOrder::Fa1 => {
                if i == 0 {
                    r += cols * (s.d + s.dv);
                    rd += cols * (s.d + s.dv);
                }
                let (tile_r, tile_w) = (rows * (s.d + s.dv) + 2 * rows, rows * s.dv + 2 * rows);
                rd += tile_r;
                wd += tile_w;
                if !skip {
                    r += tile_r;
                    w += tile_w;
                }
            }
            LoopOrder::Fa2 => {
                if j == 0 {
                    r += rows * s.d;
                    rd += rows * s.d;
                }
                let kv = cols * (s.d + s.dv);
                rd += kv;
                if !skip {
                    r += kv;
                }
                if j + 1 == tc {
                    w += rows * s.dv + rows;
                    wd += rows * s.dv + rows;
                }
            }
        }
        now.add(r, w);
        dense.add(rd, wd);
    };
    match order {
        LoopOrder::Fa1 => {
            for j in 0..tc {
                for i in 0..tr {
                    tile(i, j, &mut now, &mut dense);
                    after.push(now);
                }
            }
        }
        LoopOrder::Fa2 => {
            for i in 0..tr {
                for j in 0..tc {
                    tile(i, j, &mut now, &mut dense);
                    after.push(now);
                }
            }
        }
    }
    Ok(TiledTraffic {
        shape: *s,
        order,
        start,
        after,
        dense,
        standard: s.standard(),
    })
}

// ---------------------------------------------------------------------------------
// Readable sizes
// ---------------------------------------------------------------------------------

/// Bytes in decimal units with three significant digits: 1.34 GB, 10.7 GB, 268 MB.
pub fn decimal_bytes(bytes: u64) -> String {
    scaled(bytes, 1000.0, &["B", "kB", "MB", "GB", "TB", "PB", "EB"])
}

/// Bytes in binary units with three significant digits: 1.25 GiB, 256 MiB.
pub fn binary_bytes(bytes: u64) -> String {
    scaled(
        bytes,
        1024.0,
        &["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"],
    )
}

fn scaled(bytes: u64, base: f64, units: &[&str]) -> String {
    if bytes < base as u64 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64;
    let mut unit = 0;
    // Move up a unit while the value would print as 1000 or more after rounding to three
    // significant digits.
    while unit + 1 < units.len() && v >= 999.5 {
        v /= base;
        unit += 1;
    }
    let text = if v >= 99.95 {
        format!("{v:.0}")
    } else if v >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    format!("{text} {}", units[unit])
}

/// An integer with thousands separators: 1,342,177,280.
pub fn group_digits(x: u64) -> String {
    let digits = x.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama2_70b(seq: u64) -> KvCacheShape {
        KvCacheShape {
            layers: 80,
            d_model: 8192,
            heads: 64,
            kv_heads: 8,
            seq,
            batch: 1,
            dtype: Dtype::F16,
            sliding_window: None,
        }
    }

    #[test]
    fn llama2_70b_cache_is_eight_times_smaller_than_mha() {
        let k = kv_cache_size(&llama2_70b(4096)).unwrap();
        assert_eq!(k.bytes, 2 * 4096 * 80 * 8 * 128 * 2);
        assert_eq!(k.mha_bytes, 2 * 4096 * 8192 * 80 * 2);
        assert_eq!(k.mha_bytes, 8 * k.bytes);
        assert_eq!(k.per_token_bytes * 4096, k.bytes);
        assert_eq!(decimal_bytes(k.bytes), "1.34 GB");
        assert_eq!(decimal_bytes(k.mha_bytes), "10.7 GB");
        assert_eq!(k.sharing, KvSharing::Gqa);
        let gs: Vec<u64> = k.choices.iter().map(|c| c.kv_heads).collect();
        assert_eq!(gs, [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(k.choices[3].bytes, k.bytes);
    }

    #[test]
    fn bad_head_counts_name_the_flags() {
        let mut s = llama2_70b(16);
        s.kv_heads = 5;
        let e = kv_cache_size(&s).unwrap_err().to_string();
        assert!(
            e.contains("--kv-heads 5") && e.contains("1, 2, 4, 8, 16, 32, 64"),
            "{e}"
        );
        let mut s = llama2_70b(16);
        s.heads = 7;
        s.kv_heads = 7;
        let e = kv_cache_size(&s).unwrap_err().to_string();
        assert!(
            e.contains("--d-model 8192") && e.contains("8190 or 8197"),
            "{e}"
        );
        let mut s = llama2_70b(16);
        s.seq = 0;
        assert!(kv_cache_size(&s).unwrap_err().to_string().contains("--seq"));
    }

    #[test]
    fn rolling_buffer_caps_the_cache_at_the_window() {
        let mut s = llama2_70b(8192);
        s.sliding_window = Some(4096);
        let k = kv_cache_size(&s).unwrap();
        assert_eq!(k.rolling_buffer_bytes, Some(k.bytes / 2));
    }

    fn shape(n: u64, d: u64) -> MemoryShape {
        MemoryShape {
            n,
            heads: 1,
            d,
            dtype: Dtype::F32,
            sram_bytes: 192 * 1024,
            br: None,
            bc: None,
        }
    }

    #[test]
    fn n_8192_fp32_scores_are_268_mb() {
        let r = memory_report(&shape(8192, 64)).unwrap();
        assert_eq!(r.matrix_entries, 67_108_864);
        assert_eq!(r.matrix_bytes, 268_435_456);
        assert_eq!(decimal_bytes(r.matrix_bytes), "268 MB");
        assert_eq!(binary_bytes(r.matrix_bytes), "256 MiB");
        assert_eq!(r.blocks.sram_elements, 49_152);
        assert_eq!((r.blocks.bc, r.blocks.br), (192, 64));
        assert_eq!(r.standard.accesses, 4 * 8192 * 64 + 4 * 8192 * 8192);
    }

    /// Walk Algorithm 1's loops block by block, with ragged last blocks, and count every
    /// load and store: the closed form must agree.
    fn flash_by_loops(n: u64, d: u64, br: u64, bc: u64) -> (u64, u64) {
        let blocks = |len: u64, b: u64| -> Vec<u64> {
            (0..len.div_ceil(b)).map(|i| b.min(len - i * b)).collect()
        };
        let (mut reads, mut writes) = (0, n * d + 2 * n);
        for bcj in blocks(n, bc) {
            reads += 2 * bcj * d;
            for bri in blocks(n, br) {
                reads += 2 * bri * d + 2 * bri;
                writes += bri * d + 2 * bri;
            }
        }
        (reads, writes)
    }

    #[test]
    fn flash_counts_equal_the_algorithm_walked_block_by_block() {
        for (n, d, br, bc) in [
            (100, 8, 7, 13),
            (64, 16, 16, 16),
            (5, 3, 8, 2),
            (1000, 64, 64, 192),
        ] {
            let mut s = shape(n, d);
            s.br = Some(br);
            s.bc = Some(bc);
            let r = memory_report(&s).unwrap();
            assert_eq!(
                (r.flash.reads, r.flash.writes),
                flash_by_loops(n, d, br, bc),
                "n {n} d {d} br {br} bc {bc}"
            );
        }
    }

    #[test]
    fn flash_moves_less_than_standard_as_n_grows_and_tracks_its_theta() {
        let small = memory_report(&shape(8192, 64)).unwrap();
        let large = memory_report(&shape(65536, 64)).unwrap();
        assert!(small.ratio > 1.0 && large.ratio > small.ratio);
        // Both grow like N^2 once N d Tc dominates (x64 for 8x N); the exact counts follow
        // the ratio of the Theta values to within the lower-order N d terms and the ceil.
        for (count, theta) in [
            (
                large.flash.accesses as f64 / small.flash.accesses as f64,
                large.flash.theta_value / small.flash.theta_value,
            ),
            (
                large.standard.accesses as f64 / small.standard.accesses as f64,
                large.standard.theta_value / small.standard.theta_value,
            ),
        ] {
            assert!((count / theta - 1.0).abs() < 0.05, "{count} vs {theta}");
        }
    }

    #[test]
    fn heads_multiply_the_traffic() {
        let mut s = shape(512, 32);
        let one = memory_report(&s).unwrap();
        s.heads = 4;
        let four = memory_report(&s).unwrap();
        assert_eq!(four.standard.accesses, 4 * one.standard.accesses);
        assert_eq!(four.flash.accesses, 4 * one.flash.accesses);
        assert_eq!(four.matrix_bytes, one.matrix_bytes);
        assert_eq!(four.all_heads_matrix_bytes, 4 * one.matrix_bytes);
    }

    #[test]
    fn overflow_is_refused_not_wrapped() {
        let e = memory_report(&shape(u64::MAX / 2, 64))
            .unwrap_err()
            .to_string();
        assert!(e.contains("64 bits"), "{e}");
    }

    fn tiled(n: u64, d: u64, br: u64, bc: u64) -> TiledShape {
        TiledShape {
            n_q: n,
            n_k: n,
            d,
            dv: d,
            br,
            bc,
        }
    }

    #[test]
    fn dense_walks_equal_the_closed_forms_of_both_papers() {
        for (n, d, br, bc) in [
            (100, 8, 7, 13),
            (64, 16, 16, 16),
            (5, 3, 8, 2),
            (7, 4, 2, 2),
        ] {
            let mut s = shape(n, d);
            s.br = Some(br);
            s.bc = Some(bc);
            let r = memory_report(&s).unwrap();
            let t = tiled(n, d, br, bc);
            let fa1 = tiled_traffic(&t, LoopOrder::Fa1, |_, _| false).unwrap();
            let fa2 = tiled_traffic(&t, LoopOrder::Fa2, |_, _| false).unwrap();
            assert_eq!(
                (fa1.dense.reads, fa1.dense.writes),
                (r.flash.reads, r.flash.writes)
            );
            assert_eq!(
                (fa2.dense.reads, fa2.dense.writes),
                (r.flash2.reads, r.flash2.writes)
            );
            assert_eq!(fa1.total(), fa1.dense);
            assert_eq!(fa2.total(), fa2.dense);
            assert_eq!(fa1.standard.total(), r.standard.accesses);
            assert_eq!(fa1.after.len() as u64, t.tr() * t.tc());
        }
    }

    #[test]
    fn fa2_reads_q_once_and_fa1_rereads_it_per_key_block() {
        // N = 7, d = 4, Br = Bc = 2: Tr = Tc = 4.
        let t = tiled(7, 4, 2, 2);
        let fa2 = tiled_traffic(&t, LoopOrder::Fa2, |_, _| false).unwrap();
        // 2 N d + N + Tr 2 N d = 56 + 7 + 224.
        assert_eq!(fa2.total().total(), 287);
        // First tile: Q_0 (2 x 4) and K_0, V_0 (2 x 4 each).
        assert_eq!(
            fa2.after[0],
            Traffic {
                reads: 24,
                writes: 0
            }
        );
        // End of the first row of tiles: O_0 (2 x 4) and L_0 (2) written.
        assert_eq!(fa2.after[3].writes, 10);
        let fa1 = tiled_traffic(&t, LoopOrder::Fa1, |_, _| false).unwrap();
        // N d + 2 N + 2 N d + Tc (3 N d + 4 N) = 28 + 14 + 56 + 4 x 112.
        assert_eq!(fa1.total().total(), 546);
        assert_eq!(fa1.start.writes, 28 + 14);
    }

    #[test]
    fn skipped_tiles_move_less_and_counters_only_grow() {
        let t = tiled(7, 4, 2, 2);
        let causal = |i: usize, j: usize| j > i;
        for order in [LoopOrder::Fa1, LoopOrder::Fa2] {
            let all = tiled_traffic(&t, order, |_, _| false).unwrap();
            let some = tiled_traffic(&t, order, causal).unwrap();
            assert!(some.total().total() < all.total().total(), "{order:?}");
            assert_eq!(some.dense, all.dense);
            assert!(
                some.after
                    .windows(2)
                    .all(|w| w[1].reads >= w[0].reads && w[1].writes >= w[0].writes)
            );
        }
        // FA2 skips K_j, V_j (Bc_j keys of d + dv) of the 6 empty tiles: one of K_1,
        // two of K_2 (2 keys each) and three of K_3 (the last block, 1 key):
        // (1 x 2 + 2 x 2 + 3 x 1) x 8 = 72 fewer reads.
        let a = tiled_traffic(&t, LoopOrder::Fa2, |_, _| false).unwrap();
        let b = tiled_traffic(&t, LoopOrder::Fa2, causal).unwrap();
        assert_eq!(a.total().reads - b.total().reads, 72);
    }

    #[test]
    fn ragged_rectangular_walks_count_every_row_once() {
        let t = TiledShape {
            n_q: 5,
            n_k: 9,
            d: 3,
            dv: 2,
            br: 2,
            bc: 4,
        };
        let fa2 = tiled_traffic(&t, LoopOrder::Fa2, |_, _| false).unwrap();
        // Q once (5 x 3), K and V Tr = 3 times (9 x 5), O (5 x 2) and L (5) once.
        assert_eq!(
            fa2.total(),
            Traffic {
                reads: 15 + 3 * 45,
                writes: 10 + 5
            }
        );
        assert_eq!(
            t.standard(),
            Traffic {
                reads: 15 + 27 + 45 + 45 + 18,
                writes: 45 + 45 + 10
            }
        );
        assert!(tiled_traffic(&TiledShape { br: 0, ..t }, LoopOrder::Fa1, |_, _| false).is_err());
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(decimal_bytes(999), "999 B");
        assert_eq!(decimal_bytes(327_680), "328 kB");
        assert_eq!(decimal_bytes(999_999), "1.00 MB");
        assert_eq!(group_digits(1_342_177_280), "1,342,177,280");
        assert_eq!(group_digits(12), "12");
        assert_eq!(divisors(40), [1, 2, 4, 5, 8, 10, 20, 40]);
    }
}
