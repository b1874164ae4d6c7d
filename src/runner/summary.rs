//! A small Markdown builder for the step summary: headings, key/value tables, capped lists.

use std::fmt::Write as _;

#[derive(Default)]
pub struct Markdown {
    text: String,
}

impl Markdown {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn heading(&mut self, level: usize, title: &str) -> &mut Self {
        let _ = writeln!(self.text, "{} {}\n", "#".repeat(level.clamp(1, 6)), title);
        self
    }

    pub fn paragraph(&mut self, text: &str) -> &mut Self {
        let _ = writeln!(self.text, "{text}\n");
        self
    }

    /// A table with a header row; cells are escaped.
    pub fn table<R: AsRef<[String]>>(&mut self, header: &[&str], rows: impl IntoIterator<Item = R>) -> &mut Self {
        let _ = writeln!(self.text, "| {} |", header.join(" | "));
        let _ = writeln!(self.text, "|{}", "---|".repeat(header.len()));
        for row in rows {
            let cells: Vec<String> = row.as_ref().iter().map(|c| cell(c)).collect();
            let _ = writeln!(self.text, "| {} |", cells.join(" | "));
        }
        self.text.push('\n');
        self
    }

    /// A collapsed `<details>` block around `inner`.
    pub fn details(&mut self, summary: &str, inner: &Markdown) -> &mut Self {
        let _ =
            writeln!(self.text, "<details><summary>{}</summary>\n\n{}</details>\n", html_escape(summary), inner.text);
        self
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Inline code in a table cell, safe against backticks and pipes.
pub fn code(s: &str) -> String {
    if s.is_empty() {
        return String::new();
    }
    let fence = if s.contains('`') { "``" } else { "`" };
    format!("{fence}{s}{fence}")
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\r', "").replace('\n', "<br>")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_escape_cells() {
        let mut md = Markdown::new();
        md.table(&["a", "b"], [vec!["x|y".to_string(), "1\n2".to_string()]]);
        assert_eq!(md.as_str(), "| a | b |\n|---|---|\n| x\\|y | 1<br>2 |\n\n");
    }
}
