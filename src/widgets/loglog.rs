//! A chart with logarithmic axes, drawn in character cells: each series is a marker per
//! point joined by a dotted line, x ticks at powers of two, y ticks at powers of ten.
//! Series are told apart by their marker as well as their style, so the chart reads the
//! same without colour (NO_COLOR, `--theme mono`) and in ASCII mode.
//!
//! On log axes a power law is a straight line whose slope is its exponent: O(n) rises
//! one decade per decade of n, O(n^2) two, which is the point of drawing time and
//! memory this way.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use super::glyphs::Glyphs;
use super::text;

/// One line of the chart. Points with a non-positive or non-finite coordinate cannot be
/// placed on a log axis and are left out.
pub struct Series<'a> {
    pub name: &'a str,
    /// (x, y), in the order they are joined.
    pub points: &'a [(f64, f64)],
    pub marker: &'a str,
    pub style: Style,
}

pub struct LogLogChart<'a> {
    pub title: &'a str,
    pub series: &'a [Series<'a>],
    /// The x extent (both > 0); widened to whole powers of two.
    pub x_range: (f64, f64),
    /// The y extent; from the points when None. Widened to whole decades.
    pub y_range: Option<(f64, f64)>,
    /// How a tick value is written, e.g. 4096 -> "4k", 0.01 -> "10 us".
    pub x_tick: fn(f64) -> String,
    pub y_tick: fn(f64) -> String,
    pub glyphs: &'a Glyphs,
    pub title_style: Style,
    pub axis: Style,
    pub label: Style,
    /// Shown in the plot when no series has a point.
    pub empty: &'a str,
}

/// The plot's cells and how values map onto them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChartGeometry {
    /// The cells inside the axes.
    pub plot: Rect,
    /// log2 of the x extent.
    pub lx: (f64, f64),
    /// log10 of the y extent.
    pub ly: (f64, f64),
}

impl ChartGeometry {
    /// The cell of a value, if it is inside the extent.
    pub fn cell(&self, x: f64, y: f64) -> Option<(u16, u16)> {
        if !(x > 0.0 && y > 0.0 && x.is_finite() && y.is_finite()) || self.plot.is_empty() {
            return None;
        }
        let fx = (x.log2() - self.lx.0) / (self.lx.1 - self.lx.0);
        let fy = (y.log10() - self.ly.0) / (self.ly.1 - self.ly.0);
        if !(-1e-9..=1.0 + 1e-9).contains(&fx) || !(-1e-9..=1.0 + 1e-9).contains(&fy) {
            return None;
        }
        let col = (fx * (self.plot.width - 1) as f64).round() as u16;
        let row = (fy * (self.plot.height - 1) as f64).round() as u16;
        Some((self.plot.x + col, self.plot.bottom() - 1 - row))
    }
}

fn decades(lo: f64, hi: f64) -> (f64, f64) {
    let a = lo.log10().floor();
    let b = hi.log10().ceil();
    if b > a { (a, b) } else { (a, a + 1.0) }
}

fn octaves(lo: f64, hi: f64) -> (f64, f64) {
    let a = lo.log2().floor();
    let b = hi.log2().ceil();
    if b > a { (a, b) } else { (a, a + 1.0) }
}

impl LogLogChart<'_> {
    fn y_extent(&self) -> Option<(f64, f64)> {
        self.y_range.or_else(|| {
            let ys = self
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
                .filter(|y| *y > 0.0 && y.is_finite());
            let (lo, hi) = ys.fold((f64::INFINITY, 0.0f64), |(lo, hi), y| {
                (lo.min(y), hi.max(y))
            });
            (hi > 0.0).then_some((lo, hi))
        })
    }

    /// Where the plot goes inside `area` (a title row on top, x labels below, y labels
    /// on the left).
    pub fn geometry(&self, area: Rect) -> ChartGeometry {
        let ly = self
            .y_extent()
            .map_or((0.0, 1.0), |(lo, hi)| decades(lo, hi));
        let lx = octaves(
            self.x_range.0.max(f64::MIN_POSITIVE),
            self.x_range.1.max(1.0),
        );
        let gutter = (ly.0 as i32..=ly.1 as i32)
            .map(|e| text::width(&(self.y_tick)(10f64.powi(e))))
            .max()
            .unwrap_or(1) as u16
            + 1;
        let plot = Rect::new(
            area.x + gutter + 1,
            area.y + 1,
            area.width.saturating_sub(gutter + 2),
            area.height.saturating_sub(3),
        );
        ChartGeometry { plot, lx, ly }
    }
}

