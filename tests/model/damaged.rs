//! Damaged and hostile model files: each exits 2 with a message naming the file and what
//! in it is wrong, quickly, never with a panic, an abort in the allocator, a hang, or
//! (worst) exit 0 with garbage numbers.

use std::path::{Path, PathBuf};

use crate::support;

use support::gguf::{Gguf, Meta, Quant, Tiny, tiny_llama};
use support::{attnviz, hf, measure};

/// `attnviz ARGS` exits 2 within 15 s, under 1 GiB of memory, its message holding every
/// needle and no panic.
fn refused(args: &[&str], needles: &[&str]) -> String {
    measure::refused_within(args, needles, 15).stderr
}

fn info(p: &Path, needles: &[&str]) -> String {
    let mut all = vec![p.to_str().unwrap()];
    all.extend(needles);
    refused(&["model", "info", p.to_str().unwrap()], &all)
}

fn run(p: &Path, needles: &[&str]) -> String {
    let mut all = vec![p.to_str().unwrap()];
    all.extend(needles);
    refused(
        &["model", "run", p.to_str().unwrap(), "--ids", "3,4,5"],
        &all,
    )
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Files {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn gguf(&self, name: &str, g: &Gguf) -> PathBuf {
        let p = self.dir.path().join(name);
        g.write(&p);
        p
    }

    fn bytes(&self, name: &str, b: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, b).unwrap();
        p
    }
}

/// Where tensor `name`'s offset field lies in the header bytes.
fn offset_field(bytes: &[u8], name: &str) -> usize {
    let mut key = (name.len() as u64).to_le_bytes().to_vec();
    key.extend(name.as_bytes());
    let at = bytes
        .windows(key.len())
        .position(|w| w == key.as_slice())
        .expect(name);
    let nd_at = at + key.len();
    let nd = u32::from_le_bytes(bytes[nd_at..nd_at + 4].try_into().unwrap()) as usize;
    nd_at + 4 + 8 * nd + 4
}

#[test]
fn damaged_offsets_and_swapped_types_are_refused_not_read() {
    let f = Files::new();
    let good = tiny_llama(Tiny::new(), Quant::Q4_1);
    // The real file loads: the layout checks accept what a GGUF writer writes.
    attnviz()
        .args([
            "model",
            "info",
            f.gguf("good.gguf", &good).to_str().unwrap(),
        ])
        .assert()
        .success();
    let bytes = good.bytes();
    let at = offset_field(&bytes, "blk.0.attn_k.weight");
    for off in [u64::MAX - 31, u64::MAX - 1023, 1 << 62] {
        let mut b = bytes.clone();
        b[at..at + 8].copy_from_slice(&off.to_le_bytes());
        info(
            &f.bytes("offset.gguf", &b),
            &["blk.0.attn_k.weight", "past the end"],
        );
    }
    // An offset moved onto the next tensor's data (still inside the file).
    let mut b = bytes.clone();
    let next = offset_field(&bytes, "blk.0.attn_v.weight");
    let v_off = b[next..next + 8].to_vec();
    b[at..at + 8].copy_from_slice(&v_off);
    info(
        &f.bytes("moved.gguf", &b),
        &["blk.0.attn_k.weight", "does not match"],
    );
    // Q4_1 (20 bytes a block) read as Q4_0 (18) or Q8_0 (34): the bytes still fit in
    // the file, but the tiling of the data section breaks.
    for (ty, what) in [(2, "Q4_0"), (8, "Q8_0"), (6, "Q5_0")] {
        let mut g = good.clone();
        g.tensor_mut("blk.1.ffn_up.weight").ty = ty;
        info(
            &f.gguf("swap.gguf", &g),
            &["blk.1.ffn_up.weight", what, "does not match"],
        );
    }
    // The last tensor shrunk: bytes left over at the end.
    let mut g = good.clone();
    g.tensor_mut("output.weight").ty = 2;
    info(&f.gguf("tail.gguf", &g), &["output.weight", "follow"]);
}

