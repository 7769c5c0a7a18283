//! Recordings as animated SVG and GIF: the SVG is well-formed XML whose strip holds one
//! screen per frame, moved at each frame's time; the GIF decodes to one frame per
//! recorded frame with its duration; every format is the same bytes on every run and
//! comes from the same frames; animated lesson steps hold one frame per tile or token;
//! a file name without a known extension is refused with exit code 2.

use assert_cmd::Command;
use attnviz::cli::Lang;
use attnviz::record::headless;
use attnviz::record::palette::Defaults;
use attnviz::record::{Recording, animated_svg, cast, gif, play_through, still};
use attnviz::scene;

use crate::support::headless::options;

fn recording(name: &str, lang: Lang) -> Recording {
    play_through(&scene::builtin(name).unwrap(), &options(lang)).unwrap()
}

/// The frames' plain text.
fn texts(rec: &Recording) -> Vec<String> {
    rec.frames.iter().map(|f| still::text(&f.screen)).collect()
}

/// The "tile k/N" each frame of a flash recording shows, if it shows one.
fn tile_numbers(rec: &Recording) -> Vec<Option<(usize, usize)>> {
    texts(rec)
        .iter()
        .map(|t| {
            t.match_indices("tile ").find_map(|(at, _)| {
                let rest = &t[at + 5..];
                let k: String = rest.chars().take_while(char::is_ascii_digit).collect();
                let n = rest[k.len()..].strip_prefix('/')?;
                let n: String = n.chars().take_while(char::is_ascii_digit).collect();
                Some((k.parse().ok()?, n.parse().ok()?))
            })
        })
        .collect()
}

#[test]
fn frames_have_increasing_times_and_differ_from_the_one_before() {
    let rec = recording("flash-tiling", Lang::En);
    assert_eq!(rec.frames[0].at_ms, 0);
    for w in rec.frames.windows(2) {
        assert!(w[0].at_ms < w[1].at_ms);
        assert!(w[0].screen != w[1].screen);
    }
    let total: u64 = (0..rec.frames.len()).map(|i| rec.shown_ms(i)).sum();
    assert_eq!(total, rec.end_ms);
    assert_eq!(
        rec.end_ms,
        scene::builtin("flash-tiling").unwrap().duration_ms()
    );
}

#[test]
fn every_flash_lesson_plays_every_tile_one_frame_each() {
    let flash_scenes: Vec<&str> = scene::BUILTIN_SOURCES
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| {
            let s = scene::builtin(n).unwrap();
            let mut view = s.view;
            s.steps.iter().any(|st| {
                view = st.view.unwrap_or(view);
                view == scene::SceneView::Flash
            })
        })
        .collect();
    assert!(flash_scenes.contains(&"flash-tiling") && flash_scenes.contains(&"flash2-loop-order"));
    for name in flash_scenes {
        let rec = recording(name, Lang::En);
        let shown: Vec<(usize, usize)> = tile_numbers(&rec).into_iter().flatten().collect();
        let n = shown
            .first()
            .map(|t| t.1)
            .unwrap_or_else(|| panic!("{name}: no tile on screen"));
        let mut seen: Vec<usize> = shown.iter().map(|t| t.0).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(
            seen,
            (1..=n).collect::<Vec<_>>(),
            "{name} does not show every tile"
        );
        // Each animated step: one frame per tile, in order, at the step's rate.
        let s = scene::builtin(name).unwrap();
        let mut begin = 0u64;
        for step in &s.steps {
            let end = begin + step.dwell_ms;
            if let Some(a) = step.animate {
                let in_step: Vec<_> = rec
                    .frames
                    .iter()
                    .zip(tile_numbers(&rec))
                    .filter(|(f, _)| f.at_ms >= begin && f.at_ms < end)
                    .collect();
                let tiles: Vec<usize> = in_step.iter().map(|(_, t)| t.unwrap().0 - 1).collect();
                assert_eq!(tiles, (a.from..=a.to).collect::<Vec<_>>(), "{name}");
                for (k, (f, _)) in in_step.iter().enumerate() {
                    let want = begin + (k as f64 * 1000.0 / a.rate).ceil() as u64;
                    assert!(
                        f.at_ms.abs_diff(want) <= 1,
                        "{name}: tile {k} at {} ms, expected {want}",
                        f.at_ms
                    );
                }
            }
            begin = end;
        }
    }
}

