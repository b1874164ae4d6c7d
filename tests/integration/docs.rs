//! The README and the pages under `docs/`: the README stays a short introduction (at most 350
//! lines, opening with the demo and test commands) that links every page; every relative link
//! and anchor in them resolves; and the README's examples are what the action and the command
//! line accept (every `with:` input declared by the root action, every `exact-cache` command line
//! parsed by the CLI).

use exact_cache::config::{EntryPoint, INPUTS};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const README_MAX_LINES: usize = 350;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README.md and every Markdown page under docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut inside = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                inside = !inside;
                return false;
            }
            !inside
        })
        .collect()
}

/// The fenced code blocks of `text` with their info string.
fn code_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        match (line.trim_start().strip_prefix("```"), current.take()) {
            (Some(info), None) => current = Some((info.trim().to_owned(), String::new())),
            (Some(_), Some(block)) => blocks.push(block),
            (None, Some((info, mut body))) => {
                body.push_str(line);
                body.push('\n');
                current = Some((info, body));
            }
            (None, None) => {}
        }
    }
    blocks
}

/// GitHub's anchor for a heading: lowercased, punctuation dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|line| line.strip_prefix('#').map(|rest| rest.trim_start_matches('#')))
        .map(slug)
        .collect()
}

/// The `[text](target)` links of the prose (inline code skipped).
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose(text) {
        // Inline code is every other piece between backticks.
        for (i, piece) in line.split('`').enumerate() {
            if i % 2 == 1 {
                continue;
            }
            let mut rest = piece;
            while let Some(at) = rest.find("](") {
                let after = &rest[at + 2..];
                let end = after.find([')', ' ']).unwrap_or(after.len());
                found.push(after[..end].to_owned());
                rest = &after[end..];
            }
        }
    }
    found
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = read(&page);
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').map_or((target.as_str(), None), |(p, a)| (p, Some(a)));
            let file = if path.is_empty() { page.clone() } else { page.parent().unwrap().join(path) };
            if !file.exists() {
                broken.push(format!("{}: {target}: no such file", page.display()));
                continue;
            }
            if let Some(anchor) = anchor.filter(|_| file.extension().is_some_and(|e| e == "md"))
                && !anchors(&read(&file)).contains(anchor)
            {
                broken.push(format!("{}: {target}: no such heading", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_short_opens_with_the_two_commands_and_links_every_page() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move reference to docs/"
    );
    let (info, first) = &code_blocks(&readme)[0];
    assert_eq!(info, "sh");
    let commands: Vec<&str> = first.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(commands, ["scripts/demo", "scripts/test"], "the README opens with the two commands");
    assert!(readme.find("```sh").unwrap() < 1000, "the commands come first");
    for command in commands {
        assert!(root().join(command).exists(), "{command}");
    }
    let linked: BTreeSet<String> =
        links(&readme).into_iter().map(|t| t.split('#').next().unwrap().to_owned()).collect();
    for page in pages().into_iter().skip(1) {
        let name = format!("docs/{}", page.file_name().unwrap().to_string_lossy());
        assert!(linked.contains(&name), "README.md does not link {name}");
    }
}

#[test]
fn the_readmes_examples_are_what_the_action_and_the_cli_accept() {
    let readme = read(&root().join("README.md"));
    let declared: BTreeSet<&str> = INPUTS.iter().filter(|i| i.declared_by(EntryPoint::Root)).map(|i| i.name).collect();
    let mut steps_with = 0;
    let mut commands = 0;
    for (info, body) in code_blocks(&readme) {
        match info.as_str() {
            "yaml" => {
                // A fragment of a `with:` block (indented input lines) is read as one.
                let text = if body.starts_with("    ") { format!("- with:\n{body}") } else { body.clone() };
                let steps: serde_yaml_ng::Value =
                    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{body}"));
                for step in steps.as_sequence().unwrap() {
                    let Some(with) = step["with"].as_mapping() else { continue };
                    if !step["uses"].as_str().is_none_or(|u| u.contains("exact-cache")) {
                        continue;
                    }
                    steps_with += 1;
                    for name in with.keys().map(|k| k.as_str().unwrap()) {
                        assert!(declared.contains(name), "`{name}` is not an input of the action:\n{body}");
                    }
                }
            }
            "sh" => {
                for line in body.lines().filter(|l| l.starts_with("exact-cache ")) {
                    let line = line.split(" # ").next().unwrap();
                    let args = std::iter::once("exact-cache").chain(line.split_whitespace().skip(1));
                    exact_cache::cli::parse(args).unwrap_or_else(|e| panic!("{line}: {e}"));
                    commands += 1;
                }
            }
            _ => {}
        }
    }
    assert!(steps_with >= 3 && commands >= 4, "{steps_with} steps, {commands} command lines");
}
