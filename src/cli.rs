//! Command-line parsing. Every input of [`INPUTS`] is also a flag, `--<name>`; list inputs
//! may be repeated (`--path a --path b`) or given as one newline-separated value, booleans
//! are switches (`--strict`, or `--strict=false`).

pub use crate::config::CommandName;
use crate::config::{INPUTS, InputKind, RawInputs, defs};
use clap::{Arg, ArgAction, ArgMatches, Command};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Invocation {
    pub command: CommandName,
    /// `save --post`: the post step of the root action (key and hit come from the main step).
    pub post: bool,
    pub workspace: Option<PathBuf>,
    /// `prune --dry-run`: list what would be deleted.
    pub dry_run: bool,
    /// `list --json`: the entries as a JSON document on stdout.
    pub json: bool,
    /// `--quiet`: only warnings, errors and outputs.
    pub quiet: bool,
    /// `--verbose`: the fingerprint's table too (outside Actions; `fingerprint` and `explain`
    /// always print it).
    pub verbose: bool,
    /// What `list` and `prune` work on besides their inputs.
    pub catalog: CatalogArgs,
    /// Inputs given as flags; in action mode they override `INPUT_*`.
    pub flags: RawInputs,
}

/// `list`'s and `prune`'s own flags.
#[derive(Clone, Debug, Default)]
pub struct CatalogArgs {
    /// `--ref REF`: only the entries saved on this ref.
    pub r#ref: Option<String>,
    /// `--all-refs`: every ref's entries, as one.
    pub all_refs: bool,
    /// `prune --older-than DURATION`: delete by age instead of by count.
    pub older_than: Option<Duration>,
    /// `path` or `preset` was given, so the version of the key's stack is known.
    pub versions_known: bool,
    /// `list --long`: full keys in the table.
    pub long: bool,
}

const ABOUT: &str =
    "Cache generated CI artifacts; reuse them only under an exact fingerprint of the environment that made them";
const QUIET_HELP: &str = "Print only warnings, errors and the command's output";
const VERBOSE_HELP: &str = "Print the fingerprint's table (every value in the key), not only its one-line summary";
const WORKSPACE_HELP: &str =
    "Directory that relative paths are relative to (default: $GITHUB_WORKSPACE, else the current directory)";

/// Each subcommand: its command, its name and what `--help` says about it.
const SUBCOMMANDS: [(CommandName, &str, &str); 6] = [
    (CommandName::Fingerprint, "fingerprint", "Compute the key and write the fingerprint JSON; no network"),
    (CommandName::Restore, "restore", "Restore the entry for this exact fingerprint, or report why not"),
    (CommandName::Save, "save", "Save the `path` roots under this exact fingerprint"),
    (
        CommandName::Explain,
        "explain",
        "Compare this fingerprint with the newest other entry of its prefix and name what differs",
    ),
    (
        CommandName::List,
        "list",
        "List the entries of a prefix (on this run's ref; outside Actions, of every ref); `path` is not needed",
    ),
    (
        CommandName::Prune,
        "prune",
        "Delete all but the newest `prune-keep` keys of a prefix on this run's ref (outside Actions, of each ref), \
         or those older than `--older-than`; `path` is not needed",
    ),
];

