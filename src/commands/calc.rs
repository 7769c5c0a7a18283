//! `attnviz kv-cache` and `attnviz memory`: the calculators. They read their flags,
//! ask [`crate::engine::memory`] for the figures and print a table or JSON; no figure
//! is computed here.

use std::fmt::Write as _;

use crate::cli::{KvCacheArgs, MemoryArgs};
use crate::engine::memory::{
    self, FlashBlocks, HbmCount, KvCacheShape, KvCacheSize, MemoryReport, MemoryShape,
    binary_bytes, decimal_bytes, dtype_name, group_digits,
};
use crate::engine::presets::{self, ModelPreset};
use crate::error::{Error, Result};

// ---------------------------------------------------------------------------------
// kv-cache
// ---------------------------------------------------------------------------------

/// The shape the flags describe: a preset's fields, each overridden by its flag, or the
/// flags alone (then every one of them is needed). With a preset, `--seq` defaults to
/// the model's context length.
pub fn kv_cache_shape(args: &KvCacheArgs) -> Result<(KvCacheShape, Option<&'static ModelPreset>)> {
    let preset = args.preset.as_deref().map(presets::find).transpose()?;
    let pick =
        |flag: Option<u64>, field: fn(&ModelPreset) -> u64| flag.or_else(|| preset.map(field));
    let fields = [
        ("--layers L", pick(args.layers, |p| p.layers)),
        ("--d-model D", pick(args.d_model, |p| p.d_model)),
        ("--heads H", pick(args.heads, |p| p.heads)),
        ("--kv-heads G", pick(args.kv_heads, |p| p.kv_heads)),
        ("--seq N", pick(args.seq, |p| p.context)),
    ];
    let missing: Vec<&str> = fields
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(flag, _)| *flag)
        .collect();
    if !missing.is_empty() {
        let names: Vec<&str> = presets::PRESETS.iter().map(|p| p.name).collect();
        return Err(Error::usage(format!(
            "kv-cache is missing {}; give --layers, --d-model, --heads, --kv-heads and --seq, \
             or --preset NAME ({}) with any of them as overrides",
            missing.join(", "),
            names.join(", ")
        )));
    }
    let [layers, d_model, heads, kv_heads, seq] = fields.map(|(_, v)| v.unwrap_or_default());
    let shape = KvCacheShape {
        layers,
        d_model,
        heads,
        kv_heads,
        seq,
        batch: args.batch,
        dtype: args.dtype,
        sliding_window: preset.and_then(|p| p.sliding_window),
    };
    Ok((shape, preset))
}

#[derive(serde::Serialize)]
struct KvCacheJson<'a> {
    #[serde(flatten)]
    size: &'a KvCacheSize,
    preset: Option<&'static str>,
    model: Option<&'static str>,
    bytes_human: String,
    mha_bytes_human: String,
    mqa_bytes_human: String,
    per_token_human: String,
    rolling_buffer_human: Option<String>,
}

pub fn kv_cache(args: &KvCacheArgs) -> Result<()> {
    let (shape, preset) = kv_cache_shape(args)?;
    let size = memory::kv_cache_size(&shape)?;
    let text = if args.json {
        let json = KvCacheJson {
            size: &size,
            preset: preset.map(|p| p.name),
            model: preset.map(|p| p.title),
            bytes_human: decimal_bytes(size.bytes),
            mha_bytes_human: decimal_bytes(size.mha_bytes),
            mqa_bytes_human: decimal_bytes(size.mqa_bytes),
            per_token_human: decimal_bytes(size.per_token_bytes),
            rolling_buffer_human: size.rolling_buffer_bytes.map(decimal_bytes),
        };
        to_json(&json)?
    } else {
        kv_cache_table(&size, preset)
    };
    crate::output::print(&text)
}

