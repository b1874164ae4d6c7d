//! Checks on untrusted archive names and link targets, and on what a `path` line covers. Nothing
//! here touches the filesystem: names are judged as text, so links cannot steer the check.

use crate::manifest::EntryPath;
use crate::paths::{OWNED_MARKER, PatternSet, STAGING_PREFIX};

/// Split an archive member name into `(root index, relative path)`. Accepted: `<digits>` or
/// `<digits>/<components>` where no component is empty, `.` or `..`, and nothing is absolute or
/// contains `\` or NUL. A trailing `/` (directory) is allowed.
pub fn check_entry_name(name: &str) -> Result<(usize, String), String> {
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    if trimmed.is_empty() || trimmed.starts_with('/') {
        return Err("absolute or empty name".into());
    }
    if trimmed.contains('\0') || trimmed.contains('\\') {
        return Err("name contains NUL or `\\`".into());
    }
    let Some(EntryPath { root, rel }) = EntryPath::parse(trimmed) else {
        return Err("name is outside every `path` root".into());
    };
    for part in rel.split('/').filter(|_| !rel.is_empty()) {
        match part {
            "" => return Err("name has an empty component".into()),
            "." | ".." => return Err("name contains `.` or `..`".into()),
            _ if part == OWNED_MARKER || part.starts_with(STAGING_PREFIX) => {
                return Err(format!("`{part}` is a name exact-cache keeps for itself"));
            }
            _ => {}
        }
    }
    Ok((root, rel.to_owned()))
}

/// A symlink at `rel` (relative to its root) may point only to a relative place inside the
/// root. The target may climb with leading `..` components (never above the root), then only
/// descend: a `..` after a name is refused, because the kernel resolves `name/..` through
/// `name` when it is itself a link, which a textual check cannot follow.
pub fn check_symlink_target(rel: &str, target: &str) -> Result<(), String> {
    if target.is_empty() {
        return Err("symlink has an empty target".into());
    }
    if target.starts_with('/') || target.starts_with('\\') || target.contains('\0') || target.get(1..2) == Some(":") {
        return Err(format!("symlink target `{target}` is absolute"));
    }
    if rel.is_empty() {
        return Err("a `path` root cannot be a symlink".into());
    }
    let mut depth: usize = rel.split('/').count() - 1;
    let mut descended = false;
    for part in target.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." if descended => {
                return Err(format!("symlink target `{target}` has `..` after a name"));
            }
            ".." => {
                if depth == 0 {
                    return Err(format!("symlink target `{target}` escapes its root"));
                }
                depth -= 1;
            }
            _ => descended = true,
        }
    }
    Ok(())
}

/// Where a link at `rel` with `target` (checked by [`check_symlink_target`]: leading `..`
/// only, never above the root) leads, relative to the root.
pub(crate) fn resolve_link(rel: &str, target: &str) -> String {
    let mut parts: Vec<&str> = rel.split('/').collect();
    parts.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    parts.join("/")
}

/// An entry of root `root` at `rel` must be something that root's `path` line could have
/// saved: under a glob line it must match the glob or lie under a matching directory (the
/// glob's base itself is never an entry), and no `!` line may exclude it or its parents.
pub(crate) fn check_covered(paths: &PatternSet, root: usize, rel: &str) -> Result<(), String> {
    let pattern = &paths.includes[root];
    if pattern.glob.is_some() && rel.is_empty() {
        return Err(format!("the base of glob `{}` cannot be an entry", pattern.line));
    }
    if !pattern.covers(rel) {
        return Err(format!("does not match `path` line `{}`", pattern.line));
    }
    let dest = if rel.is_empty() { pattern.base.clone() } else { pattern.base.join(rel) };
    let mut within_root = dest.ancestors().take_while(|a| a.starts_with(&pattern.base) && *a != pattern.base);
    if paths.is_excluded(&dest) || within_root.any(|a| paths.is_excluded(a)) {
        return Err("is excluded by a `!` line of `path`".into());
    }
    Ok(())
}

/// A link in root `root` at `rel` may lead only to what the root's own `path` line covers:
/// under a glob, a match (or what lies beneath one), never a file beside the matches.
pub(crate) fn check_link_covered(paths: &PatternSet, root: usize, rel: &str, target: &str) -> Result<(), String> {
    let resolved = resolve_link(rel, target);
    check_covered(paths, root, &resolved).map_err(|_| {
        let line = &paths.includes[root].line;
        format!("symlink target `{target}` leads to `{resolved}`, which `path` line `{line}` does not cover")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names() {
        assert_eq!(check_entry_name("0"), Ok((0, String::new())));
        assert_eq!(check_entry_name("3/a/b.txt"), Ok((3, "a/b.txt".into())));
        assert_eq!(check_entry_name("0/dir/"), Ok((0, "dir".into())));
        for bad in [
            "",
            "/etc/passwd",
            "0/../x",
            "0/a/../../x",
            "0//a",
            "0/./a",
            "x/a",
            "../0/a",
            "0/a\\b",
            ".exact-cache/x",
            "0/.exact-cache-root",
            "0/d/.exact-cache-staging-1-x/root",
        ] {
            assert!(check_entry_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn symlink_targets() {
        assert!(check_symlink_target("a/link", "b").is_ok());
        assert!(check_symlink_target("a/link", "../b").is_ok());
        assert!(check_symlink_target("a/link", "./x/y").is_ok());
        assert!(check_symlink_target("a/b/link", "s/../../..").is_err(), "`..` after a name");
        assert!(check_symlink_target("link", "../x").is_err());
        assert!(check_symlink_target("a/link", "../../x").is_err());
        assert!(check_symlink_target("a/link", "x/../../../y").is_err());
        assert!(check_symlink_target("a/link", "/etc/passwd").is_err());
        assert!(check_symlink_target("", "x").is_err());
    }
}
