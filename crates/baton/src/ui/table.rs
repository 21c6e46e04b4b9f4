//! Tables whose columns hold: every column but the last has a widest width, a longer value is
//! cut with `…` (measured in terminal cells, so wide characters count double), and colour is
//! added after padding so escape sequences never shift a column.

use super::color::Paint;
use unicode_width::UnicodeWidthChar;

/// One column: its heading, the most cells it takes, and its alignment.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub header: &'static str,
    pub max: usize,
    pub right: bool,
}

impl Column {
    pub const fn left(header: &'static str, max: usize) -> Column {
        Column {
            header,
            max,
            right: false,
        }
    }

    pub const fn right(header: &'static str, max: usize) -> Column {
        Column {
            header,
            max,
            right: true,
        }
    }
}

/// A value and, optionally, its style.
#[derive(Debug, Clone)]
pub struct Cell {
    text: String,
    paint: Option<Paint>,
}

impl Cell {
    pub fn painted(text: impl Into<String>, paint: Paint) -> Cell {
        Cell {
            text: text.into(),
            paint: Some(paint),
        }
    }
}

impl<T: Into<String>> From<T> for Cell {
    fn from(text: T) -> Cell {
        Cell {
            text: text.into(),
            paint: None,
        }
    }
}

pub struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(columns: &[Column]) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// The table, one line per row after the heading, each line ending in `\n`.
    pub fn render(&self, colour: bool) -> String {
        let last = self.columns.len().saturating_sub(1);
        let rows: Vec<Vec<(String, Option<Paint>)>> = self
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let max = match self.columns.get(i) {
                            Some(col) if i < last => col.max,
                            _ => usize::MAX,
                        };
                        (fit(&c.text, max), c.paint)
                    })
                    .collect()
            })
            .collect();
        // A column is as wide as its widest value (or heading), never wider than its max.
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, col)| {
                rows.iter()
                    .filter_map(|r| r.get(i))
                    .map(|(t, _)| width(t))
                    .chain([width(col.header)])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let heading: Vec<(String, Option<Paint>)> = self
            .columns
            .iter()
            .map(|c| (c.header.to_string(), Some(Paint::Strong)))
            .collect();
        for row in std::iter::once(&heading).chain(rows.iter()) {
            let mut line = String::new();
            for (i, (text, paint)) in row.iter().enumerate() {
                let Some(col) = self.columns.get(i) else {
                    break;
                };
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(widths[i].saturating_sub(width(text)));
                let shown = match paint {
                    Some(p) => p.when(colour, text),
                    None => text.clone(),
                };
                if col.right {
                    line.push_str(&pad);
                    line.push_str(&shown);
                } else if i == last {
                    line.push_str(&shown);
                } else {
                    line.push_str(&shown);
                    line.push_str(&pad);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Terminal cells `text` takes.
pub fn width(text: &str) -> usize {
    text.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// `text` on one line (line breaks and tabs as spaces, other control characters shown as
/// visible escapes), at most `max` cells, `…` marking a cut.
pub fn fit(text: &str, max: usize) -> String {
    let flat = super::visible_line(&text.replace(['\n', '\r', '\t'], " ")).into_owned();
    if width(&flat) <= max {
        return flat;
    }
    let mut out = String::new();
    let mut used = 0;
    for c in flat.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// `text` in exactly `width` cells: cut with `…` when longer, padded with spaces when shorter
/// (`{:<width}` that holds with long and wide values).
pub fn pad(text: &str, cells: usize) -> String {
    let mut out = fit(text, cells);
    let used = width(&out);
    out.push_str(&" ".repeat(cells.saturating_sub(used)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_holds_its_width() {
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(pad("abcdef", 4), "abc…");
        assert_eq!(pad("日本語", 4), "日… ");
        assert_eq!(width(&pad("日本語", 4)), 4);
    }

    #[test]
    fn long_values_are_cut_and_the_columns_hold() {
        let mut t = Table::new(&[
            Column::left("ID", 10),
            Column::right("N", 4),
            Column::left("NOTE", 5),
        ]);
        t.row(vec!["short".into(), "1".into(), "free text".into()]);
        t.row(vec![
            "a-very-long-package-name@1.0.0".into(),
            "22".into(),
            "x".into(),
        ]);
        let text = t.render(false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "ID           N  NOTE");
        assert_eq!(lines[1], "short        1  free text");
        assert_eq!(lines[2], "a-very-lo…  22  x");
        // The last column is never cut.
        assert!(text.contains("free text"));
    }

    #[test]
    fn wide_characters_count_double_and_colour_does_not_shift_columns() {
        assert_eq!(fit("日本語のパッケージ", 7), "日本語…");
        assert_eq!(width(&fit("日本語のパッケージ", 7)), 7);
        assert_eq!(fit("a\u{1b}[2Jb\nc\u{9b}", 20), "a\\x1b[2Jb c\\u{9b}");
        let mut t = Table::new(&[Column::left("A", 6), Column::left("B", 3)]);
        t.row(vec![Cell::painted("ok", Paint::Good), "x".into()]);
        t.row(vec!["日本語のパッケージ".into(), "y".into()]);
        let text = t.render(true);
        let plain: Vec<String> = text
            .lines()
            .map(|l| {
                l.replace("\x1b[32m", "")
                    .replace("\x1b[1m", "")
                    .replace("\x1b[0m", "")
            })
            .collect();
        assert_eq!(plain[1], "ok     x");
        assert_eq!(plain[2], "日本…  y");
        assert_eq!(width(&plain[1]), width(&plain[2]));
    }
}
