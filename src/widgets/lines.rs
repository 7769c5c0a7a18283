//! Lines of styled text written top-down into an area, wrapped or cut to its width;
//! what does not fit below is dropped. The building block of the views' text panels.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::text;

pub struct LineWriter<'b> {
    pub area: Rect,
    /// The next row to write.
    pub y: u16,
    pub buf: &'b mut Buffer,
}

impl<'b> LineWriter<'b> {
    pub fn new(area: Rect, buf: &'b mut Buffer) -> LineWriter<'b> {
        LineWriter {
            area,
            y: area.y,
            buf,
        }
    }

    /// Rows left below the next one to write.
    pub fn rows_left(&self) -> u16 {
        self.area.bottom().saturating_sub(self.y)
    }

    /// One line of spans, cut at the area's width.
    pub fn line(&mut self, spans: Vec<Span>) {
        if self.y < self.area.bottom() {
            Line::from(spans).render(Rect::new(self.area.x, self.y, self.area.width, 1), self.buf);
            self.y += 1;
        }
    }

    /// Text wrapped at the area's width, every line in `style`.
    pub fn text(&mut self, s: &str, style: Style) {
        for piece in text::wrap(s, self.area.width.max(1) as usize) {
            self.line(vec![Span::styled(piece, style)]);
        }
    }

    pub fn blank(&mut self) {
        if self.y < self.area.bottom() {
            self.y += 1;
        }
    }

    /// The next `h` rows (fewer if the area ends) as an area of their own; the writer
    /// continues below them.
    pub fn take(&mut self, h: u16) -> Rect {
        let h = h.min(self.rows_left());
        let r = Rect::new(self.area.x, self.y, self.area.width, h);
        self.y += h;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_stops_at_the_bottom() {
        let area = Rect::new(0, 0, 10, 2);
        let mut buf = Buffer::empty(area);
        let mut w = LineWriter::new(area, &mut buf);
        w.text("one two three four", Style::default());
        assert_eq!(w.rows_left(), 0);
        w.line(vec![Span::raw("dropped")]);
        let row = |y| (0..10).map(|x| buf[(x, y)].symbol()).collect::<String>();
        assert_eq!(row(0), "one two   ");
        assert_eq!(row(1), "three four");
    }
}