#[test]
fn the_kv_cache_lesson_decodes_token_by_token() {
    let rec = recording("kv-cache", Lang::En);
    let first_step = scene::builtin("kv-cache").unwrap().steps[0].dwell_ms;
    let steps: Vec<String> = texts(&rec)
        .iter()
        .zip(&rec.frames)
        .filter(|(_, f)| f.at_ms < first_step)
        .map(|(t, _)| {
            let at = t
                .find("decoding '")
                .expect("the decode view says which token");
            t[..at].rsplit("step ").next().unwrap().trim().to_string()
        })
        .collect();
    let want: Vec<String> = (1..=8).map(|t| format!("{t}/8")).collect();
    assert_eq!(steps, want);
}

#[test]
fn the_svg_is_xml_with_one_screen_per_frame_moved_at_its_time() {
    let rec = recording("flash-tiling", Lang::En);
    let svg = animated_svg::svg(&rec, Defaults::DARK);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.attribute("width"), Some("1200"));
    assert_eq!(root.attribute("height"), Some("720"));
    let strip = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("strip"))
        .expect("the strip");
    let uses: Vec<_> = strip.children().filter(|n| n.is_element()).collect();
    assert_eq!(uses.len(), rec.frames.len());
    for (i, u) in uses.iter().enumerate() {
        assert_eq!(u.attribute("x"), Some((i * 1200).to_string().as_str()));
        let target = u.attribute("href").unwrap().trim_start_matches('#');
        assert!(
            doc.descendants().any(|n| n.attribute("id") == Some(target)),
            "{target}"
        );
    }
    // Every reference points at something defined.
    for n in doc.descendants().filter(|n| n.has_tag_name("use")) {
        let id = n.attribute("href").unwrap().trim_start_matches('#');
        assert!(
            doc.descendants().any(|m| m.attribute("id") == Some(id)),
            "#{id}"
        );
    }
    let style = doc
        .descendants()
        .find(|n| n.has_tag_name("style"))
        .and_then(|n| n.text())
        .unwrap();
    assert!(
        style.contains(&format!(
            "animation:play {}.{:03}s steps(1,end) infinite",
            rec.end_ms / 1000,
            rec.end_ms % 1000
        )),
        "{style}"
    );
    // One keyframe per frame at its share of the time, then the end.
    let keys: Vec<(f64, u64)> = style
        .split("@keyframes play{")
        .nth(1)
        .unwrap()
        .split('}')
        .filter(|k| k.contains('%'))
        .map(|k| {
            let (pct, rest) = k.split_once("%{").unwrap();
            let px = rest
                .trim_start_matches("transform:translateX(-")
                .trim_end_matches("px)");
            (pct.parse().unwrap(), px.parse().unwrap())
        })
        .collect();
    assert_eq!(keys.len(), rec.frames.len() + 1);
    for (i, f) in rec.frames.iter().enumerate() {
        let want = f.at_ms as f64 * 100.0 / rec.end_ms as f64;
        assert!(
            (keys[i].0 - want).abs() < 1e-3,
            "frame {i}: {} vs {want}",
            keys[i].0
        );
        assert_eq!(keys[i].1, i as u64 * 1200);
    }
    assert_eq!(keys.last().unwrap().0, 100.0);
    // The size the issue asks for: a 78-second flash lesson at 100x30 under 2 MB.
    assert!(svg.len() < 2_000_000, "{} bytes", svg.len());
}

#[test]
fn the_svg_keeps_cjk_text_for_the_viewers_fonts() {
    let rec = recording("flash-tiling", Lang::Zh);
    let svg = animated_svg::svg(&rec, Defaults::DARK);
    roxmltree::Document::parse(&svg).expect("well-formed XML");
    assert!(svg.contains("Noto Sans Mono CJK SC"));
    assert!(
        svg.contains(">分</text>") || svg.contains(">块</text>"),
        "CJK glyphs are text"
    );
}

