//! An asciicast v2 writer with exact, caller-given timing.
//!
//! Format (<https://docs.asciinema.org/manual/asciicast/v2/>): one header line of JSON
//! (`version`, `width`, `height`, ...), then one JSON array per event: `[time, "o",
//! data]` for output and `[time, "m", label]` for a marker. Times are seconds since the
//! start. We take them as whole milliseconds of a virtual clock and print them with
//! integer arithmetic, and the header has no timestamp, so a recording is the same bytes
//! on every run and every machine.

use std::io::{self, Write};

/// The header line's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CastHeader {
    pub width: u16,
    pub height: u16,
    pub title: Option<String>,
}

#[derive(serde::Serialize)]
struct HeaderJson<'a> {
    version: u8,
    width: u16,
    height: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    env: EnvJson,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
struct EnvJson {
    /// The escape sequences we emit (SGR 256-colour and truecolour) are xterm's.
    term: &'static str,
}

pub struct CastWriter<W: Write> {
    out: W,
    last_ms: u64,
}

impl<W: Write> CastWriter<W> {
    /// Write the header line and return a writer positioned at time 0.
    pub fn new(mut out: W, header: &CastHeader) -> io::Result<Self> {
        // A player prints the title as it is: control characters in it would reach the
        // viewer's terminal.
        let title = header
            .title
            .as_deref()
            .map(crate::widgets::text::escape_controls);
        let json = HeaderJson {
            version: 2,
            width: header.width,
            height: header.height,
            title: title.as_deref(),
            env: EnvJson {
                term: "xterm-256color",
            },
        };
        serde_json::to_writer(&mut out, &json)?;
        out.write_all(b"\n")?;
        Ok(CastWriter { out, last_ms: 0 })
    }

    /// Terminal output at `at_ms`. Empty output is not written.
    pub fn output(&mut self, at_ms: u64, data: &str) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.event(at_ms, "o", data)
    }

    /// A marker (a chapter a player can jump to) at `at_ms`.
    pub fn marker(&mut self, at_ms: u64, label: &str) -> io::Result<()> {
        self.event(at_ms, "m", label)
    }

    fn event(&mut self, at_ms: u64, code: &str, data: &str) -> io::Result<()> {
        // Players expect times that never go backwards.
        let at_ms = at_ms.max(self.last_ms);
        self.last_ms = at_ms;
        write!(self.out, "[{}, \"{code}\", ", seconds(at_ms))?;
        serde_json::to_writer(&mut self.out, data)?;
        self.out.write_all(b"]\n")
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Milliseconds as seconds with three decimals, without going through a float.
fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_then_events_with_exact_times() {
        let header = CastHeader {
            width: 80,
            height: 24,
            title: Some("t \"q\"".into()),
        };
        let mut w = CastWriter::new(Vec::new(), &header).unwrap();
        w.output(0, "\u{1b}[1mhi\r\n").unwrap();
        w.marker(1500, "step 2").unwrap();
        w.output(1500, "").unwrap();
        w.output(1200, "late").unwrap();
        let text = String::from_utf8(w.into_inner()).unwrap();
        assert_eq!(
            text,
            "{\"version\":2,\"width\":80,\"height\":24,\"title\":\"t \\\"q\\\"\",\"env\":{\"TERM\":\"xterm-256color\"}}\n\
             [0.000, \"o\", \"\\u001b[1mhi\\r\\n\"]\n\
             [1.500, \"m\", \"step 2\"]\n\
             [1.500, \"o\", \"late\"]\n"
        );
        for line in text.lines() {
            serde_json::from_str::<serde_json::Value>(line).expect("every line is JSON");
        }
    }

    #[test]
    fn control_characters_in_the_title_are_escaped() {
        let header = CastHeader {
            width: 80,
            height: 24,
            title: Some("evil\u{1b}]0;pwned\u{7}\u{9b}31m\ttab".into()),
        };
        let text =
            String::from_utf8(CastWriter::new(Vec::new(), &header).unwrap().into_inner()).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        let title = v["title"].as_str().unwrap();
        assert!(!title.chars().any(char::is_control), "{title:?}");
        assert_eq!(title, "evil\\u{1b}]0;pwned\\u{7}\\u{9b}31m tab");
    }

    #[test]
    fn seconds_are_exact() {
        assert_eq!(seconds(0), "0.000");
        assert_eq!(seconds(7), "0.007");
        assert_eq!(seconds(61_250), "61.250");
    }
}