fn input_args(command: CommandName) -> Vec<Arg> {
    INPUTS
        .iter()
        .filter(|spec| spec.offered_by(command))
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

/// `--ref` and `--all-refs`: which refs' entries `list` and `prune` work on.
fn ref_args(all_refs_help: &'static str) -> [Arg; 2] {
    [
        Arg::new("ref").long("ref").value_name("REF").conflicts_with("all-refs").help(
            "Only the entries saved on this ref (`refs/heads/main`; empty: saved outside Actions); default: \
             $GITHUB_REF, else every ref",
        ),
        Arg::new("all-refs").long("all-refs").action(ArgAction::SetTrue).help(all_refs_help),
    ]
}

/// The flags a subcommand has besides its inputs.
fn own_args(command: CommandName) -> Vec<Arg> {
    match command {
        CommandName::Save => vec![
            Arg::new("post")
                .long("post")
                .action(ArgAction::SetTrue)
                .help("Run as the root action's post step (uses the main step's key and result)"),
        ],
        CommandName::Prune => [
            Arg::new("dry-run").long("dry-run").action(ArgAction::SetTrue).help("Only say what would be deleted"),
            Arg::new("older-than")
                .long("older-than")
                .value_name("DURATION")
                .value_parser(crate::units::parse_span)
                .help(
                    "Delete every entry neither created nor used (where the store records uses: local, GitHub) \
                     within DURATION (`7d`, `12h`, `1d12h`), the newest too, instead of keeping the newest \
                     `prune-keep`",
                ),
        ]
        .into_iter()
        .chain(ref_args("Every ref's entries as one: keep the newest `prune-keep` keys whatever their ref"))
        .collect(),
        CommandName::List => {
            [
                Arg::new("json").long("json").action(ArgAction::SetTrue).conflicts_with("long").help(
                    "Print the entries as a JSON array on stdout (key, size, created, last use, ref, version, slot)",
                ),
                Arg::new("long").long("long").action(ArgAction::SetTrue).help("Show full keys in the table"),
            ]
            .into_iter()
            .chain(ref_args("Every ref's entries (the default outside Actions)"))
            .collect()
        }
        _ => Vec::new(),
    }
}

fn subcommand((command, name, about): (CommandName, &'static str, &'static str)) -> Command {
    Command::new(name).about(about).args(input_args(command)).args(own_args(command))
}

pub fn command() -> Command {
    let workspace = Arg::new("workspace").long("workspace").global(true).value_name("DIR").help(WORKSPACE_HELP);
    Command::new("exact-cache")
        .version(env!("CARGO_PKG_VERSION"))
        .about(ABOUT)
        .subcommand_required(true)
        .arg_required_else_help(true)
        .arg(workspace)
        .arg(
            Arg::new("quiet")
                .long("quiet")
                .short('q')
                .global(true)
                .action(ArgAction::SetTrue)
                .conflicts_with("verbose")
                .help(QUIET_HELP),
        )
        .arg(Arg::new("verbose").long("verbose").short('v').global(true).action(ArgAction::SetTrue).help(VERBOSE_HELP))
        .subcommands(SUBCOMMANDS.map(subcommand))
}

pub fn parse<I, T>(args: I) -> Result<Invocation, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    if let Some(hint) = switch_with_separate_value(&args) {
        return Err(command().error(clap::error::ErrorKind::ArgumentConflict, hint));
    }
    let matches = command().try_get_matches_from(args)?;
    let workspace = matches.get_one::<String>("workspace").map(PathBuf::from);
    let (name, sub) = matches.subcommand().expect("a subcommand is required");
    let (command, _, _) = SUBCOMMANDS
        .into_iter()
        .find(|(_, known, _)| *known == name)
        .unwrap_or_else(|| unreachable!("unknown subcommand {name}"));
    let post = command == CommandName::Save && sub.get_flag("post");
    let dry_run = command == CommandName::Prune && sub.get_flag("dry-run");
    let json = command == CommandName::List && sub.get_flag("json");
    let quiet = matches.get_flag("quiet");
    let verbose = matches.get_flag("verbose");
    let mut flags = flags(sub, command);
    let mut catalog = CatalogArgs::default();
    if matches!(command, CommandName::List | CommandName::Prune) {
        catalog = CatalogArgs {
            r#ref: sub.get_one::<String>("ref").cloned(),
            all_refs: sub.get_flag("all-refs"),
            older_than: sub.try_get_one::<Duration>("older-than").ok().flatten().copied(),
            versions_known: defs::PATH.given(&flags) || defs::PRESET.given(&flags),
            long: command == CommandName::List && sub.get_flag("long"),
        };
        // Listing and pruning work on a prefix; the `path` lines only matter for versions.
        if !catalog.versions_known {
            flags.set(defs::PATH.name(), ".");
        }
    }
    Ok(Invocation { command, post, workspace, dry_run, json, quiet, verbose, catalog, flags })
}

