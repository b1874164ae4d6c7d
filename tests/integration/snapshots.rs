//! Snapshots of what users see: the outputs file, the log and the step summary. The key is
//! deterministic here (`native: none`), so the snapshot also pins the key recipe; paths,
//! times, rates and archive sizes are redacted.

use crate::support::{self, NO_STATE, Step, write};

fn settings(step: &Step) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(&support::regex_escape(&step.dir.path().to_string_lossy()), "[TMP]");
    s.add_filter(r"\d+(\.\d+)? (ms|s|min \d+ s)\b", "[TIME]");
    s.add_filter(r"recorded \d{4}-\d{2}-\d{2}", "recorded [DATE]");
    s.add_filter(r"(generation-seconds|time-saved)=\d+\.\d", "$1=[SECONDS]");
    s.add_filter(r"\d+(\.\d+)? (B|KiB|MiB|GiB)/s", "[RATE]");
    s.add_filter(r"\(\d+(\.\d+)? (B|KiB|MiB) archive\)", "([ARCHIVE] archive)");
    s.add_filter(r"\d+(\.\d+)? (B|KiB|MiB) compressed", "[ARCHIVE] compressed");
    s.add_filter(r"download: \d+(\.\d+)? (B|KiB|MiB)", "download: [ARCHIVE]");
    s
}

#[test]
fn restore_save_restore_as_users_see_it() {
    let step = Step::new();
    write(&step.ws.join("gen.py"), b"print('generate')\n");
    let inputs = [
        ("path", "fixtures"),
        ("prefix", "snap"),
        ("hash-files", "gen.py"),
        ("native", "none"),
        ("variant", "cpu"),
        ("reuse-env", "REUSED"),
    ];
    let cold = step.run(&["restore"], &inputs, NO_STATE);
    write(&step.ws.join("fixtures/a.pth"), b"weights");
    write(&step.ws.join("fixtures/b.expected"), b"expected");
    let post = step.run(&["save", "--post"], &inputs, &cold.state);
    std::fs::remove_dir_all(step.ws.join("fixtures")).unwrap();
    let warm = step.run(&["restore"], &inputs, NO_STATE);
    settings(&step).bind(|| {
        insta::assert_snapshot!("cold_restore", cold.shown());
        insta::assert_snapshot!("post_save", post.shown());
        insta::assert_snapshot!("warm_restore", warm.shown());
    });
}

#[test]
fn help_text() {
    let out = std::process::Command::new(support::exe()).args(["restore", "--help"]).output().unwrap();
    insta::assert_snapshot!("restore_help", String::from_utf8(out.stdout).unwrap());
}