#[test]
fn duplicate_keys_and_tensor_names_are_refused() {
    let f = Files::new();
    let good = tiny_llama(Tiny::new(), Quant::Q8_0);
    let mut g = good.clone();
    g.meta.push(("llama.block_count".into(), Meta::U32(1)));
    info(
        &f.gguf("dupkey.gguf", &g),
        &["llama.block_count", "appears twice"],
    );
    let mut g = good;
    let t = g.tensor("blk.0.attn_norm.weight").clone();
    g.tensors.push(t);
    info(
        &f.gguf("dupname.gguf", &g),
        &["blk.0.attn_norm.weight", "appears twice"],
    );
}

#[test]
fn header_counts_past_the_file_are_refused_before_allocating() {
    let f = Files::new();
    let good = tiny_llama(Tiny::new(), Quant::Q8_0);
    let bytes = good.bytes();
    // One tensor more than the file holds: named, not "tensor : 0 dimensions".
    let mut b = bytes.clone();
    let n = u64::from_le_bytes(b[8..16].try_into().unwrap());
    b[8..16].copy_from_slice(&(n + 1).to_le_bytes());
    let err = info(&f.bytes("count.gguf", &b), &[&format!("{}", n + 1)]);
    assert!(!err.contains("tensor :"), "{err}");
    for (field, what) in [(8..16, "tensors"), (16..24, "metadata entries")] {
        let mut b = bytes.clone();
        b[field].copy_from_slice(&u64::MAX.to_le_bytes());
        info(&f.bytes("huge.gguf", &b), &[what, "claims"]);
    }
    // Arrays and strings claiming more than the file has.
    let mut g = good.clone();
    let mut raw = 0u32.to_le_bytes().to_vec();
    raw.extend(u64::MAX.to_le_bytes());
    g.set("general.junk", Meta::Raw(9, raw));
    info(
        &f.gguf("array.gguf", &g),
        &["general.junk", "array elements"],
    );
    let mut g = good.clone();
    let mut raw = 10u32.to_le_bytes().to_vec();
    raw.extend(1_000_000u64.to_le_bytes());
    g.set("general.junk", Meta::Raw(9, raw));
    info(
        &f.gguf("array64.gguf", &g),
        &["general.junk", "array elements"],
    );
    // A u8 array that the file really holds, 40 MB of it: within the file, but past the
    // header's ceiling on array elements (held one by one it would take 1.3 GB).
    let n = 40_000_000u64;
    let mut raw = 0u32.to_le_bytes().to_vec();
    raw.extend(n.to_le_bytes());
    raw.resize(raw.len() + n as usize, 7);
    let mut g = good.clone();
    g.set("general.junk", Meta::Raw(9, raw));
    info(
        &f.gguf("whole.gguf", &g),
        &["general.junk", &format!("claims {n} array elements")],
    );
    let mut g = good.clone();
    g.set(
        "general.junk",
        Meta::Raw(8, u64::MAX.to_le_bytes().to_vec()),
    );
    info(&f.gguf("string.gguf", &g), &["general.junk", "string"]);
    let mut g = good.clone();
    g.set("general.alignment", Meta::U64(1 << 40));
    info(
        &f.gguf("align.gguf", &g),
        &["general.alignment", "power of two"],
    );
    // Sizes that would become allocations: refused by name, in seconds.
    for v in [2_000_000_000u64, u64::MAX] {
        let mut g = good.clone();
        g.set("llama.block_count", Meta::U64(v));
        info(
            &f.gguf("layers.gguf", &g),
            &["llama.block_count", &v.to_string()],
        );
    }
    let mut g = good.clone();
    g.set("llama.block_count", Meta::U32(500));
    info(
        &f.gguf("layers500.gguf", &g),
        &["llama.block_count", "tensors"],
    );
    let mut g = good;
    g.set("llama.feed_forward_length", Meta::U64(1 << 40));
    info(&f.gguf("ff.gguf", &g), &["llama.feed_forward_length"]);
}