impl Widget for &LogLogChart<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.height < 5 || area.width < 20 {
            return;
        }
        let g = self.geometry(area);
        let p = g.plot;
        let (ascii, glyphs) = (self.glyphs.ascii, self.glyphs);

        // Title, then the series' markers as the legend.
        let mut x = area.x;
        let title = text::fit(
            &glyphs.text(self.title),
            area.width as usize,
            glyphs.ellipsis,
        );
        buf.set_stringn(x, area.y, &title, area.width as usize, self.title_style);
        x += text::width(&title) as u16 + 2;
        for s in self.series {
            let entry = format!("{} {}", s.marker, s.name);
            let w = text::width(&entry) as u16;
            if x + w > area.right() {
                break;
            }
            buf.set_stringn(x, area.y, s.marker, 1, s.style);
            buf.set_stringn(x + 2, area.y, s.name, w as usize, self.label);
            x += w + 2;
        }

        // Axes.
        let (vert, horiz, corner, ytick, xtick) = if ascii {
            ("|", "-", "+", "+", "+")
        } else {
            ("│", "─", "└", "┤", "┬")
        };
        let axis_x = p.x - 1;
        let axis_y = p.bottom();
        for y in p.y..axis_y {
            buf.set_stringn(axis_x, y, vert, 1, self.axis);
        }
        for x in p.x..p.right() {
            buf.set_stringn(x, axis_y, horiz, 1, self.axis);
        }
        buf.set_stringn(axis_x, axis_y, corner, 1, self.axis);

        // y ticks at every decade that has a row of its own.
        let mut last_row = u16::MAX;
        for e in (g.ly.0 as i32..=g.ly.1 as i32).rev() {
            let v = 10f64.powi(e);
            let Some((_, row)) = g.cell(g_x_first(&g), v) else {
                continue;
            };
            if row == last_row {
                continue;
            }
            last_row = row;
            let label = (self.y_tick)(v);
            let w = text::width(&label) as u16;
            buf.set_stringn(
                axis_x.saturating_sub(w + 1),
                row,
                &label,
                w as usize,
                self.label,
            );
            buf.set_stringn(axis_x, row, ytick, 1, self.axis);
        }

        // x ticks at powers of two, as many as their labels leave room for.
        let ticks: Vec<f64> = (g.lx.0 as i32..=g.lx.1 as i32)
            .map(|e| 2f64.powi(e))
            .collect();
        let widest = ticks
            .iter()
            .map(|&v| text::width(&(self.x_tick)(v)))
            .max()
            .unwrap_or(1) as u16;
        let per = (p.width as usize / ticks.len().max(1)).max(1) as u16;
        let every = (widest + 1).div_ceil(per).max(1) as usize;
        let mut free_from = area.x;
        for (k, &v) in ticks.iter().enumerate() {
            if k % every != 0 {
                continue;
            }
            let Some((col, _)) = g.cell(v, 10f64.powf(g.ly.0)) else {
                continue;
            };
            buf.set_stringn(col, axis_y, xtick, 1, self.axis);
            let label = (self.x_tick)(v);
            let w = text::width(&label) as u16;
            let lx = col.saturating_sub(w / 2).max(free_from);
            if lx + w <= area.right() && axis_y + 1 < area.bottom() {
                buf.set_stringn(lx, axis_y + 1, &label, w as usize, self.label);
                free_from = lx + w + 1;
            }
        }

        // Lines first, markers over them.
        let dot = if ascii { "." } else { "·" };
        let mut any = false;
        for s in self.series {
            let cells: Vec<(u16, u16)> =
                s.points.iter().filter_map(|&(x, y)| g.cell(x, y)).collect();
            any |= !cells.is_empty();
            for w in cells.windows(2) {
                let (a, b) = (w[0], w[1]);
                let steps = a.0.abs_diff(b.0).max(a.1.abs_diff(b.1));
                for k in 1..steps {
                    let t = k as f64 / steps as f64;
                    let cx = (a.0 as f64 + t * (b.0 as f64 - a.0 as f64)).round() as u16;
                    let cy = (a.1 as f64 + t * (b.1 as f64 - a.1 as f64)).round() as u16;
                    buf.set_stringn(cx, cy, dot, 1, s.style);
                }
            }
        }
        for s in self.series {
            for &(x, y) in s.points {
                if let Some((cx, cy)) = g.cell(x, y) {
                    buf.set_stringn(cx, cy, s.marker, 1, s.style);
                }
            }
        }
        if !any && !self.empty.is_empty() {
            for (i, line) in text::wrap(self.empty, p.width.saturating_sub(2) as usize)
                .iter()
                .enumerate()
                .take(p.height as usize)
            {
                let y = p.y + p.height / 2 + i as u16;
                if y < p.bottom() {
                    buf.set_stringn(p.x + 1, y, line, p.width as usize, self.label);
                }
            }
        }
    }
}

/// The smallest x on the chart (to place y ticks, whose column does not matter).
fn g_x_first(g: &ChartGeometry) -> f64 {
    2f64.powf(g.lx.0)
}

