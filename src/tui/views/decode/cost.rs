//! The lower band of the decode view: what each step cost with the cache against
//! recomputing the prefix, and the KV-head groups with their cache size and how far the
//! output moves from the lesson's own K/V.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Widget;

use super::lab::{CACHE_DTYPE, DecodeLab, label};
use crate::engine::memory::{decimal_bytes, group_digits};
use crate::tui::context::Context;
use crate::widgets::HBars;
use crate::widgets::lines::LineWriter;
use crate::widgets::numfmt::fit_number;

fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".to_string()
    } else {
        format!("{:.1}x", a as f64 / b as f64)
    }
}

pub(super) fn render_cost(
    state: &Context,
    lab: &DecodeLab,
    t: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    let th = &state.theme;
    let steps = &lab.decoding.steps;
    let step = &steps[t];
    let sh = &lab.decoding.shape;
    let so_far_cached: u64 = steps[..=t].iter().map(|s| s.cached_madds).sum();
    let so_far_recompute: u64 = steps[..=t].iter().map(|s| s.recompute_madds).sum();
    let (total_c, total_r) = (
        lab.decoding.total_cached_madds(),
        lab.decoding.total_recompute_madds(),
    );
    let check = match step.recompute_max_abs_diff {
        Some(d) => format!("recomputed here too: max|diff| {}", sci(d)),
        None => "recomputation counted, not rerun at this size".into(),
    };
    let mut w = LineWriter::new(area, buf);
    if area.height < 8 {
        // Short screens: the figures alone.
        w.line(vec![
            Span::styled("step ", th.panel_title),
            Span::styled(group_digits(step.cached_madds), th.good),
            Span::styled(" / ", th.dim),
            Span::styled(
                format!(
                    "{} recomputed ({})",
                    group_digits(step.recompute_madds),
                    ratio(step.recompute_madds, step.cached_madds)
                ),
                th.warn,
            ),
        ]);
        w.line(vec![Span::styled(
            format!(
                "so far {} / {}, all {} / {}",
                group_digits(so_far_cached),
                group_digits(so_far_recompute),
                group_digits(total_c),
                group_digits(total_r),
            ),
            th.base,
        )]);
        w.text(&check, th.dim);
        return;
    }
    let visible = lab.layout.visible(t);
    w.line(vec![Span::styled("cost in multiply-adds", th.panel_title)]);
    w.text(
        &format!(
            "cached: {} heads x {visible} key{} x ({} + {}) = {}, O(t d)",
            sh.heads,
            if visible == 1 { "" } else { "s" },
            sh.d,
            sh.dv,
            group_digits(step.cached_madds)
        ),
        th.good,
    );
    w.text(
        &format!(
            "no cache: all {} row{} again = {} ({}), O(t^2 d)",
            t + 1,
            if t == 0 { "" } else { "s" },
            group_digits(step.recompute_madds),
            ratio(step.recompute_madds, step.cached_madds)
        ),
        th.warn,
    );
    w.text(&check, th.dim);
    w.text(
        &format!(
            "so far {} / {} ({}), sentence {} / {} ({})",
            group_digits(so_far_cached),
            group_digits(so_far_recompute),
            ratio(so_far_recompute, so_far_cached),
            group_digits(total_c),
            group_digits(total_r),
            ratio(total_r, total_c)
        ),
        th.base,
    );
    // One bar per step: the cached part solid, the rest of the recomputation shaded.
    let rows = w.rows_left() as usize;
    let first = (t + 1).saturating_sub(rows);
    let max = steps[t].recompute_madds.max(1) as f64;
    let num_w = group_digits(steps[t].recompute_madds).len();
    for (r, st) in steps.iter().enumerate().take(t + 1).skip(first) {
        let row = w.take(1);
        render_step_bar(
            state,
            lab,
            r,
            st.cached_madds,
            st.recompute_madds,
            max,
            num_w,
            row,
            w.buf,
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn render_step_bar(
    state: &Context,
    lab: &DecodeLab,
    r: usize,
    cached: u64,
    recompute: u64,
    max: f64,
    num_w: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    let th = &state.theme;
    let g = &state.glyphs;
    let name = crate::widgets::text::fit(&label(&lab.tokens, r), 6, g.ellipsis);
    let head = format!("{r:>3} {name:<6} ");
    let tail = format!(
        " {:>num_w$} / {:>num_w$}",
        group_digits(cached),
        group_digits(recompute)
    );
    let bar_w = (area.width as usize).saturating_sub(head.len() + tail.len());
    let solid = ((cached as f64 / max) * bar_w as f64).round() as usize;
    let total = ((recompute as f64 / max) * bar_w as f64)
        .round()
        .max(solid as f64) as usize;
    let shade = if g.ascii { ":" } else { "░" };
    let spans = vec![
        Span::styled(head, th.label),
        Span::styled(g.eighths[7].repeat(solid.max(1)), th.good),
        Span::styled(shade.repeat(total.saturating_sub(solid.max(1))), th.warn),
        Span::styled(" ".repeat(bar_w.saturating_sub(total.max(1))), th.base),
        Span::styled(tail, th.dim),
    ];
    LineWriter::new(area, buf).line(spans);
}

fn sci(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() < 1e-3 {
        format!("{x:.1e}")
    } else {
        fit_number(x, 6, true)
    }
}

pub(super) fn render_groups(
    state: &Context,
    lab: &DecodeLab,
    h: usize,
    area: Rect,
    buf: &mut Buffer,
) {
    let th = &state.theme;
    let c = &lab.groups.choices[lab.choice];
    let mha = lab.groups.choices.last().expect("MHA is always a choice");
    let heads = lab.groups.heads;
    let dtype = crate::engine::memory::dtype_name(CACHE_DTYPE);
    let baseline = if lab.inputs.kv_heads() == heads {
        "MHA"
    } else {
        "the lesson's KV heads"
    };
    let mut w = LineWriter::new(area, buf);
    w.line(vec![
        Span::styled(
            format!(
                "{} KV head{} of {heads}: {}",
                c.kv_heads,
                if c.kv_heads == 1 { "" } else { "s" },
                c.sharing.name()
            ),
            th.panel_title,
        ),
        Span::styled(
            format!(
                "  {} query head{} per K/V",
                c.group_size,
                if c.group_size == 1 { "" } else { "s" }
            ),
            th.dim,
        ),
    ]);
    // Which query heads read which K/V head, each group in its colour.
    let mut spans = Vec::new();
    for (g, qs) in c.query_heads_of.iter().enumerate() {
        let list: Vec<String> = qs.iter().map(|q| (q + 1).to_string()).collect();
        let mut style = th.group(g);
        if qs.contains(&h) {
            style = style.add_modifier(th.highlight);
        }
        spans.push(Span::styled(
            format!(
                "kv{}{}q{}",
                g + 1,
                if state.glyphs.ascii { "<-" } else { "←" },
                list.join(",")
            ),
            style,
        ));
        spans.push(Span::raw(" "));
    }
    w.line(spans);
    if area.height < 8 {
        w.line(vec![Span::styled(
            format!(
                "cache {} {dtype} (MHA {})",
                decimal_bytes(c.cache_bytes),
                decimal_bytes(mha.cache_bytes),
            ),
            th.base,
        )]);
        w.line(vec![Span::styled(
            format!("out vs {baseline}: max|diff| {}", sci(c.max_abs_diff)),
            th.base,
        )]);
        return;
    }
    w.text(
        &format!(
            "cache, one layer: {} tokens x {} x ({} + {}) x {} B {dtype} = {}",
            lab.groups.n,
            c.kv_heads,
            lab.groups.d,
            lab.groups.dv,
            CACHE_DTYPE.bytes(),
            decimal_bytes(c.cache_bytes),
        ),
        th.base,
    );
    w.text(
        &format!(
            "out vs {baseline}: max|diff| {}, relative {} (K/V pooled)",
            sci(c.max_abs_diff),
            sci(c.rel_diff)
        ),
        if c.max_abs_diff == 0.0 {
            th.good
        } else {
            th.warn
        },
    );
    // Every choice at once, the current one marked.
    if w.rows_left() as usize > lab.groups.choices.len() + 1 {
        w.line(vec![Span::styled(
            format!(
                "  {:>4} {:<4} {:>10} {:>8} {:>10} {:>9}",
                "KV", "", "cache", "vs MHA", "max|diff|", "relative"
            ),
            th.label,
        )]);
        for (k, ch) in lab.groups.choices.iter().enumerate().rev() {
            let mark = if k == lab.choice {
                state.glyphs.marker
            } else {
                " "
            };
            let style = if k == lab.choice {
                th.field_value
            } else {
                th.base
            };
            w.line(vec![Span::styled(
                format!(
                    "{mark} {:>4} {:<4} {:>10} {:>8} {:>10} {:>9}",
                    ch.kv_heads,
                    ch.sharing.name(),
                    decimal_bytes(ch.cache_bytes),
                    format!("1/{}", mha.cache_bytes / ch.cache_bytes.max(1)),
                    sci(ch.max_abs_diff),
                    sci(ch.rel_diff)
                ),
                style,
            )]);
        }
    }
    let rows = w.rows_left() as usize;
    if rows > 0 {
        let items: Vec<(String, f64, Style)> = c
            .head_max_abs_diff
            .iter()
            .enumerate()
            .map(|(q, d)| (format!("q{} |diff|", q + 1), *d, th.group(c.kv_head_of[q])))
            .collect();
        // A window of heads around the selected one when not all fit.
        let first = h
            .saturating_sub(rows.saturating_sub(1) / 2)
            .min(items.len().saturating_sub(rows));
        let shown: Vec<_> = items.iter().skip(first).take(rows).cloned().collect();
        // One scale for every choice: MQA moves the output most.
        let max = lab
            .groups
            .choices
            .iter()
            .flat_map(|ch| ch.head_max_abs_diff.iter().copied())
            .fold(0.0, f64::max);
        let area = w.take(rows as u16);
        (&HBars {
            items: &shown,
            max: (max > 0.0).then_some(max),
            glyphs: &state.glyphs,
            label: th.label,
            value_w: 6,
        })
            .render(area, w.buf);
    }
}