fn kv_cache_table(k: &KvCacheSize, preset: Option<&ModelPreset>) -> String {
    let c = &k.config;
    let mut t = String::new();
    match preset {
        Some(p) => writeln!(t, "KV cache of {} (--preset {})", p.title, p.name),
        None => writeln!(t, "KV cache"),
    }
    .ok();
    writeln!(
        t,
        "  layers {}, d_model {}, heads {}, kv_heads {} ({}), d_head {}",
        c.layers,
        c.d_model,
        c.heads,
        c.kv_heads,
        k.sharing.name(),
        k.d_head
    )
    .ok();
    writeln!(
        t,
        "  seq {}, batch {}, {} ({} B per element)\n",
        c.seq,
        c.batch,
        dtype_name(c.dtype),
        c.dtype.bytes()
    )
    .ok();
    let rows = [
        (
            format!(
                "this config ({}, {} KV heads)",
                k.sharing.name(),
                c.kv_heads
            ),
            k.bytes,
            k.per_token_bytes,
        ),
        (
            format!("full MHA ({} KV heads)", c.heads),
            k.mha_bytes,
            k.mha_per_token_bytes,
        ),
    ];
    for (label, bytes, per_token) in rows {
        writeln!(
            t,
            "  {label:<30} {:>9}  {:>18} B  {:>9} per token",
            decimal_bytes(bytes),
            group_digits(bytes),
            decimal_bytes(per_token)
        )
        .ok();
    }
    if k.gqa_ratio > 1 {
        writeln!(t, "  {}x smaller than MHA", k.gqa_ratio).ok();
    }
    if let (Some(w), Some(b)) = (c.sliding_window, k.rolling_buffer_bytes) {
        writeln!(
            t,
            "  with its rolling buffer (sliding window W = {w}) the cache holds min(seq, W) = {} positions: {}",
            c.seq.min(w),
            decimal_bytes(b)
        )
        .ok();
    }
    writeln!(t, "\n  formula: {}", k.formula).ok();
    writeln!(t, "\n  every KV-head choice for {} query heads:", c.heads).ok();
    writeln!(
        t,
        "  {:>8}  {:>6}  {:<4}  {:>9}  {:>9}",
        "kv_heads", "group", "kind", "cache", "per token"
    )
    .ok();
    for choice in &k.choices {
        let mark = if choice.kv_heads == c.kv_heads {
            "  <- this config"
        } else {
            ""
        };
        writeln!(
            t,
            "  {:>8}  {:>6}  {:<4}  {:>9}  {:>9}{mark}",
            choice.kv_heads,
            choice.group_size,
            choice.sharing.name(),
            decimal_bytes(choice.bytes),
            decimal_bytes(choice.per_token_bytes)
        )
        .ok();
    }
    t
}

// ---------------------------------------------------------------------------------
// memory
// ---------------------------------------------------------------------------------

pub fn memory_shape(args: &MemoryArgs) -> Result<MemoryShape> {
    let sram_bytes = args.sram_kib.checked_mul(1024).ok_or_else(|| {
        Error::usage(format!(
            "--sram-kib {} is too large; give the on-chip memory in KiB (e.g. 192 for an A100 SM)",
            args.sram_kib
        ))
    })?;
    if sram_bytes == 0 {
        return Err(Error::usage(
            "--sram-kib is 0; FlashAttention needs on-chip memory (e.g. 192 for an A100 SM)",
        ));
    }
    Ok(MemoryShape {
        n: args.n,
        heads: args.heads,
        d: args.d,
        dtype: args.dtype,
        sram_bytes,
        br: args.br,
        bc: args.bc,
    })
}

#[derive(serde::Serialize)]
struct MemoryJson<'a> {
    matrix_bytes: u64,
    standard_hbm_accesses: u64,
    flash_hbm_accesses: u64,
    formula: String,
    matrix_entries: u64,
    matrix_bytes_human: String,
    all_heads_matrix_bytes: u64,
    standard_hbm_bytes: u64,
    flash_hbm_bytes: u64,
    standard_theta: f64,
    flash_theta: f64,
    ratio: f64,
    config: &'a MemoryShape,
    blocks: &'a FlashBlocks,
    standard: &'a HbmCount,
    flash: &'a HbmCount,
}

fn memory_formula(r: &MemoryReport) -> String {
    format!(
        "HBM accesses in elements per head, times {} head(s): standard (Algorithm 0) {} = Theta({}); \
         FlashAttention (Algorithm 1) {} with M = {} elements, = Theta({})",
        r.config.heads,
        r.standard.formula,
        r.standard.theta,
        r.flash.formula,
        r.blocks.sram_elements,
        r.flash.theta
    )
}

