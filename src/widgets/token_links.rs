//! Where one token looks, in every head at once (BertViz's head view, drawn with bars):
//! the tokens down the left, the selected one marked; beside each key token one coloured
//! cell per head whose strength is that head's weight from the selected token to it, then
//! the key token and a bar of the weight (the focused head's, or the mean over heads).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::Widget;

use super::glyphs::Glyphs;
use super::heat::{ColorDepth, Rgb, adapt};
use super::numfmt::fit_number;
use super::text;

/// Colour of head `h` of `heads`: hues spread around the wheel, bright enough on dark
/// and light backgrounds.
pub fn head_rgb(h: usize, heads: usize) -> Rgb {
    let hue = (h as f64 / heads.max(1) as f64) * 360.0;
    let (s, l) = (0.75, 0.55);
    let c = (1.0 - (2.0 * l - 1.0f64).abs()) * s;
    let hp = hue / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let to = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (to(r), to(g), to(b))
}

fn mix(a: Rgb, b: Rgb, t: f64) -> Rgb {
    let t = t.clamp(0.0, 1.0);
    let f = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * t).round() as u8;
    (f(a.0, b.0), f(a.1, b.1), f(a.2, b.2))
}

pub struct TokenLinks<'a> {
    /// Token texts, as the tokenizer split them (queries and keys are the same tokens).
    pub tokens: &'a [String],
    /// The query token whose attention is shown.
    pub selected: usize,
    /// weights[h][j]: head h's weight from the selected token to key j.
    pub weights: &'a [Vec<f32>],
    /// The head the bars show; None: the mean over heads.
    pub focus_head: Option<usize>,
    /// First token row on screen.
    pub scroll: usize,
    pub depth: ColorDepth,
    /// The background the head colours fade into at weight 0.
    pub background: Rgb,
    pub glyphs: &'a Glyphs,
    pub text: Style,
    pub selected_style: Style,
    pub dim: Style,
}

impl TokenLinks<'_> {
    /// Rows of tokens that fit in `area` (one per line).
    pub fn visible_rows(area: Rect) -> usize {
        area.height as usize
    }

    /// The first row that keeps `selected` visible in `rows` lines, moving from `scroll`.
    pub fn scroll_for(selected: usize, scroll: usize, rows: usize, n: usize) -> usize {
        if rows == 0 || n <= rows {
            return 0;
        }
        let s = if selected < scroll {
            selected
        } else if selected >= scroll + rows {
            selected + 1 - rows
        } else {
            scroll
        };
        s.min(n - rows)
    }

    fn weight(&self, j: usize) -> f32 {
        match self.focus_head {
            Some(h) => self
                .weights
                .get(h)
                .and_then(|w| w.get(j))
                .copied()
                .unwrap_or(0.0),
            None => {
                let n = self.weights.len().max(1) as f32;
                self.weights.iter().filter_map(|w| w.get(j)).sum::<f32>() / n
            }
        }
    }
}

impl Widget for &TokenLinks<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        let n = self.tokens.len();
        let heads = self.weights.len();
        let tok_w = self
            .tokens
            .iter()
            .map(|t| text::width(&self.glyphs.text(&show(t))))
            .max()
            .unwrap_or(1)
            .clamp(3, 16) as u16;
        let cell_w: u16 = if area.width >= tok_w * 2 + 3 * heads as u16 + 20 {
            2
        } else {
            1
        };
        let heads_w = cell_w * heads as u16;
        let num_w: u16 = 6;
        let bar_w = area
            .width
            .saturating_sub(tok_w * 2 + heads_w + num_w + 4)
            .min(30);
        let mono = self.depth == ColorDepth::Mono;
        for (line, j) in (self.scroll..n).take(area.height as usize).enumerate() {
            let y = area.y + line as u16;
            let mut x = area.x;
            // Left column: the query tokens; the selected one marked.
            let left = text::right(
                &self.glyphs.text(&show(&self.tokens[j])),
                tok_w as usize,
                "~",
            );
            let style = if j == self.selected {
                self.selected_style
            } else {
                self.dim
            };
            buf.set_stringn(x, y, &left, tok_w as usize, style);
            x += tok_w;
            let marker = if j == self.selected {
                self.glyphs.text("▶").into_owned()
            } else {
                " ".to_string()
            };
            buf.set_stringn(x, y, format!("{marker} "), 2, self.selected_style);
            x += 2;
            // One cell per head: the head's colour, as strong as its weight to key j.
            for (h, w) in self.weights.iter().enumerate() {
                let v = w.get(j).copied().unwrap_or(0.0).clamp(0.0, 1.0) as f64;
                for dx in 0..cell_w {
                    let cell = &mut buf[(x + h as u16 * cell_w + dx, y)];
                    if mono {
                        cell.set_symbol(self.glyphs.ramp_glyph(v))
                            .set_style(self.text);
                    } else {
                        let rgb = mix(self.background, head_rgb(h, heads), v.sqrt());
                        let mut st = Style::default();
                        if let Some(c) = adapt(self.depth, rgb) {
                            st = st.bg(c);
                        }
                        if self.focus_head == Some(h) && dx == 0 && v >= 0.5 {
                            cell.set_symbol("•");
                        } else {
                            cell.set_symbol(" ");
                        }
                        cell.set_style(st);
                    }
                }
            }
            x += heads_w + 1;
            // The key token and the bar.
            let right = text::left(
                &self.glyphs.text(&show(&self.tokens[j])),
                tok_w as usize,
                "~",
            );
            buf.set_stringn(x, y, &right, tok_w as usize, self.text);
            x += tok_w + 1;
            let w = self.weight(j);
            let num = fit_number(w as f64, num_w as usize - 1, !self.glyphs.ascii);
            buf.set_stringn(
                x,
                y,
                text::right(&num, num_w as usize - 1, ""),
                num_w as usize,
                self.text,
            );
            x += num_w;
            if bar_w > 0 {
                let full = (w.clamp(0.0, 1.0) as f64 * bar_w as f64).round() as usize;
                let bar = self.glyphs.text("█").repeat(full);
                let bar_style = match self.focus_head {
                    Some(h) => adapt(self.depth, head_rgb(h, heads))
                        .map_or(self.text, |c| Style::default().fg(c)),
                    None => self.text.add_modifier(Modifier::BOLD),
                };
                buf.set_stringn(x, y, bar, bar_w as usize, bar_style);
            }
        }
    }
}

