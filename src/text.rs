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

/// A failed command's error: its first line says what went wrong and, after `: `, the first
/// line of the deepest cause (what is missing, refused or unreadable); the causes between follow
/// as `caused by:` lines, and the deepest again only when it has more to say than one line.
pub fn error_report(err: &dyn std::error::Error) -> String {
    let mut causes = Vec::new();
    let mut source = err.source();
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    let Some(deepest) = causes.pop() else { return err.to_string() };
    let message = err.to_string();
    let (first, rest) = message.split_once('\n').map_or((message.as_str(), None), |(f, r)| (f, Some(r)));
    let mut text = format!("{first}: {}", deepest.lines().next().unwrap_or_default());
    for line in rest.into_iter().chain(causes.iter().map(|c| c.as_str())) {
        text.push_str(&format!("\n  caused by: {line}"));
    }
    if deepest.contains('\n') {
        text.push_str(&format!("\n  caused by: {deepest}"));
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

    #[test]
    fn an_error_report_says_what_is_missing_on_its_first_line() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot compute the fingerprint")]
        struct Outer(#[source] Middle);
        #[derive(Debug, thiserror::Error)]
        #[error("cannot run python")]
        struct Middle(#[source] std::io::Error);
        let missing = || std::io::Error::new(std::io::ErrorKind::NotFound, "`/opt/py/bin/python3` not found");
        assert_eq!(
            error_report(&Outer(Middle(missing()))),
            "cannot compute the fingerprint: `/opt/py/bin/python3` not found\n  caused by: cannot run python"
        );
        assert_eq!(error_report(&Middle(missing())), "cannot run python: `/opt/py/bin/python3` not found");
        let long = Middle(std::io::Error::other("exit status 1\nstderr: no module"));
        assert_eq!(
            error_report(&long),
            "cannot run python: exit status 1\n  caused by: exit status 1\nstderr: no module"
        );
        assert_eq!(error_report(&missing()), "`/opt/py/bin/python3` not found");
    }
}
