//! Outside text made visible: characters that change how the rest of a line reads without
//! showing themselves are shown as `\u{202e}` in the log and the summary, and the items of a list
//! output are escaped so that each is exactly one line.

use std::borrow::Cow;

/// Whether `c` is shown escaped: a control character other than tab and the line breaks the
/// runner splits lines at, a format character (Unicode category Cf), or U+2028/U+2029.
pub fn is_invisible(c: char) -> bool {
    match c {
        '\t' | '\n' | '\r' => false,
        c if c.is_control() => true,
        '\u{2028}' | '\u{2029}' => true,
        c => is_format(c),
    }
}

/// Unicode's format characters (general category Cf, Unicode 16).
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}

/// `s` with each `is_invisible` character written as `\u{<hex>}` (lower-case hex digits).
pub fn escape_invisible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_invisible) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_invisible(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One item of a list output as one line: `\` as `\\`, line feed, carriage return and tab as
/// `\n`, `\r`, `\t`, and every other `is_invisible` character as `\u{<hex>}`, so the item
/// reads back exactly ([`unescape_list_item`]).
pub fn escape_list_item(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_invisible(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The item [`escape_list_item`] wrote, or `None` for a malformed escape.
pub fn unescape_list_item(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '\\' => out.push('\\'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'u' => {
                if chars.next()? != '{' {
                    return None;
                }
                let hex: String = chars.by_ref().take_while(|c| *c != '}').collect();
                out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invisible_characters_are_shown_escaped() {
        assert_eq!(escape_invisible("plain ⏎ text…\tok"), "plain ⏎ text…\tok");
        assert_eq!(escape_invisible("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(
            escape_invisible("\u{1b}[31mred\u{200b}\u{feff}\u{2028}"),
            "\\u{1b}[31mred\\u{200b}\\u{feff}\\u{2028}"
        );
        assert_eq!(escape_invisible("emoji ⚠️ ✅"), "emoji ⚠️ ✅", "variation selectors are not format characters");
    }

    #[test]
    fn list_items_are_one_line_and_read_back_exactly() {
        for item in ["a", "", "dir/evil\nfake-entry", "a\\nb", "tab\there\r", "x\u{202e}y\u{0}z\u{e007f}", "\\u{41}"] {
            let escaped = escape_list_item(item);
            assert!(!escaped.chars().any(|c| c.is_control() || is_invisible(c)), "{escaped:?}");
            assert_eq!(unescape_list_item(&escaped).as_deref(), Some(item), "{escaped:?}");
        }
        assert_eq!(escape_list_item("dir/evil\nfake"), "dir/evil\\nfake");
        assert_eq!(escape_list_item("a\\b\u{202e}"), "a\\\\b\\u{202e}");
        assert_eq!(unescape_list_item("bad\\x"), None);
    }
}
