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

impl fmt::Display for SceneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}:{}:{}: ", self.file, p.line, p.column)?;
            if !p.field.is_empty() {
                write!(f, "{}: ", p.field)?;
            }
            f.write_str(&p.message)?;
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

/// Collects problems against one source text.
pub struct Problems<'a> {
    src: &'a str,
    list: Vec<Problem>,
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
        let (line, column) = line_column(self.src, span.start);
        self.list.push(Problem {
            line,
            column,
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
        self.list.sort_by_key(|p| (p.line, p.column));
        SceneError {
            file: file.to_string(),
            problems: self.list,
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
