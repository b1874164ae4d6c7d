//! Snapshots of what a step showed its reader (`StepResult::said`, `StepResult::shown`), with
//! what differs between runs and machines redacted: the scratch directory, digests (keys and
//! versions hold the machine's facts), times, rates, dates, ports, compressed sizes and the
//! directory of the reads log.

use std::path::Path;

/// Snapshot `text` as `name` under the redactions of the step's scratch directory `root`.
macro_rules! assert_shown {
    ($root:expr, $name:expr, $text:expr $(,)?) => {
        $crate::support::redactions($root).bind(|| insta::assert_snapshot!($name, $text))
    };
}
pub(crate) use assert_shown;

/// The redactions of a snapshot taken in the scratch directory `root`.
pub fn redactions(root: &Path) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(&regex_escape(&root.to_string_lossy()), "[TMP]");
    s.add_filter(r"\b[0-9a-f]{64}\b", "[HASH]");
    s.add_filter(r"\b[0-9a-f]{12}…", "[HASH]…");
    s.add_filter(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[DATE]");
    s.add_filter(r"recorded \d{4}-\d{2}-\d{2}", "recorded [DATE]");
    s.add_filter(r"\b\d+ (h|min) \d+ (min|s)\b", "[TIME]");
    s.add_filter(r"\b\d+(\.\d+)? (ms|s)\b", "[TIME]");
    s.add_filter(r"(generation-seconds|time-saved)=\d+(\.\d+)?", "$1=[SECONDS]");
    // A summary gives the rate of a transfer that took 100 ms or more: here as often as not.
    s.add_filter(r", \d+(\.\d+)? (B|KiB|MiB|GiB)/s of content", "");
    s.add_filter(r"\d+(\.\d+)? (B|KiB|MiB|GiB)/s", "[RATE]");
    s.add_filter(r"\(\d+(\.\d+)? (B|KiB|MiB) archive\)", "([ARCHIVE] archive)");
    s.add_filter(r"\d+(\.\d+)? (B|KiB|MiB) compressed", "[ARCHIVE] compressed");
    s.add_filter(r"download: \d+(\.\d+)? (B|KiB|MiB)", "download: [ARCHIVE]");
    s.add_filter(r"archive: \d+(\.\d+)? (B|KiB|MiB)", "archive: [ARCHIVE]");
    s.add_filter(r"127\.0\.0\.1:\d+", "127.0.0.1:[PORT]");
    s.add_filter(r"/reads-[0-9a-f]{16}/", "/reads-[ID]/");
    s
}

/// `text` with each `figure` a test planted (`600 s`, a deadline or a `Retry-After`) shown as
/// `[PLANTED]`, so that a snapshot proves it is there although times are redacted.
pub fn planted(text: &str, figure: &str) -> String {
    text.replace(figure, "[PLANTED]")
}

pub fn regex_escape(s: &str) -> String {
    s.chars().map(|c| if "\\.+*?()|[]{}^$".contains(c) { format!("\\{c}") } else { c.to_string() }).collect()
}