/// A token as shown: whitespace made visible so " cat" and "cat" differ.
pub fn show(token: &str) -> String {
    token
        .replace(' ', "␣")
        .replace('\n', "↵")
        .replace('\t', "⇥")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(links: &TokenLinks<'_>, w: u16, h: u16) -> Buffer {
        let area = Rect::new(0, 0, w, h);
        let mut buf = Buffer::empty(area);
        links.render(area, &mut buf);
        buf
    }

    fn row_text(buf: &Buffer, y: u16) -> String {
        (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect()
    }

    #[test]
    fn bars_follow_the_weights_and_the_selection_is_marked() {
        let tokens: Vec<String> = ["The", " cat", " sat"].map(String::from).to_vec();
        let weights = vec![vec![0.9, 0.1, 0.0], vec![0.1, 0.1, 0.8]];
        let glyphs = Glyphs::new(false);
        let links = TokenLinks {
            tokens: &tokens,
            selected: 2,
            weights: &weights,
            focus_head: Some(0),
            scroll: 0,
            depth: ColorDepth::TrueColor,
            background: (0, 0, 0),
            glyphs: &glyphs,
            text: Style::default(),
            selected_style: Style::default(),
            dim: Style::default(),
        };
        let buf = render(&links, 80, 3);
        let rows: Vec<String> = (0..3).map(|y| row_text(&buf, y)).collect();
        assert!(rows[2].contains('▶'), "{rows:?}");
        assert!(rows[1].contains("␣cat"), "{rows:?}");
        let bars = |r: &str| r.matches('█').count();
        assert!(bars(&rows[0]) > bars(&rows[1]), "{rows:?}");
        assert!(rows[0].contains("0.9"), "{rows:?}");
        // Head 1's cell (after the 4-column tokens, the marker and head 0's 2 cells) is
        // brighter on row 2, where its weight is 0.8, than on row 0 (0.1).
        let luma = |y: u16| match buf[(4 + 2 + 2, y)].bg {
            ratatui::style::Color::Rgb(r, g, b) => r as u32 + g as u32 + b as u32,
            other => panic!("no colour: {other:?}"),
        };
        assert!(luma(2) > luma(0));
        let mean = TokenLinks {
            focus_head: None,
            ..links
        };
        let buf = render(&mean, 80, 3);
        assert!(row_text(&buf, 2).contains("0.4"), "{}", row_text(&buf, 2));
    }

    #[test]
    fn scrolling_keeps_the_selection_in_view() {
        assert_eq!(TokenLinks::scroll_for(0, 0, 10, 5), 0);
        assert_eq!(TokenLinks::scroll_for(50, 0, 10, 100), 41);
        assert_eq!(TokenLinks::scroll_for(3, 41, 10, 100), 3);
        assert_eq!(TokenLinks::scroll_for(99, 95, 10, 100), 90);
    }

    #[test]
    fn head_colours_differ() {
        let c: Vec<Rgb> = (0..9).map(|h| head_rgb(h, 9)).collect();
        for i in 0..9 {
            for j in i + 1..9 {
                assert_ne!(c[i], c[j]);
            }
        }
    }
}