/// n with a k / M suffix for powers of two: 256, 1k, 16k, 128k, 1M.
pub fn count_tick(v: f64) -> String {
    let v = v.round() as u64;
    if v >= 1 << 20 && v.is_multiple_of(1 << 20) {
        format!("{}M", v >> 20)
    } else if v >= 1024 && v.is_multiple_of(1024) {
        format!("{}k", v >> 10)
    } else {
        v.to_string()
    }
}

/// Milliseconds as a decade label: 1us, 10us, 100us, 1ms, 10ms, 100ms, 1s, 10s, 100s.
pub fn ms_tick(ms: f64) -> String {
    let e = ms.log10().round() as i32;
    match e {
        i32::MIN..=-4 => format!("{ms:.0e}ms"),
        -3 => "1us".into(),
        -2 => "10us".into(),
        -1 => "100us".into(),
        0 => "1ms".into(),
        1 => "10ms".into(),
        2 => "100ms".into(),
        3 => "1s".into(),
        4 => "10s".into(),
        5 => "100s".into(),
        _ => format!("{:.0}s", ms / 1e3),
    }
}

/// Bytes as a decade label: 1kB, 10kB, 100kB, 1MB, ..., 1TB.
pub fn bytes_tick(b: f64) -> String {
    let e = b.log10().round() as i32;
    let units = ["B", "kB", "MB", "GB", "TB", "PB"];
    if e < 0 {
        return format!("{b:.0e}B");
    }
    let unit = (e / 3).min(units.len() as i32 - 1);
    let mant = 10f64.powi(e - unit * 3);
    format!("{mant:.0}{}", units[unit as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart<'a>(series: &'a [Series<'a>], glyphs: &'a Glyphs) -> LogLogChart<'a> {
        LogLogChart {
            title: "time",
            series,
            x_range: (256.0, 4096.0),
            y_range: None,
            x_tick: count_tick,
            y_tick: ms_tick,
            glyphs,
            title_style: Style::default(),
            axis: Style::default(),
            label: Style::default(),
            empty: "nothing yet",
        }
    }

    fn screen(buf: &Buffer) -> Vec<String> {
        (0..buf.area.height)
            .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect())
            .collect()
    }

    #[test]
    fn a_power_law_is_a_straight_line_from_corner_to_corner() {
        // y = n^2 / 65536 ms: 1 ms at 256, 256 ms at 4096; the y extent 1..1000 ms.
        let pts: Vec<(f64, f64)> = [256.0, 512.0, 1024.0, 2048.0, 4096.0]
            .iter()
            .map(|&n: &f64| (n, n * n / 65536.0))
            .collect();
        let series = [Series {
            name: "n^2",
            points: &pts,
            marker: "o",
            style: Style::default(),
        }];
        let g = Glyphs::ASCII;
        let c = chart(&series, &g);
        let area = Rect::new(0, 0, 40, 12);
        let geo = c.geometry(area);
        assert_eq!((geo.lx, geo.ly), ((8.0, 12.0), (0.0, 3.0)));
        // The first point sits on the bottom-left corner of the plot.
        assert_eq!(
            geo.cell(256.0, 1.0),
            Some((geo.plot.x, geo.plot.bottom() - 1))
        );
        let mut buf = Buffer::empty(area);
        (&c).render(area, &mut buf);
        let lines = screen(&buf);
        assert!(lines[0].starts_with("time  o n^2"), "{lines:#?}");
        assert!(lines.iter().all(|l| l.is_ascii()));
        let markers = lines.iter().map(|l| l.matches('o').count()).sum::<usize>();
        assert_eq!(
            markers,
            5 + 1,
            "five points and the legend's marker: {lines:#?}"
        );
        assert!(lines[lines.len() - 1].contains("256") && lines[lines.len() - 1].contains("4k"));
        assert!(lines.iter().any(|l| l.starts_with("   1s +")), "{lines:#?}");
    }

    #[test]
    fn an_empty_chart_says_so() {
        let series: [Series; 0] = [];
        let g = Glyphs::UNICODE;
        let c = chart(&series, &g);
        let area = Rect::new(0, 0, 40, 10);
        let mut buf = Buffer::empty(area);
        (&c).render(area, &mut buf);
        assert!(screen(&buf).iter().any(|l| l.contains("nothing yet")));
    }

    #[test]
    fn tick_labels() {
        assert_eq!(count_tick(131_072.0), "128k");
        assert_eq!(count_tick(256.0), "256");
        assert_eq!(ms_tick(0.01), "10us");
        assert_eq!(ms_tick(1000.0), "1s");
        assert_eq!(bytes_tick(1e6), "1MB");
        assert_eq!(bytes_tick(1e10), "10GB");
        assert_eq!(bytes_tick(100.0), "100B");
    }
}