/// `--strict false`: a switch takes its value only after `=`, so `false` would be read as an
/// unexpected argument (or, worse, taken for something else). Say what to write instead.
fn switch_with_separate_value(args: &[OsString]) -> Option<String> {
    args.windows(2).find_map(|pair| {
        let name = pair[0].to_str()?.strip_prefix("--")?;
        let value = pair[1].to_str()?;
        let is_switch = INPUTS.iter().any(|spec| spec.name == name && spec.kind == InputKind::Bool);
        (is_switch && ["true", "false"].contains(&value.to_ascii_lowercase().as_str()))
            .then(|| format!("a switch takes its value after `=`: write `--{name}={value}` (or `--{name}` for true)"))
    })
}

fn flags(m: &ArgMatches, command: CommandName) -> RawInputs {
    let mut raw = RawInputs::default();
    for spec in INPUTS.iter().filter(|spec| spec.offered_by(command)) {
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

    #[test]
    fn a_switch_with_a_separate_value_gets_a_hint() {
        let err = parse(["exact-cache", "restore", "--path", "a", "--strict", "false"]).unwrap_err().to_string();
        assert!(err.contains("write `--strict=false`"), "{err}");
        assert!(parse(["exact-cache", "restore", "--path", "false", "--strict"]).is_ok());
    }

    #[test]
    fn each_command_offers_only_the_flags_it_reads() {
        let flags = |name: &str| -> Vec<String> {
            let cmd = command();
            let sub = cmd.find_subcommand(name).unwrap();
            sub.get_arguments().filter_map(|a| a.get_long().map(str::to_owned)).collect()
        };
        assert!(!flags("restore").contains(&"prune".to_owned()));
        assert!(flags("save").contains(&"prune".to_owned()));
        let mut list = flags("list");
        list.sort();
        // The core's catalog inputs, and every store's: where the entries are.
        let stores = crate::backend::StoreKind::ALL.iter().flat_map(|kind| kind.inputs()).map(|spec| spec.name);
        let mut expected: Vec<&str> = [
            "prefix",
            "backend",
            "github-token",
            "path",
            "preset",
            "compression",
            "grow",
            "json",
            "long",
            "ref",
            "all-refs",
        ]
        .into_iter()
        .chain(stores)
        .collect();
        expected.sort();
        assert_eq!(list, expected);
        assert!(flags("prune").contains(&"prune-keep".to_owned()) && !flags("prune").contains(&"prune".to_owned()));
        assert!(!flags("list").contains(&"python".to_owned()));
        assert!(parse(["exact-cache", "list", "--python", "python3"]).is_err());
        assert!(flags("prune").contains(&"older-than".to_owned()) && !flags("list").contains(&"older-than".to_owned()));
    }

    #[test]
    fn list_and_prune_take_refs_ages_and_a_preset() {
        let prune = parse(["exact-cache", "prune", "--prefix=p", "--ref=refs/heads/x", "--older-than=1d12h"]).unwrap();
        assert_eq!(prune.catalog.r#ref.as_deref(), Some("refs/heads/x"));
        assert_eq!(prune.catalog.older_than, Some(Duration::from_secs(36 * 3600)));
        assert!(!prune.catalog.versions_known && prune.flags.get("path") == Some("."));
        let preset = parse(["exact-cache", "list", "--preset=torch-inductor", "--all-refs"]).unwrap();
        assert!(preset.catalog.all_refs && preset.catalog.versions_known);
        assert_eq!(preset.flags.get("path"), None, "the preset's paths alone, as the action has them");
        let err = parse(["exact-cache", "prune", "--older-than=7 days"]).unwrap_err().to_string();
        assert!(err.contains("`7 days` is not a duration"), "{err}");
        assert!(parse(["exact-cache", "prune", "--ref=r", "--all-refs"]).is_err(), "one or the other");
        assert!(parse(["exact-cache", "list", "--older-than=7d"]).is_err(), "prune only");
    }
}
