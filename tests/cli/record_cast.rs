//! Recordings: a golden cast compared byte for byte, the same bytes on every run, a
//! well-formed asciicast v2 whose output redraws exactly the frames the app drew, and
//! (where asciinema is installed) a cast that `asciinema play` accepts.
//!
//! After a deliberate change to what the app draws, regenerate the golden file with
//! `ATTNVIZ_BLESS=1 cargo test --test cli record_cast::the_recording_matches` (that test
//! alone: the others read the golden file).

use std::path::Path;
use std::process::Command as Process;

use assert_cmd::Command;
use attnviz::cli::{Lang, TermSize};
use attnviz::record::{HeadlessOptions, record, still};
use attnviz::scene;
use serde_json::Value;
use unicode_width::UnicodeWidthStr;

const SCENE: &str = "tests/fixtures/record/short.toml";
const GOLDEN: &str = "tests/fixtures/record/short.cast";
const SIZE: TermSize = TermSize { cols: 80, rows: 24 };

fn options(lang: Lang, speed: f64) -> HeadlessOptions {
    crate::support::headless::options_at(lang, SIZE, speed)
}

fn cast(lang: Lang, speed: f64) -> Vec<u8> {
    record(&scene::load(SCENE).unwrap(), &options(lang, speed)).unwrap()
}

#[test]
fn the_recording_matches_the_golden_cast() {
    let bytes = cast(Lang::En, 1.0);
    if std::env::var_os("ATTNVIZ_BLESS").is_some() {
        std::fs::write(GOLDEN, &bytes).unwrap();
    }
    let golden = std::fs::read(GOLDEN).expect("the golden cast is committed");
    assert!(
        bytes == golden,
        "the recording of {SCENE} differs from {GOLDEN}; if the app's drawing changed on \
         purpose, regenerate it with ATTNVIZ_BLESS=1 cargo test --test cli record_cast::the_recording_matches"
    );
}

#[test]
fn recording_twice_from_the_command_line_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut outs = Vec::new();
    for name in ["a.cast", "b.cast"] {
        let out = dir.path().join(name);
        Command::cargo_bin("attnviz")
            .unwrap()
            .args(["play", SCENE, "--size", "80x24", "--record"])
            .arg(&out)
            .env("NO_COLOR", "1") // the environment does not change a recording
            .env("COLORTERM", "")
            .assert()
            .success()
            .stderr(predicates::str::contains("asciinema play"));
        outs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], std::fs::read(GOLDEN).unwrap());
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 2);
}

