//! What is wrong with a scene file, and where: `file:line:column: field: message`.

use std::fmt;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One thing wrong with a scene file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line of the offending key or value.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// Dotted path of the field, e.g. `model.heads` or `steps[3].highlight[0]`; empty
    /// when the problem is the file as a whole (e.g. a TOML syntax error).
    pub field: String,
    pub message: String,
}

/// Every problem found in one scene file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SceneError {
    /// The file as the user named it (or `builtin:NAME`).
    pub file: String,
    pub problems: Vec<Problem>,
}

/// Problems a report shows; the rest are counted (a file with thousands of errors
/// would otherwise bury the first, which is usually the cause of the others).
pub const MAX_REPORTED: usize = 50;

impl fmt::Display for SceneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().take(MAX_REPORTED).enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}:{}:{}: ", self.file, p.line, p.column)?;
            if !p.field.is_empty() {
                write!(f, "{}: ", p.field)?;
            }
            f.write_str(&p.message)?;
        }
        let rest = self.problems.len().saturating_sub(MAX_REPORTED);
        if rest > 0 {
            write!(
                f,
                "\n{}: ... and {rest} more problem{} (the first {MAX_REPORTED} are shown)",
                self.file,
                if rest == 1 { "" } else { "s" }
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for SceneError {}

impl From<SceneError> for crate::Error {
    fn from(e: SceneError) -> Self {
        crate::Error::usage(e.to_string())
    }
}

/// 1-based (line, column) of a byte offset; the column counts characters, as editors do.
pub fn line_column(src: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(src.len());
    while !src.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// A problem found, at a byte offset; line and column are worked out once, for all
/// problems together, in [`Problems::into_error`].
struct Found {
    offset: usize,
    field: String,
    message: String,
}

/// Collects problems against one source text. Finding line and column costs a pass
/// over the text, so it is done once for all problems, not once per problem: checking a
/// file takes time linear in its size however many problems it has.
pub struct Problems<'a> {
    src: &'a str,
    list: Vec<Found>,
}

impl<'a> Problems<'a> {
    pub fn new(src: &'a str) -> Self {
        Problems {
            src,
            list: Vec::new(),
        }
    }

    /// Record a problem at a byte span of the source.
    pub fn at(&mut self, span: Range<usize>, field: impl Into<String>, message: impl Into<String>) {
        self.list.push(Found {
            offset: span.start.min(self.src.len()),
            field: field.into(),
            message: message.into(),
        });
    }

    /// Record a problem at the value a [`Spanned`] came from.
    pub fn on<T>(&mut self, value: &Spanned<T>, field: impl Into<String>, msg: impl Into<String>) {
        self.at(value.span(), field, msg);
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The problems in the order of the file.
    pub fn into_error(mut self, file: &str) -> SceneError {
        // Stable: problems at one place keep the order the checks found them in.
        self.list.sort_by_key(|p| p.offset);
        let mut problems = Vec::with_capacity(self.list.len());
        let (mut line, mut column, mut at) = (1, 1, 0);
        for found in self.list {
            // Walk on from the previous problem to this one (offsets only grow).
            let mut offset = found.offset;
            while !self.src.is_char_boundary(offset) {
                offset -= 1;
            }
            for c in self.src[at..offset].chars() {
                if c == '\n' {
                    line += 1;
                    column = 1;
                } else {
                    column += 1;
                }
            }
            at = offset.max(at);
            problems.push(Problem {
                line,
                column,
                field: found.field,
                message: found.message,
            });
        }
        SceneError {
            file: file.to_string(),
            problems,
        }
    }
}

/// Turn a TOML syntax or serde error into a [`Problem`]. toml gives the span and the
/// message; the field is found by walking the document's spans to the deepest key or
/// value that holds the error's position (toml's own messages leave the field out, e.g.
/// "invalid type: string, expected i64").
pub fn from_toml(src: &str, err: &toml::de::Error) -> Problem {
    let span = err.span().unwrap_or(0..0);
    let (line, column) = line_column(src, span.start);
    let field = match DeTable::parse(src) {
        Ok(doc) => {
            let mut path = String::new();
            if err.message().starts_with("missing field") {
                // The span is that of the table lacking the field: name the table, then
                // the field itself ("title", "model.tokens"), so the line reads
                // `file:line:column: field: message` like every other problem.
                table_at(doc.get_ref(), &span, &mut path);
                if let Some(name) = err.message().split('`').nth(1) {
                    push_key(&mut path, name);
                }
            } else {
                field_at(doc.get_ref(), span.start, &mut path);
            }
            path
        }
        // A syntax error: there is no document to find a field in.
        Err(_) => String::new(),
    };
    Problem {
        line,
        column,
        field,
        message: tidy_message(err.message()),
    }
}

/// serde's message on one line, in the words of the file rather than of Rust types.
fn tidy_message(msg: &str) -> String {
    // Our structs read integers as i64 and seconds as f64; say what a user writes.
    msg.trim()
        .replace('\n', " ")
        .replace("expected i64", "expected a whole number")
        .replace("expected f64", "expected a number")
}

/// Extend `path` with the keys and indices of the tables whose spans hold `span`.
fn table_at(table: &DeTable<'_>, span: &Range<usize>, path: &mut String) {
    let holds = |v: &Spanned<DeValue<'_>>| v.span().start <= span.start && span.end <= v.span().end;
    for (key, value) in table.iter() {
        if !holds(value) {
            continue;
        }
        match value.get_ref() {
            DeValue::Table(t) => {
                push_key(path, key.get_ref());
                table_at(t, span, path);
            }
            DeValue::Array(items) => {
                if let Some(i) = items.iter().position(holds) {
                    push_key(path, key.get_ref());
                    path.push_str(&format!("[{i}]"));
                    if let DeValue::Table(t) = items[i].get_ref() {
                        table_at(t, span, path);
                    }
                }
            }
            _ => {}
        }
        return;
    }
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

fn contains(span: &Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

/// Extend `path` with the keys and indices leading to `offset`.
fn field_at(table: &DeTable<'_>, offset: usize, path: &mut String) {
    for (key, value) in table.iter() {
        let in_key = contains(&key.span(), offset);
        let in_value = contains(&value.span(), offset);
        if in_key || in_value {
            push_key(path, key.get_ref());
            if in_value {
                value_at(value, offset, path);
            }
            return;
        }
    }
    // Tables written with a [header] span only their header, so an offset inside the
    // body matches no entry above: fall back to the entry that starts last before it.
    let mut best: Option<(&Spanned<_>, &Spanned<DeValue<'_>>)> = None;
    for (key, value) in table.iter() {
        let start = key.span().start.min(value.span().start);
        if start <= offset && best.is_none_or(|(k, _)| k.span().start < key.span().start) {
            best = Some((key, value));
        }
    }
    if let Some((key, value)) = best
        && matches!(value.get_ref(), DeValue::Table(_) | DeValue::Array(_))
    {
        push_key(path, key.get_ref());
        value_at(value, offset, path);
    }
}

fn value_at(value: &Spanned<DeValue<'_>>, offset: usize, path: &mut String) {
    match value.get_ref() {
        DeValue::Table(t) => field_at(t, offset, path),
        DeValue::Array(items) => {
            // For arrays of tables the element spans are what locate the offset.
            let mut found = None;
            for (i, item) in items.iter().enumerate() {
                if contains(&item.span(), offset) {
                    found = Some(i);
                    break;
                }
                if item.span().start <= offset {
                    found = Some(i);
                }
            }
            if let Some(i) = found {
                path.push_str(&format!("[{i}]"));
                value_at(&items[i], offset, path);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_get_the_line_and_column_of_their_offset() {
        let src = "a = 1\nbé = 2\n\nc = [1, 2]\n";
        let mut p = Problems::new(src);
        let offsets = [
            src.find("c =").unwrap(),
            0,
            src.find("= 2").unwrap(),
            src.len() + 9,
        ];
        for (k, &o) in offsets.iter().enumerate() {
            p.at(o..o, format!("f{k}"), "m");
        }
        let e = p.into_error("x.toml");
        let got: Vec<(usize, usize, &str)> = e
            .problems
            .iter()
            .map(|p| (p.line, p.column, p.field.as_str()))
            .collect();
        // Each one as line_column (the reference) has it, in the order of the file.
        let mut want: Vec<(usize, usize, String)> = offsets
            .iter()
            .enumerate()
            .map(|(k, &o)| {
                let (l, c) = line_column(src, o);
                (l, c, format!("f{k}"))
            })
            .collect();
        want.sort_by_key(|w| (w.0, w.1));
        let want: Vec<(usize, usize, &str)> =
            want.iter().map(|w| (w.0, w.1, w.2.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_report_shows_the_first_problems_and_counts_the_rest() {
        let src = "x\n".repeat(MAX_REPORTED + 7);
        let mut p = Problems::new(&src);
        for k in (0..MAX_REPORTED + 7).rev() {
            p.at(2 * k..2 * k, "steps", format!("problem {}", k + 1));
        }
        let e = p.into_error("s.toml");
        assert_eq!(e.problems.len(), MAX_REPORTED + 7);
        let text = e.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), MAX_REPORTED + 1, "{text}");
        assert_eq!(lines[0], "s.toml:1:1: steps: problem 1");
        assert_eq!(
            lines[MAX_REPORTED],
            format!("s.toml: ... and 7 more problems (the first {MAX_REPORTED} are shown)")
        );
    }
}