pub fn memory(args: &MemoryArgs) -> Result<()> {
    let report = memory::memory_report(&memory_shape(args)?)?;
    let text = if args.json {
        to_json(&MemoryJson {
            matrix_bytes: report.matrix_bytes,
            standard_hbm_accesses: report.standard.accesses,
            flash_hbm_accesses: report.flash.accesses,
            formula: memory_formula(&report),
            matrix_entries: report.matrix_entries,
            matrix_bytes_human: decimal_bytes(report.matrix_bytes),
            all_heads_matrix_bytes: report.all_heads_matrix_bytes,
            standard_hbm_bytes: report.standard.bytes,
            flash_hbm_bytes: report.flash.bytes,
            standard_theta: report.standard.theta_value,
            flash_theta: report.flash.theta_value,
            ratio: report.ratio,
            config: &report.config,
            blocks: &report.blocks,
            standard: &report.standard,
            flash: &report.flash,
        })?
    } else {
        memory_table(&report)
    };
    crate::output::print(&text)
}

fn memory_table(r: &MemoryReport) -> String {
    let c = &r.config;
    let b = &r.blocks;
    let dt = dtype_name(c.dtype);
    let mut t = String::new();
    writeln!(
        t,
        "Attention memory: N {}, d {}, {} head(s), {dt} ({} B per element)\n",
        c.n,
        c.d,
        c.heads,
        c.dtype.bytes()
    )
    .ok();
    writeln!(
        t,
        "  score matrix of one head: N x N = {} entries = {} B ({}, {})",
        group_digits(r.matrix_entries),
        group_digits(r.matrix_bytes),
        decimal_bytes(r.matrix_bytes),
        binary_bytes(r.matrix_bytes)
    )
    .ok();
    if c.heads > 1 {
        writeln!(
            t,
            "  all {} heads at once: {}",
            c.heads,
            decimal_bytes(r.all_heads_matrix_bytes)
        )
        .ok();
    }
    writeln!(t, "\nFlashAttention blocks (Dao et al. 2022, Algorithm 1)").ok();
    writeln!(
        t,
        "  SRAM {} = M = {} {dt} elements",
        binary_bytes(c.sram_bytes),
        group_digits(b.sram_elements)
    )
    .ok();
    writeln!(t, "  {}, {}", b.bc_rule, b.br_rule).ok();
    writeln!(
        t,
        "  Tc = ceil(N / Bc) = {} key/value blocks, Tr = ceil(N / Br) = {} query blocks",
        b.tc, b.tr
    )
    .ok();
    writeln!(
        t,
        "  on chip per step (Q_i, O_i, K_j, V_j, S_ij): {} elements, {} M",
        group_digits(b.tile_elements),
        if b.tiles_fit_sram {
            "within"
        } else {
            "MORE than"
        }
    )
    .ok();
    writeln!(t, "\nHBM accesses (elements, all heads)").ok();
    writeln!(
        t,
        "  {:<26} {:>20} {:>20} {:>20} {:>10}",
        "", "reads", "writes", "total", "bytes"
    )
    .ok();
    for (name, h) in [
        ("standard (Algorithm 0)", &r.standard),
        ("FlashAttention (Alg. 1)", &r.flash),
    ] {
        writeln!(
            t,
            "  {name:<26} {:>20} {:>20} {:>20} {:>10}",
            group_digits(h.reads),
            group_digits(h.writes),
            group_digits(h.accesses),
            decimal_bytes(h.bytes)
        )
        .ok();
    }
    writeln!(
        t,
        "  FlashAttention moves {:.2}x fewer elements than standard attention",
        r.ratio
    )
    .ok();
    for (name, h) in [("standard", &r.standard), ("FlashAttention", &r.flash)] {
        writeln!(
            t,
            "\n  {name}: {} per head = Theta({}); the Theta term evaluates to {:.4e}",
            h.formula, h.theta, h.theta_value
        )
        .ok();
        for term in &h.terms {
            writeln!(
                t,
                "    {:<36} {:>18}  {:>20}",
                term.what,
                term.expr,
                group_digits(term.elements)
            )
            .ok();
        }
    }
    t
}

// ---------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------

fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|e| Error::Internal(format!("cannot write JSON: {e}")))
}
