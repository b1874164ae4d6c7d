//! Command-line parsing. Every input of [`INPUTS`] is also a flag, `--<name>`; list inputs
//! may be repeated (`--path a --path b`) or given as one newline-separated value, booleans
//! are switches (`--strict`, or `--strict=false`).

use crate::config::{INPUTS, InputKind, RawInputs, Scope};
use clap::{Arg, ArgAction, ArgMatches, Command};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandName {
    Fingerprint,
    Restore,
    Save,
    Explain,
    List,
    Prune,
}

#[derive(Clone, Debug)]
pub struct Invocation {
    pub command: CommandName,
    /// `save --post`: the post step of the root action (key and hit come from the main step).
    pub post: bool,
    pub workspace: Option<PathBuf>,
    /// `prune --dry-run`: list what would be deleted.
    pub dry_run: bool,
    /// Inputs given as flags; in action mode they override `INPUT_*`.
    pub flags: RawInputs,
}

fn takes(scope: Scope, command: CommandName) -> bool {
    use CommandName::*;
    match scope {
        Scope::Fingerprint => true,
        Scope::Cache => command != Fingerprint,
        Scope::Restore => matches!(command, Restore | Explain),
        Scope::Save => command == Save,
        // The root action's restore (main) and save (post) steps both read these.
        Scope::Root => matches!(command, Restore | Save),
    }
}

fn input_args(command: CommandName) -> Vec<Arg> {
    INPUTS
        .iter()
        .filter(|spec| takes(spec.scope, command))
        .map(|spec| {
            let arg = Arg::new(spec.name).long(spec.name).help(spec.description);
            match spec.kind {
                InputKind::Bool => arg
                    .num_args(0..=1)
                    .require_equals(true)
                    .default_missing_value("true")
                    .value_parser(["true", "false"])
                    .action(ArgAction::Set),
                InputKind::Lines | InputKind::List => arg.value_name("VALUE").action(ArgAction::Append),
                InputKind::Text => arg.value_name("VALUE").action(ArgAction::Set),
            }
        })
        .collect()
}

pub fn command() -> Command {
    Command::new("exact-cache")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Cache generated CI artifacts; reuse them only under an exact fingerprint of the environment that made them")
        .subcommand_required(true)
        .arg_required_else_help(true)
        .arg(
            Arg::new("workspace")
                .long("workspace")
                .global(true)
                .value_name("DIR")
                .help("Directory that relative paths are relative to (default: $GITHUB_WORKSPACE, else the current directory)"),
        )
        .subcommand(
            Command::new("fingerprint")
                .about("Compute the key and write the fingerprint JSON; no network")
                .args(input_args(CommandName::Fingerprint)),
        )
        .subcommand(
            Command::new("restore")
                .about("Restore the entry for this exact fingerprint, or report why not")
                .args(input_args(CommandName::Restore)),
        )
        .subcommand(
            Command::new("save")
                .about("Save the `path` roots under this exact fingerprint")
                .args(input_args(CommandName::Save))
                                .arg(
                    Arg::new("post")
                        .long("post")
                        .action(ArgAction::SetTrue)
                        .help("Run as the root action's post step (uses the main step's key and result)"),
                ),
        )
        .subcommand(
            Command::new("explain")
                .about("Compare this fingerprint with the newest other entry of its prefix and name what differs")
                .args(input_args(CommandName::Explain)),
        )
        .subcommand(
            Command::new("list")
                .about("List the entries of a prefix (on this ref); `path` is not needed")
                .args(input_args(CommandName::List)),
        )
        .subcommand(
            Command::new("prune")
                .about("Delete all but the newest `prune-keep` entries of a prefix on this ref; `path` is not needed")
                .args(input_args(CommandName::Prune))
                .arg(Arg::new("dry-run").long("dry-run").action(ArgAction::SetTrue).help("Only list what would be deleted")),
        )
}

pub fn parse<I, T>(args: I) -> Result<Invocation, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let matches = command().try_get_matches_from(args)?;
    let workspace = matches.get_one::<String>("workspace").map(PathBuf::from);
    let (name, sub) = matches.subcommand().expect("a subcommand is required");
    let command = match name {
        "fingerprint" => CommandName::Fingerprint,
        "restore" => CommandName::Restore,
        "save" => CommandName::Save,
        "explain" => CommandName::Explain,
        "list" => CommandName::List,
        "prune" => CommandName::Prune,
        other => unreachable!("unknown subcommand {other}"),
    };
    let post = command == CommandName::Save && sub.get_flag("post");
    let dry_run = command == CommandName::Prune && sub.get_flag("dry-run");
    let mut flags = flags(sub, command);
    // Listing and pruning work on a prefix; the `path` lines only matter for keys and versions.
    if matches!(command, CommandName::List | CommandName::Prune) && flags.get("path").is_none() {
        flags.set("path", ".");
    }
    Ok(Invocation { command, post, workspace, dry_run, flags })
}

fn flags(m: &ArgMatches, command: CommandName) -> RawInputs {
    let mut raw = RawInputs::default();
    for spec in INPUTS.iter().filter(|s| takes(s.scope, command)) {
        if let Some(values) = m.get_many::<String>(spec.name) {
            let values: Vec<&str> = values.map(String::as_str).collect();
            raw.set(spec.name, values.join("\n"));
        }
    }
    raw
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_mirror_inputs() {
        let inv = parse([
            "exact-cache",
            "restore",
            "--path",
            "a",
            "--path",
            "b",
            "--strict",
            "--clean-on-miss=false",
            "--prefix",
            "p",
        ])
        .unwrap();
        assert_eq!(inv.command, CommandName::Restore);
        assert_eq!(inv.flags.get("path"), Some("a\nb"));
        assert_eq!(inv.flags.get("strict"), Some("true"));
        assert_eq!(inv.flags.get("clean-on-miss"), Some("false"));
        assert_eq!(inv.flags.get("lookup-only"), None);
        let save = parse(["exact-cache", "save", "--post", "--key", "k"]).unwrap();
        assert!(save.post);
        assert!(parse(["exact-cache", "fingerprint", "--key", "k"]).is_err(), "save-only input on fingerprint");
        command().debug_assert();
    }
}