/// Frame count and each frame's delay (centiseconds) of a GIF.
fn decode_gif(bytes: &[u8]) -> (u16, u16, Vec<u16>) {
    let mut opts = ::gif::DecodeOptions::new();
    opts.set_color_output(::gif::ColorOutput::RGBA);
    let mut d = opts.read_info(bytes).expect("a GIF");
    let (w, h) = (d.width(), d.height());
    let mut delays = Vec::new();
    while let Some(f) = d.read_next_frame().expect("frames decode") {
        delays.push(f.delay);
    }
    (w, h, delays)
}

#[test]
fn the_gif_decodes_to_one_frame_per_recorded_frame_with_its_time() {
    let rec = recording("flash-tiling", Lang::En);
    let g = gif::gif(&rec, Defaults::DARK, None).unwrap();
    assert!(g.missing.is_empty(), "{:?}", g.missing);
    let (w, h, delays) = decode_gif(&g.bytes);
    assert_eq!((w, h), (1000, 600));
    assert_eq!(delays.len(), rec.frames.len());
    let cs = |ms: u64| (ms + 5) / 10;
    for (i, f) in rec.frames.iter().enumerate() {
        let want = (cs(f.at_ms + rec.shown_ms(i)) - cs(f.at_ms)).max(2);
        assert_eq!(u64::from(delays[i]), want, "frame {i}");
    }
    // The tiles of the animated steps, a second each: tile 3 before the last key block
    // (step 4), and tiles 5..16 (step 5; the last one's second is the rest of its dwell).
    assert_eq!(delays.iter().filter(|&&d| d == 100).count(), 13);
}

#[test]
fn every_format_is_the_same_bytes_on_every_run() {
    let a = recording("kv-cache", Lang::Zh);
    let b = recording("kv-cache", Lang::Zh);
    assert_eq!(cast(&a).unwrap(), cast(&b).unwrap());
    assert_eq!(
        animated_svg::svg(&a, Defaults::DARK),
        animated_svg::svg(&b, Defaults::DARK)
    );
    assert_eq!(
        gif::gif(&a, Defaults::LIGHT, None).unwrap().bytes,
        gif::gif(&b, Defaults::LIGHT, None).unwrap().bytes
    );
    // The cast is the one `record` writes: all formats start from the same frames.
    assert_eq!(
        cast(&a).unwrap(),
        headless::record(&scene::builtin("kv-cache").unwrap(), &options(Lang::Zh)).unwrap()
    );
}

fn attnviz() -> Command {
    Command::cargo_bin("attnviz").unwrap()
}

#[test]
fn the_command_line_writes_each_format_twice_the_same() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["cast", "svg", "gif"] {
        let mut runs = Vec::new();
        for k in 0..2 {
            let out = dir.path().join(format!("ft{k}.{ext}"));
            let run = attnviz()
                .args(["play", "flash2-loop-order", "--size", "80x24", "--record"])
                .arg(&out)
                .output()
                .unwrap();
            assert!(
                run.status.success(),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            runs.push(std::fs::read(&out).unwrap());
        }
        assert_eq!(runs[0], runs[1], ".{ext} differs between runs");
        let head: &[u8] = match ext {
            "cast" => b"{\"version\":2",
            "svg" => b"<svg ",
            _ => b"GIF89a",
        };
        assert!(runs[0].starts_with(head), ".{ext}");
    }
}

/// The backward lesson records in every format, the same bytes twice, and its frames
/// show the backward's tiles (key blocks outer) with its traffic beside the forward's.
#[test]
fn the_backward_lesson_records_each_format_twice_the_same() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["cast", "svg", "gif"] {
        let mut runs = Vec::new();
        for k in 0..2 {
            let out = dir.path().join(format!("fb{k}.{ext}"));
            let run = attnviz()
                .args(["play", "flash-backward", "--size", "100x30", "--record"])
                .arg(&out)
                .output()
                .unwrap();
            assert!(
                run.status.success(),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            runs.push(std::fs::read(&out).unwrap());
        }
        assert_eq!(runs[0], runs[1], ".{ext} differs between runs");
        assert!(!runs[0].is_empty());
    }
    let rec = recording("flash-backward", Lang::En);
    let all = texts(&rec).join("\n");
    for want in [
        "BACKWARD",
        "P0,0",
        "dK0",
        "dV0",
        "standard backward",
        "forward FA2",
    ] {
        assert!(all.contains(want), "no {want} in the recording");
    }
}

