//! attnviz's side of `benches/torch_side_by_side.py`: loads a model once (as `generate`
//! does: its weights copied to huge pages where the kernel offers them), then runs one
//! timed forward pass (or greedy decode) per request read from stdin, so that the script
//! can alternate it with PyTorch's run for run on the same machine. Not a criterion bench.
//!
//! Usage: `cargo bench --bench model_forward -- MODEL` then, one per line on stdin:
//! - `forward THREADS ATTN ID,ID,..`: one forward over the ids (logits of every row, as
//!   `model run` computes them); ATTN 1 keeps every layer's attention weights (what
//!   `model run` does), 0 not. Answers `ms M`.
//! - `generate THREADS NEW ID,ID,..`: NEW greedy tokens after the prompt ids (the prefill
//!   makes the first, then NEW - 1 steps over the KV cache; no EOS stop), as `generate`
//!   runs them. Answers `ms M` for the whole call.
//! - `prefill THREADS ID,ID,..`: the prompt fed to a fresh KV cache as `generate` starts:
//!   no attention weights kept, the last row's logits only (what llama.cpp's prompt
//!   evaluation computes). Answers `ms M`.
//! - `decode THREADS NEW ID,ID,..`: the prefill, then NEW greedy steps over the KV cache
//!   (no EOS stop). Answers `ms M` with M the mean wall time of one cached step.
//! - `quit`.
//!
//! Every answer line starts with `ms` or `error`; nothing else is printed on stdout. On
//! Linux `ms M` is followed by `cpu C`: the milliseconds the calling thread spent on a CPU
//! during the request (CLOCK_THREAD_CPUTIME_ID). At 1 thread that thread does all the
//! work, and unlike the wall time the figure leaves out the time other programs held the
//! core: the steadier one on a shared machine (the script compares it with PyTorch's
//! `time.thread_time`, which is the same measure).

use std::io::{BufRead, Write};
use std::time::Instant;

use attnviz::model::generate::{Decoder, GenerateOptions, generate};
use attnviz::model::load::{Residency, load_with};
use attnviz::model::{ForwardOptions, LoadedModel, LogitRows, forward};

fn parse_ids(s: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(|t| {
            t.trim()
                .parse::<u32>()
                .map_err(|e| format!("bad id {t:?}: {e}"))
        })
        .collect()
}

fn main() {
    // The allocator settings of the attnviz binary (what `generate` runs with).
    attnviz::kernel::keep_freed_memory();
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(path) = args.first() else {
        eprintln!("usage: model_forward MODEL (requests on stdin; see the file's comment)");
        std::process::exit(2);
    };
    let m = match load_with(path, Residency::HugePages) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("model_forward: {e}");
            std::process::exit(2);
        }
    };
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let parts: Vec<&str> = line.split_whitespace().collect();
        let answer = match parts.as_slice() {
            ["quit"] => break,
            ["forward", t, attn, ids] => run_forward(&m, t, attn, ids),
            ["generate", t, new, ids] => run_generate(&m, t, new, ids),
            ["prefill", t, ids] => run_prefill(&m, t, ids),
            ["decode", t, new, ids] => run_decode(&m, t, new, ids),
            _ => Err(format!("unknown request {line:?}")),
        };
        let text = match answer {
            Ok((ms, Some(cpu))) => format!("ms {ms:.3} cpu {cpu:.3}"),
            Ok((ms, None)) => format!("ms {ms:.3}"),
            Err(e) => format!("error {e}"),
        };
        if writeln!(stdout, "{text}")
            .and_then(|_| stdout.flush())
            .is_err()
        {
            break;
        }
    }
}

/// On-CPU nanoseconds of the calling thread so far (Linux), None elsewhere.
#[cfg(target_os = "linux")]
fn cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[cfg(not(target_os = "linux"))]
fn cpu_ns() -> Option<u64> {
    None
}

/// Wall and on-CPU milliseconds of `f`.
fn timed<T>(f: impl FnOnce() -> Result<T, String>) -> Result<(f64, Option<f64>), String> {
    let c0 = cpu_ns();
    let start = Instant::now();
    let out = f()?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let cpu = c0
        .zip(cpu_ns())
        .map(|(a, b)| b.saturating_sub(a) as f64 / 1e6);
    std::hint::black_box(&out);
    Ok((ms, cpu))
}

fn threads(t: &str) -> Result<usize, String> {
    t.parse()
        .map_err(|e| format!("bad thread count {t:?}: {e}"))
}

fn run_forward(
    m: &LoadedModel,
    t: &str,
    attn: &str,
    ids: &str,
) -> Result<(f64, Option<f64>), String> {
    let ids = parse_ids(ids)?;
    let opts = ForwardOptions {
        threads: Some(threads(t)?),
        keep_attention: attn == "1",
        logits: LogitRows::All,
        ..ForwardOptions::default()
    };
    timed(|| forward(&m.config, &m.weights, &ids, &opts).map_err(|e| e.to_string()))
}

fn run_generate(
    m: &LoadedModel,
    t: &str,
    new: &str,
    ids: &str,
) -> Result<(f64, Option<f64>), String> {
    let ids = parse_ids(ids)?;
    let new: usize = new
        .parse()
        .map_err(|e| format!("bad token count {new:?}: {e}"))?;
    let opts = GenerateOptions {
        max_tokens: new,
        forward: ForwardOptions {
            threads: Some(threads(t)?),
            keep_attention: false,
            ..ForwardOptions::default()
        },
        ..GenerateOptions::default()
    };
    timed(|| {
        let g =
            generate(&m.config, &m.weights, &ids, &opts, |_| true).map_err(|e| e.to_string())?;
        if g.steps.len() != new {
            return Err(format!("made {} tokens, not {new}", g.steps.len()));
        }
        Ok(g)
    })
}

fn run_prefill(m: &LoadedModel, t: &str, ids: &str) -> Result<(f64, Option<f64>), String> {
    let ids = parse_ids(ids)?;
    let opts = ForwardOptions {
        threads: Some(threads(t)?),
        keep_attention: false,
        ..ForwardOptions::default()
    };
    let mut dec =
        Decoder::new(&m.config, &m.weights, &opts, ids.len()).map_err(|e| e.to_string())?;
    timed(|| dec.feed(&ids).map_err(|e| e.to_string()))
}

fn run_decode(
    m: &LoadedModel,
    t: &str,
    new: &str,
    ids: &str,
) -> Result<(f64, Option<f64>), String> {
    let ids = parse_ids(ids)?;
    let new: usize = new
        .parse()
        .map_err(|e| format!("bad token count {new:?}: {e}"))?;
    if new < 2 {
        return Err("decode needs at least 2 new tokens (the first comes from the prefill)".into());
    }
    let opts = GenerateOptions {
        max_tokens: new,
        forward: ForwardOptions {
            threads: Some(threads(t)?),
            keep_attention: false,
            ..ForwardOptions::default()
        },
        ..GenerateOptions::default()
    };
    let g = generate(&m.config, &m.weights, &ids, &opts, |_| true).map_err(|e| e.to_string())?;
    if g.steps.len() != new {
        return Err(format!("made {} tokens, not {new}", g.steps.len()));
    }
    let cached = &g.steps[1..];
    let ms = cached.iter().map(|s| s.ms).sum::<f64>() / cached.len() as f64;
    Ok((ms, None))
}
