//! `attnviz patch MODEL --clean T1 --corrupt T2 --target TOKEN --foil TOKEN [--what ..]`:
//! activation patching (DESIGN.md "Activation patching and comparing two inputs").

use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::time::Instant;

use serde::Serialize;

use super::model_input::{TokenJson, to_json, tokens_json};
use super::token_arg::token_id;
use crate::cli::{PatchArgs, WhatArg};
use crate::error::{Error, Result};
use crate::model::load;
use crate::model::load::LoadedModel;
use crate::model::patching::{LogitPair, PatchWhat, patch_sweep};

impl From<WhatArg> for PatchWhat {
    fn from(w: WhatArg) -> Self {
        match w {
            WhatArg::Resid => PatchWhat::Resid,
            WhatArg::Heads => PatchWhat::Heads,
            WhatArg::AttnOut => PatchWhat::AttnOut,
            WhatArg::MlpOut => PatchWhat::MlpOut,
        }
    }
}

#[derive(Serialize)]
struct PatchJson<'a> {
    model: &'a str,
    target: TokenJson,
    foil: TokenJson,
    clean_ld: f64,
    corrupt_ld: f64,
    what: &'static str,
    tokens_clean: Vec<TokenJson>,
    tokens_corrupt: Vec<TokenJson>,
    rows: &'a [Vec<f64>],
    patched_ld: &'a [Vec<f64>],
    ms: f64,
}

fn text_ids(m: &LoadedModel, flag: &str, text: &str) -> Result<Vec<u32>> {
    let ids = m.tokenizer.encode(text)?;
    if ids.is_empty() {
        return Err(Error::usage(format!(
            "{flag} {text:?} gives no tokens; give a word or two"
        )));
    }
    Ok(ids)
}

fn pieces(m: &LoadedModel, ids: &[u32]) -> String {
    ids.iter()
        .map(|&id| format!("{:?}", m.tokenizer.piece(id)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A one-line bar on stderr, redrawn in place; only at a terminal.
struct Progress {
    on: bool,
    start: Instant,
    shown: usize,
}

impl Progress {
    fn new() -> Self {
        Progress {
            on: std::io::stderr().is_terminal(),
            start: Instant::now(),
            shown: usize::MAX,
        }
    }

    fn step(&mut self, done: usize, total: usize) {
        if !self.on || total == 0 {
            return;
        }
        const WIDTH: usize = 30;
        let filled = done * WIDTH / total;
        let pct = done * 100 / total;
        if pct == self.shown && done != total {
            return;
        }
        self.shown = pct;
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\rpatching [{}{}] {done}/{total} sites {:.1} s",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            self.start.elapsed().as_secs_f64()
        );
        if done == total {
            let _ = writeln!(e);
        }
        let _ = e.flush();
    }
}

pub fn run(args: &PatchArgs) -> Result<()> {
    if args.threads == Some(0) {
        return Err(Error::usage("--threads must be at least 1"));
    }
    let m = load(&args.model)?;
    let clean = text_ids(&m, "--clean", &args.clean)?;
    let corrupt = text_ids(&m, "--corrupt", &args.corrupt)?;
    if clean.len() != corrupt.len() {
        return Err(Error::usage(format!(
            "--clean gives {} tokens ({}) and --corrupt {} ({}); patching needs the same number of tokens: change a word for one that is one token too",
            clean.len(),
            pieces(&m, &clean),
            corrupt.len(),
            pieces(&m, &corrupt)
        )));
    }
    let target = token_id(&m, "--target", &args.target)?;
    let foil = token_id(&m, "--foil", &args.foil)?;
    let what = PatchWhat::from(args.what);
    let mut bar = Progress::new();
    let start = Instant::now();
    let r = patch_sweep(
        &m.config,
        &m.weights,
        &clean,
        &corrupt,
        LogitPair { target, foil },
        what,
        args.threads,
        &mut |done, total| {
            bar.step(done, total);
            Ok(())
        },
    )?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let tok = |id: u32| TokenJson {
        id,
        text: m.tokenizer.piece(id),
    };
    if args.json {
        let j = PatchJson {
            model: &m.name,
            target: tok(target),
            foil: tok(foil),
            clean_ld: r.clean_ld,
            corrupt_ld: r.corrupt_ld,
            what: what.name(),
            tokens_clean: tokens_json(&m, &clean),
            tokens_corrupt: tokens_json(&m, &corrupt),
            rows: &r.rows,
            patched_ld: &r.patched_ld,
            ms,
        };
        return crate::output::print(&to_json(&j)?);
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: patching {} from the clean run into the corrupt one ({} tokens, {:.1} s)",
        m.name,
        what.name(),
        clean.len(),
        ms / 1e3
    );
    let _ = writeln!(
        o,
        "LD = logit({:?}) - logit({:?}) at the last position: clean {:.3}, corrupt {:.3}",
        m.tokenizer.piece(target),
        m.tokenizer.piece(foil),
        r.clean_ld,
        r.corrupt_ld
    );
    let _ = writeln!(
        o,
        "metric = (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt): 1 restores the clean answer, 0 does nothing\n"
    );
    // Column heads: positions (the clean and corrupt pieces where they differ) or heads.
    let cols: Vec<String> = match what {
        PatchWhat::Heads => (0..m.config.heads).map(|h| format!("h{h}")).collect(),
        _ => clean
            .iter()
            .zip(&corrupt)
            .map(|(&a, &b)| {
                let (pa, pb) = (m.tokenizer.piece(a), m.tokenizer.piece(b));
                if a == b { pa } else { format!("{pa}/{pb}") }
            })
            .collect(),
    };
    let width = 7;
    if what != PatchWhat::Heads {
        for (p, c) in cols.iter().enumerate() {
            let _ = writeln!(o, "  position {p:>3}: {c:?}");
        }
        let _ = writeln!(o);
    }
    let _ = write!(o, "LAYER");
    for (c, name) in cols.iter().enumerate() {
        let label = if what == PatchWhat::Heads {
            name.clone()
        } else {
            format!("p{c}")
        };
        let _ = write!(o, " {label:>width$}");
    }
    let _ = writeln!(o);
    for (l, row) in r.rows.iter().enumerate() {
        let _ = write!(o, "{l:>5}");
        for v in row {
            let _ = write!(o, " {v:>width$.3}");
        }
        let _ = writeln!(o);
    }
    crate::output::print(&o)
}