#[test]
fn an_unknown_extension_exits_2_naming_the_formats() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["out.png", "out"] {
        let out = dir.path().join(name);
        let run = attnviz()
            .args(["play", "flash-tiling", "--record"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(2));
        let err = String::from_utf8_lossy(&run.stderr);
        for ext in [".cast", ".svg", ".gif"] {
            assert!(err.contains(ext), "{err}");
        }
        assert!(err.contains(name), "{err}");
        assert!(!out.exists());
    }
}

#[test]
fn without_a_cjk_font_the_gif_draws_boxes_and_says_so() {
    let rec = recording("kv-cache", Lang::Zh);
    let none = gif::gif_with(&rec, Defaults::DARK, None, &[]).unwrap();
    assert_eq!(none.cjk, attnviz::record::fonts::CjkFont::Missing);
    assert!(
        none.missing
            .iter()
            .any(|c| ('\u{4e00}'..='\u{9fff}').contains(c)),
        "{:?}",
        none.missing
    );
    let (_, _, delays) = decode_gif(&none.bytes);
    assert_eq!(delays.len(), rec.frames.len());
    // The advice names what to install and the flag.
    assert!(attnviz::record::fonts::CJK_HINT.contains("fonts-noto-cjk"));
    assert!(attnviz::record::fonts::CJK_HINT.contains("--font"));
    // From the command line: a warning, and the GIF is still written.
    let en = recording("flash-tiling", Lang::En);
    let latin = gif::gif_with(&en, Defaults::DARK, None, &[]).unwrap();
    assert_eq!(latin.cjk, attnviz::record::fonts::CjkFont::NotNeeded);
    assert!(latin.missing.is_empty());
}

#[test]
fn a_font_given_with_the_flag_draws_the_cjk() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("zh.gif");
    let run = attnviz()
        .args([
            "play",
            "kv-cache",
            "--lang",
            "zh",
            "--size",
            "80x24",
            "--font",
            "/nonexistent/font.ttc",
            "--record",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("--font /nonexistent/font.ttc"), "{err}");
    assert!(!out.exists());
    // Any TrueType font is taken (the built-in one has no ideographs: they stay boxes).
    let run = attnviz()
        .args([
            "play",
            "kv-cache",
            "--lang",
            "zh",
            "--size",
            "80x24",
            "--font",
            "assets/fonts/DejaVuSansMono.ttf",
            "--record",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains("CJK characters drawn with assets/fonts/DejaVuSansMono.ttf"),
        "{err}"
    );
    assert!(err.contains("warning: no font has"), "{err}");
}

/// `play --record x.gif` encodes each frame as the scene plays instead of keeping the
/// recording: the file is the same bytes as the GIF of the kept frames, and `play_each`
/// hands over exactly the frames `play_through` keeps.
#[test]
fn the_gif_written_frame_by_frame_is_the_gif_of_the_whole_recording() {
    let s = scene::builtin("flash-backward").unwrap();
    let rec = play_through(&s, &options(Lang::Zh)).unwrap();
    let mut seen = Vec::new();
    let played = headless::play_each(&s, &options(Lang::Zh), |f| {
        seen.push((f.at_ms, still::text(&f.screen)));
        Ok(())
    })
    .unwrap();
    assert_eq!(played.frames, rec.frames.len());
    assert_eq!((played.end_ms, &played.markers), (rec.end_ms, &rec.markers));
    let kept: Vec<(u64, String)> = rec
        .frames
        .iter()
        .map(|f| (f.at_ms, still::text(&f.screen)))
        .collect();
    assert_eq!(seen, kept);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fb.gif");
    let run = attnviz()
        .args(["play", "flash-backward", "--lang", "zh", "--size", "100x30"])
        .arg("--record")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        err.contains(&format!("{} frames", rec.frames.len())),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        gif::gif(&rec, Defaults::DARK, None).unwrap().bytes
    );
}
