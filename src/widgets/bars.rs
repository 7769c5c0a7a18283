//! Horizontal bars with a label and the value written beside them, drawn with eighth
//! blocks (or `#` in ASCII mode). Negative values are drawn with their magnitude.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::widgets::Widget;

use super::glyphs::Glyphs;
use super::numfmt::fit_number;
use super::text;

pub struct HBars<'a> {
    /// (label, value, style of the bar).
    pub items: &'a [(String, f64, Style)],
    /// The value of a full-width bar; the largest magnitude if None.
    pub max: Option<f64>,
    pub glyphs: &'a Glyphs,
    pub label: Style,
    /// Width of the number after each bar.
    pub value_w: u16,
}

impl Widget for &HBars<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        if area.is_empty() {
            return;
        }
        let label_w = self
            .items
            .iter()
            .map(|(l, _, _)| text::width(l))
            .max()
            .unwrap_or(0)
            .min(area.width as usize / 3) as u16;
        let max = self.max.unwrap_or_else(|| {
            self.items
                .iter()
                .map(|(_, v, _)| v.abs())
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
        });
        let bar_w = area.width.saturating_sub(label_w + 2 + self.value_w) as usize;
        for (row, (label, v, style)) in self.items.iter().enumerate().take(area.height as usize) {
            let y = area.y + row as u16;
            let l = text::right(label, label_w as usize, self.glyphs.ellipsis);
            buf.set_stringn(area.x, y, l, label_w as usize, self.label);
            let frac = if max > 0.0 && v.is_finite() {
                (v.abs() / max).min(1.0)
            } else {
                0.0
            };
            let eighths = (frac * bar_w as f64 * 8.0).round() as usize;
            let mut bar = self.glyphs.eighths[7].repeat(eighths / 8);
            if !eighths.is_multiple_of(8) {
                bar.push_str(self.glyphs.eighths[eighths % 8 - 1]);
            }
            let x = area.x + label_w + 1;
            buf.set_stringn(x, y, &bar, bar_w, *style);
            let num = fit_number(*v, self.value_w as usize, !self.glyphs.ascii);
            let nx = x + text::width(&bar) as u16 + 1;
            buf.set_stringn(nx, y, num, self.value_w as usize, self.label);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_largest_value() {
        let items = vec![
            ("a".to_string(), 1.0, Style::default()),
            ("b".to_string(), 0.5, Style::default()),
        ];
        let bars = HBars {
            items: &items,
            max: None,
            glyphs: &Glyphs::ASCII,
            label: Style::default(),
            value_w: 4,
        };
        let mut buf = Buffer::empty(Rect::new(0, 0, 17, 2));
        (&bars).render(buf.area, &mut buf);
        let line = |y: u16| {
            (0..17)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        };
        assert_eq!(line(0), "a ########## 1.00");
        assert_eq!(line(1), "b ##### 0.50     ");
    }
}
