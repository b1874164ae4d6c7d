//! A small Markdown builder for the step summary: headings, key/value tables, capped lists.
//!
//! Outside text enters a summary only as an [`Inline`] made by [`Markdown::text`],
//! [`Markdown::code`] or [`Markdown::prose`]: redacted, then escaped, so it can neither break a
//! table nor add HTML, links or formatting.

use super::{Redactor, escape_invisible};
use std::fmt::Write as _;

/// Inline Markdown that is safe in a table cell or a paragraph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inline(String);

impl Inline {
    /// This crate's own wording (and [`Inline`]s formatted into it), never outside text.
    pub fn ours(markdown: impl Into<String>) -> Self {
        Self(markdown.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub struct Markdown {
    text: String,
    redactor: Redactor,
}

impl Markdown {
    pub fn new(redactor: Redactor) -> Self {
        Self { text: String::new(), redactor }
    }

    /// An empty builder with the same redactor, for a nested block.
    pub fn nested(&self) -> Self {
        Self::new(self.redactor.clone())
    }

    /// Outside text redacted, then its invisible characters escaped.
    fn outside(&self, s: &str) -> String {
        escape_invisible(&self.redactor.redact(s)).into_owned()
    }

    pub fn text(&self, s: &str) -> Inline {
        Inline(escape_text(&self.outside(s)))
    }

    pub fn code(&self, s: &str) -> Inline {
        Inline(code_span(&self.outside(s)))
    }

    /// One of our messages holding outside text: it quotes names in backticks, so each quoted
    /// piece becomes code and the rest text. A name holding backticks can only misplace the
    /// quoting, never add markup.
    pub fn prose(&self, s: &str) -> Inline {
        let s = self.outside(s);
        let pieces: Vec<&str> = s.split('`').collect();
        let mut out = String::new();
        for (i, piece) in pieces.iter().enumerate() {
            let quoted = i % 2 == 1 && i + 1 < pieces.len();
            match (quoted, i % 2 == 1) {
                (true, _) => out.push_str(&code_span(piece)),
                (false, true) => out.push_str(&escape_text(&format!("`{piece}"))),
                (false, false) => out.push_str(&escape_text(piece)),
            }
        }
        Inline(out)
    }

    pub fn heading(&mut self, level: usize, title: &str) -> &mut Self {
        let title = escape_text(&self.outside(title));
        let _ = writeln!(self.text, "{} {title}\n", "#".repeat(level.clamp(1, 6)));
        self
    }

    pub fn paragraph(&mut self, text: &Inline) -> &mut Self {
        let _ = writeln!(self.text, "{}\n", one_line(text.as_str()));
        self
    }

    /// A table with a header row of our own words.
    pub fn table(&mut self, header: &[&str], rows: impl IntoIterator<Item = Vec<Inline>>) -> &mut Self {
        let _ = writeln!(self.text, "| {} |", header.join(" | "));
        let _ = writeln!(self.text, "|{}", "---|".repeat(header.len()));
        for row in rows {
            let cells: Vec<String> = row.iter().map(|c| one_line(c.as_str())).collect();
            let _ = writeln!(self.text, "| {} |", cells.join(" | "));
        }
        self.text.push('\n');
        self
    }

    /// A collapsed `<details>` block around `inner`.
    pub fn details(&mut self, summary: &str, inner: &Markdown) -> &mut Self {
        let summary = html_escape(&self.outside(summary));
        let _ = writeln!(self.text, "<details><summary>{summary}</summary>\n\n{}</details>\n", inner.text);
        self
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Whether `c` ends a line for a Markdown reader or the browser showing it.
fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// A last net for [`Inline::ours`]: a cell or paragraph is one line.
fn one_line(s: &str) -> String {
    s.replace("\r\n", "<br>").replace(is_break, "<br>")
}

/// Plain text: `&`, `<`, `>` as entities; Markdown punctuation backslash-escaped (GFM tables
/// take `\|` as a pipe inside a cell); line breaks as `<br>`; a word that would become a link or
/// a mention ([`links`]) as inline code.
fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        let end = rest.find(|c: char| !c.is_whitespace()).unwrap_or(rest.len());
        out.push_str(&escape_plain(&rest[..end]));
        rest = &rest[end..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let word = &rest[..end];
        out.push_str(&if links(word) { code_span(word) } else { escape_plain(word) });
        rest = &rest[end..];
    }
    out
}

/// Whether GitHub could turn `word` (no whitespace) into a link or a mention: a URL (any
/// `scheme://`, `www.`), an e-mail address, an `@user`.
fn links(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    lower.contains("://") || lower.contains("www.") || lower.contains('@') || lower.contains("mailto:")
}

/// [`escape_text`] for text that holds no link.
fn escape_plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' if chars.peek() == Some(&'\n') => {}
            c if is_break(c) => out.push_str("<br>"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '~' | '#' | '$' | '!' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Inline code: a fence longer than any backtick run inside, padded where the text starts or
/// ends with a backtick; `|` escaped for GFM tables; line breaks shown as `⏎` (a code span
/// cannot hold one). Markdown and HTML mean nothing inside a code span.
fn code_span(s: &str) -> String {
    if s.is_empty() {
        return String::new();
    }
    let s = s.replace("\r\n", "\n").replace(is_break, "⏎").replace('|', "\\|");
    let longest = s.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = s.starts_with('`') || s.ends_with('`') || (s.starts_with(' ') && s.ends_with(' '));
    let pad = if pad { " " } else { "" };
    format!("{fence}{pad}{s}{pad}{fence}")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace(is_break, " ")
}

/// The cells of a table row as GFM splits them: at each `|` not right after a backslash
/// (cmark-gfm's `table_cell` takes an escaped character whole).
#[cfg(test)]
pub(crate) fn gfm_cells(line: &str) -> Vec<String> {
    let inner = line.trim().strip_prefix('|').and_then(|l| l.strip_suffix('|')).expect("a table row");
    let mut cells = vec![String::new()];
    let mut prev = ' ';
    for c in inner.chars() {
        if c == '|' && prev != '\\' {
            cells.push(String::new());
        } else {
            cells.last_mut().unwrap().push(c);
        }
        prev = c;
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md() -> Markdown {
        Markdown::new(Redactor::default())
    }

    #[test]
    fn tables_escape_cells() {
        let mut m = md();
        let row = vec![m.text("x|y"), m.text("1\n2")];
        m.table(&["a", "b"], [row]);
        assert_eq!(m.as_str(), "| a | b |\n|---|---|\n| x\\|y | 1<br>2 |\n\n");
    }

    #[test]
    fn outside_text_cannot_break_a_table_or_add_html() {
        let hostile = [
            "a | b | c",
            "line\nbreak\r\nand\rcr\u{2028}sep",
            "<img src=x onerror=alert(1)>",
            "&lt;script&gt;",
            "# heading",
            "```\nfenced\n```",
            "`` ` ``",
            "\\|escaped\\\\|",
            "[link](https://example.com) ![img](x) *em* _em_ ~~s~~ $x$",
            "<br>",
        ];
        let mut m = md();
        let rows: Vec<Vec<Inline>> =
            hostile.iter().map(|h| vec![m.text(h), m.code(h), m.prose(&format!("`{h}` said {h}"))]).collect();
        m.table(&["text", "code", "prose"], rows);
        let out = m.as_str().to_owned();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2 + hostile.len() + 1, "one line per row:\n{out}");
        for line in &lines[2..2 + hostile.len()] {
            assert_eq!(gfm_cells(line).len(), 3, "{line}");
            let outside_code: String = line.split('`').step_by(2).collect();
            assert!(!outside_code.replace("<br>", "").contains('<'), "{line}");
            for c in ['[', ']', '*', '_', '~', '$', '#', '!'] {
                let bare = outside_code.match_indices(c).any(|(i, _)| !outside_code[..i].ends_with('\\'));
                assert!(!bare, "a bare `{c}` outside code: {line}");
            }
        }
        assert_eq!(m.text("# title").as_str(), "\\# title");
        assert_eq!(m.code("a`b").as_str(), "``a`b``");
        assert_eq!(m.code("`a``").as_str(), "``` `a`` ```");
        assert_eq!(m.code("a|b\nc").as_str(), "`a\\|b⏎c`");
        assert_eq!(m.prose("file `a|b` changed").as_str(), "file `a\\|b` changed");
        assert_eq!(m.prose("odd ` quote").as_str(), "odd \\` quote");
    }

    #[test]
    fn secrets_are_redacted_before_escaping() {
        let redactor = Redactor::default();
        redactor.insert("s3cr|t&<v>\nline2");
        let m = Markdown::new(redactor);
        for shown in [m.text("x s3cr|t&<v>\nline2 y"), m.code("x s3cr|t&<v>\nline2 y"), m.prose("`s3cr|t&<v>\nline2`")]
        {
            assert!(shown.as_str().contains("\\*\\*\\*") || shown.as_str().contains("***"), "{shown}");
            assert!(!shown.as_str().contains("s3cr") && !shown.as_str().contains("line2"), "{shown}");
        }
    }
}