#[test]
fn impossible_hyper_parameters_are_named_at_load() {
    let f = Files::new();
    let good = tiny_llama(Tiny::new(), Quant::Q8_0);
    let eps = "llama.attention.layer_norm_rms_epsilon";
    for v in [f32::INFINITY, f32::NAN, 0.0, -1e-5] {
        let mut g = good.clone();
        g.set(eps, Meta::F32(v));
        info(&f.gguf("eps.gguf", &g), &[eps]);
    }
    for v in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let mut g = good.clone();
        g.set("llama.rope.freq_base", Meta::F32(v));
        let err = info(&f.gguf("base.gguf", &g), &["llama.rope.freq_base"]);
        assert!(!err.contains("--rope-base"), "{err}");
    }
}

/// `g` with the first value of F32 tensor `name` replaced by `v`.
fn poisoned(g: &Gguf, name: &str, v: f32) -> Gguf {
    let mut g = g.clone();
    g.tensor_mut(name).data[..4].copy_from_slice(&v.to_le_bytes());
    g
}

#[test]
fn non_finite_norms_are_named_with_their_layer() {
    let f = Files::new();
    let good = tiny_llama(Tiny::new(), Quant::Q8_0);
    run(
        &f.gguf(
            "out.gguf",
            &poisoned(&good, "output_norm.weight", f32::INFINITY),
        ),
        &["output_norm.weight", "inf"],
    );
    run(
        &f.gguf(
            "blk.gguf",
            &poisoned(&good, "blk.1.attn_norm.weight", f32::NAN),
        ),
        &["blk.1.attn_norm.weight", "layer 1", "NaN"],
    );
    // An F32 matrix too.
    let g = tiny_llama(Tiny::new(), Quant::F32);
    run(
        &f.gguf(
            "q.gguf",
            &poisoned(&g, "blk.0.attn_q.weight", f32::NEG_INFINITY),
        ),
        &["blk.0.attn_q.weight", "layer 0"],
    );
    // Finite weights whose scores overflow f32: the message speaks of the model's
    // attention and offers no flag `model run` lacks.
    let mut g = tiny_llama(Tiny::new(), Quant::F32);
    let t = g.tensor_mut("blk.0.attn_q.weight");
    t.data = (f32::MAX / 4.0).to_le_bytes().repeat(t.data.len() / 4);
    let huge = f.gguf("huge.gguf", &g);
    let err = run(&huge, &["a layer's attention", "Q, K and V"]);
    assert!(!err.contains("--kernel"), "{err}");
    let h = huge.to_str().unwrap();
    refused(&["heads", h, "--ids", "3,4,5"], &[h, "a layer's attention"]);
    // Finite queries and keys whose product overflows, through the KV cache (`generate`
    // checks its keys by the bounds the cache keeps as rows are written).
    let mut g = tiny_llama(Tiny::new(), Quant::F32);
    for name in ["blk.1.attn_q.weight", "blk.1.attn_k.weight"] {
        let t = g.tensor_mut(name);
        t.data = 1e20f32.to_le_bytes().repeat(t.data.len() / 4);
    }
    let big = f.gguf("big_qk.gguf", &g);
    let b = big.to_str().unwrap();
    refused(
        &["generate", b, "--prompt", "the cat", "--max-tokens", "2"],
        &["a layer's attention", "Q, K and V"],
    );
    // A quantized matrix with an infinite f16 scale (Q8_0: a block's first 2 bytes).
    let mut g = good.clone();
    let t = g.tensor_mut("blk.1.ffn_down.weight");
    t.data[34..36].copy_from_slice(&0x7C00u16.to_le_bytes());
    run(
        &f.gguf("scale1.gguf", &g),
        &["blk.1.ffn_down.weight", "layer 1", "Q8_0", "block 1"],
    );
    // The good file runs, and its numbers are finite.
    let out = attnviz()
        .args(["model", "run"])
        .arg(f.gguf("good.gguf", &good))
        .args(["--ids", "3,4,5", "--json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert!(v["loss"].as_f64().is_some_and(f64::is_finite), "{v}");
}

#[test]
fn damaged_hugging_face_folders_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let folder = |name: &str, f: &hf::Folder, shards: usize| {
        let p = dir.path().join(name);
        f.write(&p, shards);
        p
    };
    // An index with nothing in it, empty or without tensors.
    for (i, text) in ["", "{}", "{\"weight_map\": {}}"].into_iter().enumerate() {
        let p = folder(&format!("index{i}"), &hf::llama(), 2);
        std::fs::write(p.join("model.safetensors.index.json"), text).unwrap();
        info(&p, &["model.safetensors.index.json"]);
    }
    // Sizes that would become allocations.
    for (key, v) in [
        ("num_hidden_layers", 1_000_000_000_000u64),
        ("intermediate_size", 1 << 40),
        ("vocab_size", 1 << 40),
    ] {
        let mut f = hf::llama();
        f.config[key] = v.into();
        info(&folder(key, &f, 1), &[key, &v.to_string()]);
    }
    for (key, v) in [
        ("rms_norm_eps", -1.0),
        ("rms_norm_eps", 0.0),
        ("rope_theta", 0.0),
    ] {
        let mut f = hf::llama();
        f.config[key] = v.into();
        info(&folder(key, &f, 1), &[key]);
    }
    // A non-finite weight, named with its layer.
    let mut f = hf::llama();
    f.dtype = safetensors::tensor::Dtype::F32;
    if let Some(t) = f.tensors.get_mut("model.layers.1.input_layernorm.weight") {
        t.values[2] = f32::INFINITY;
    }
    run(
        &folder("inf", &f, 1),
        &["model.layers.1.input_layernorm.weight", "layer 1"],
    );
}

#[cfg(unix)]
#[test]
fn a_fifo_in_a_model_folder_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fifo");
    hf::llama().write(&p, 1);
    let tok = p.join("tokenizer.json");
    std::fs::remove_file(&tok).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&tok)
        .status()
        .unwrap();
    assert!(made.success());
    info(&p, &["tokenizer.json", "not a regular file"]);
}