/// The cast as (header, events).
fn parse(bytes: &[u8]) -> (Value, Vec<(f64, String, String)>) {
    let text = std::str::from_utf8(bytes).unwrap();
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let events = lines
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let a = v.as_array().unwrap();
            assert_eq!(a.len(), 3, "{l}");
            (
                a[0].as_f64().unwrap(),
                a[1].as_str().unwrap().to_string(),
                a[2].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (header, events)
}

#[test]
fn the_cast_is_asciicast_v2_with_a_marker_per_step() {
    let scene = scene::load(SCENE).unwrap();
    let (header, events) = parse(&cast(Lang::En, 1.0));
    assert_eq!(header["version"], 2);
    assert_eq!(header["width"], 80);
    assert_eq!(header["height"], 24);
    assert!(
        header.get("timestamp").is_none(),
        "no wall-clock time in a recording"
    );
    assert!(
        events.windows(2).all(|w| w[0].0 <= w[1].0),
        "times never go back"
    );
    assert!(events.iter().all(|e| e.1 == "o" || e.1 == "m"));
    let markers: Vec<(f64, &str)> = events
        .iter()
        .filter(|e| e.1 == "m")
        .map(|e| (e.0, e.2.as_str()))
        .collect();
    // Steps begin at 0, 1.5 and 2.5 s (the dwell times of the steps before them).
    assert_eq!(
        markers,
        [(0.0, "1. scores"), (1.5, "step 2"), (2.5, "3. heads")]
    );
    assert_eq!(markers.len(), scene.steps.len());
    // The last event comes when the last step's dwell is over.
    assert_eq!(
        events.last().unwrap().0,
        scene.duration_ms() as f64 / 1000.0
    );
}

#[test]
fn speed_divides_the_times_and_language_changes_the_words() {
    let (_, fast) = parse(&cast(Lang::Zh, 2.0));
    let markers: Vec<f64> = fast.iter().filter(|e| e.1 == "m").map(|e| e.0).collect();
    assert_eq!(markers, [0.0, 0.75, 1.25]);
    assert_eq!(fast.last().unwrap().0, 1.625);
    let output: String = fast
        .iter()
        .filter(|e| e.1 == "o")
        .map(|e| e.2.as_str())
        .collect();
    assert!(output.contains("分数，并高亮一个单元格。"));
}

/// A small terminal for exactly the sequences the recorder writes (cursor moves, SGR,
/// clear, cursor visibility): replays output into a grid of text.
struct Screen {
    cols: usize,
    grid: Vec<Vec<String>>,
    x: usize,
    y: usize,
}

impl Screen {
    fn new(cols: usize, rows: usize) -> Screen {
        Screen {
            cols,
            grid: vec![vec![" ".to_string(); cols]; rows],
            x: 0,
            y: 0,
        }
    }

    fn feed(&mut self, data: &str) {
        let mut chars = data.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                assert_eq!(chars.next(), Some('['), "only CSI sequences are written");
                let mut params = String::new();
                let end = loop {
                    let c = chars.next().expect("a complete sequence");
                    if c.is_ascii_alphabetic() {
                        break c;
                    }
                    params.push(c);
                };
                match end {
                    'H' => {
                        let p: Vec<usize> = params
                            .split(';')
                            .filter(|s| !s.is_empty())
                            .map(|s| s.parse().unwrap())
                            .collect();
                        (self.y, self.x) = match p.as_slice() {
                            [] => (0, 0),
                            [r, c] => (r - 1, c - 1),
                            other => panic!("bad cursor move {other:?}"),
                        };
                    }
                    'J' => {
                        assert_eq!(params, "2");
                        for row in &mut self.grid {
                            row.fill(" ".into());
                        }
                    }
                    'm' => assert!(params.starts_with('0'), "SGR resets first: {params}"),
                    'l' | 'h' => assert_eq!(params, "?25"),
                    other => panic!("unexpected sequence ending in {other}"),
                }
                continue;
            }
            let w = c.to_string().width();
            assert!(
                self.x + w <= self.cols,
                "text runs past the edge at ({}, {})",
                self.x,
                self.y
            );
            self.grid[self.y][self.x] = c.to_string();
            for k in 1..w {
                self.grid[self.y][self.x + k] = String::new();
            }
            self.x += w;
        }
    }

    fn text(&self) -> String {
        self.grid
            .iter()
            .map(|row| row.concat().trim_end().to_string() + "\n")
            .collect()
    }
}

#[test]
fn the_output_redraws_exactly_the_frames_of_each_step() {
    let scene = scene::load(SCENE).unwrap();
    for lang in [Lang::En, Lang::Zh] {
        let (_, events) = parse(&cast(lang, 1.0));
        let mut screen = Screen::new(80, 24);
        let mut step = 0;
        let mut fresh_marker = false;
        for (_, kind, data) in &events {
            if kind == "m" {
                fresh_marker = true;
                continue;
            }
            screen.feed(data);
            // The first output after a marker draws that step as it begins: its still.
            if fresh_marker {
                fresh_marker = false;
                step += 1;
                let want = still(&scene, &options(lang, 1.0), step).unwrap();
                assert_eq!(
                    screen.text(),
                    attnviz::record::still::text(&want),
                    "{lang:?} step {step}"
                );
            }
        }
        // And the last output leaves the screen as the app's final frame.
        let mut player = attnviz::record::Headless::new(&scene, &options(lang, 1.0), true).unwrap();
        player.tick(scene.duration_ms());
        assert_eq!(
            screen.text(),
            attnviz::record::still::text(&player.frame().unwrap())
        );
        assert_eq!(step, scene.steps.len());
    }
}

#[test]
fn asciinema_plays_the_cast() {
    let Ok(out) = Process::new("asciinema").arg("--version").output() else {
        eprintln!(
            "skipping: asciinema is not installed (apt-get install asciinema, or pip install asciinema)"
        );
        return;
    };
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("short.cast");
    std::fs::write(&file, cast(Lang::Zh, 1.0)).unwrap();
    // -i caps idle time and -s speeds up, so the whole cast plays in a moment.
    let played = Process::new("asciinema")
        .args(["play", "-i", "0.01", "-s", "100"])
        .arg(&file)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        played.status.success(),
        "asciinema play failed: {}",
        String::from_utf8_lossy(&played.stderr)
    );
    let shown = String::from_utf8_lossy(&played.stdout);
    assert!(
        shown.contains("两个头。"),
        "asciinema played the cast's output"
    );
    assert!(Path::new(&file).exists());
}
