//! Outside text made fit for one line of the log or the step summary: values cut to a length,
//! and errors with their causes.

/// One line of at most `max` characters: line breaks shown as ` ⏎ `, the rest cut off with `…`.
/// Every secret registered in the process is redacted first, so no part of one survives the
/// cut (a caller with its own [`Redactor`](crate::runner::Redactor) redacts before calling).
pub fn shorten(s: &str, max: usize) -> String {
    let s = crate::runner::redact_registered(s);
    let one_line: String = crate::runner::runner_lines(s.trim()).collect::<Vec<_>>().join(" ⏎ ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    }
}

/// `err` and each of its causes (the first line of each), joined by `: `: for errors reported
/// as one informational line.
pub fn error_line(err: &dyn std::error::Error) -> String {
    let first_line = |e: &dyn std::error::Error| e.to_string().lines().next().unwrap_or_default().to_owned();
    let mut line = first_line(err);
    let mut source = err.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&first_line(cause));
        source = cause.source();
    }
    line
}

/// `message`, then one `caused by:` line per source.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(&format!("\n  caused by: {cause}"));
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorten_cuts_at_the_limit_and_joins_lines() {
        assert_eq!(shorten(" a\r\nb\n", 10), "a ⏎ b");
        assert_eq!(shorten("abcdef", 3), "abc…");
        assert_eq!(shorten("abc", 3), "abc");
    }

    #[test]
    fn error_line_names_every_cause() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot read `x`")]
        struct Outer(#[source] std::io::Error);
        let err = Outer(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied"));
        assert_eq!(error_line(&err), "cannot read `x`: permission denied");
    }
}