/// Seeded random damage to a GGUF header and to a safetensors header: loading either
/// returns (a model or an error), never panics; an error is a bad-input error (exit 2).
#[test]
fn mutated_headers_never_panic() {
    use rand::{RngExt, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let gguf = tiny_llama(Tiny::new(), Quant::Q4_1).bytes();
    // The header: everything before the first tensor's data.
    let header = gguf.len()
        - tiny_llama(Tiny::new(), Quant::Q4_1)
            .tensors
            .iter()
            .map(|t| t.data.len())
            .sum::<usize>();
    let folder = dir.path().join("hf");
    hf::llama().write(&folder, 1);
    let st = std::fs::read(folder.join("model.safetensors")).unwrap();
    let st_header = 8 + u64::from_le_bytes(st[..8].try_into().unwrap()) as usize;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(28);
    let p = dir.path().join("m.gguf");
    for case in 0..1000 {
        let (mut b, end) = if case % 3 == 2 {
            (st.clone(), st_header)
        } else {
            (gguf.clone(), header)
        };
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(0..end);
            b[at] = match rng.random_range(0..3) {
                0 => rng.random(),
                1 => 0xFF,
                _ => b[at].wrapping_add(1),
            };
        }
        let target = if case % 3 == 2 {
            std::fs::write(folder.join("model.safetensors"), &b).unwrap();
            folder.clone()
        } else {
            std::fs::write(&p, &b).unwrap();
            p.clone()
        };
        if let Err(e) = attnviz::model::load(target.to_str().unwrap()) {
            assert_eq!(e.exit_code(), 2, "case {case}: {e}");
        }
    }
}
