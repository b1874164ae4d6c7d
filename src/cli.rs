//! Command-line parsing: one [`Command`] per subcommand, each with its own flags (clap derive),
//! and every input of [`INPUTS`] a flag, `--<name>`, of the commands that read it. List inputs
//! may be repeated (`--path a --path b`) or given as one newline-separated value, booleans are
//! switches (`--strict`, or `--strict=false`).

use crate::choice::Named;
use crate::config::{CommandName, EntryPoint, INPUTS, InputKind, RawInputs};
use clap::{Arg, ArgAction, ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Invocation {
    pub command: Command,
    pub workspace: Option<PathBuf>,
    /// `--quiet`: only warnings, errors and outputs.
    pub quiet: bool,
    /// `--verbose`: the fingerprint's table too (outside Actions; `fingerprint` and `explain`
    /// always print it).
    pub verbose: bool,
    /// Inputs given as flags; in action mode they override `INPUT_*`.
    pub flags: RawInputs,
}

const REF_HELP: &str = "Only the entries saved on this ref (`refs/heads/main`; empty: saved outside Actions); default: \
                        $GITHUB_REF, else every ref";

/// A subcommand with its own flags; its inputs are in [`Invocation::flags`].
#[derive(Clone, Debug, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Compute the key and write the fingerprint JSON; no network
    Fingerprint,
    /// Restore the entry for this exact fingerprint, or report why not
    Restore,
    /// Save the `path` roots under this exact fingerprint
    Save {
        /// Run as the root action's post step (uses the main step's key and result)
        #[arg(long)]
        post: bool,
    },
    /// Compare this fingerprint with the newest other entry of its prefix and name what differs
    Explain,
    /// List the entries of a prefix (on this run's ref; outside Actions, of every ref); `path` is
    /// not needed
    List {
        /// Print the entries as a JSON array on stdout (key, size, created, last use, ref, version,
        /// slot)
        #[arg(long, conflicts_with = "long")]
        json: bool,
        /// Show full keys in the table
        #[arg(long)]
        long: bool,
        #[arg(long = "ref", value_name = "REF", conflicts_with = "all_refs", help = REF_HELP)]
        on_ref: Option<String>,
        /// Every ref's entries (the default outside Actions)
        #[arg(long)]
        all_refs: bool,
    },
    /// Delete all but the newest `prune-keep` keys of a prefix on this run's ref (outside Actions,
    /// of each ref), or those older than `--older-than`; `path` is not needed
    Prune {
        /// Only say what would be deleted
        #[arg(long)]
        dry_run: bool,
        /// Delete every entry neither created nor used (where the store records uses: local,
        /// GitHub) within DURATION (`7d`, `12h`, `1d12h`), the newest too, instead of keeping the
        /// newest `prune-keep`
        #[arg(long, value_name = "DURATION", value_parser = crate::units::parse_span)]
        older_than: Option<Duration>,
        #[arg(long = "ref", value_name = "REF", conflicts_with = "all_refs", help = REF_HELP)]
        on_ref: Option<String>,
        /// Every ref's entries as one: keep the newest `prune-keep` keys whatever their ref
        #[arg(long)]
        all_refs: bool,
    },
}

impl Command {
    pub fn name(&self) -> CommandName {
        match self {
            Command::Fingerprint => CommandName::Fingerprint,
            Command::Restore => CommandName::Restore,
            Command::Save { .. } => CommandName::Save,
            Command::Explain => CommandName::Explain,
            Command::List { .. } => CommandName::List,
            Command::Prune { .. } => CommandName::Prune,
        }
    }

    /// The entry point whose inputs it receives in action mode. The root action's main step
    /// and the `restore` entry point both run `restore`; the root action declares every input
    /// the `restore` entry point does, and more. The catalog commands are no entry point.
    pub fn entry_point(&self) -> Option<EntryPoint> {
        match self {
            Command::Fingerprint => Some(EntryPoint::Fingerprint),
            Command::Restore | Command::Save { post: true } => Some(EntryPoint::Root),
            Command::Save { post: false } => Some(EntryPoint::Save),
            Command::Explain | Command::List { .. } | Command::Prune { .. } => None,
        }
    }

    /// Whether it computes a key from the inputs: `save` given `key` takes the restore's, and
    /// `list` and `prune` work on a prefix.
    pub fn computes_key(&self, key_given: bool) -> bool {
        match self {
            Command::Fingerprint | Command::Restore | Command::Explain => true,
            Command::Save { .. } => !key_given,
            Command::List { .. } | Command::Prune { .. } => false,
        }
    }
}

const ABOUT: &str =
    "Cache generated CI artifacts; reuse them only under an exact fingerprint of the environment that made them";

#[derive(Parser)]
#[command(name = "exact-cache", version, about = ABOUT, subcommand_required = true, arg_required_else_help = true)]
struct Args {
    /// Directory that relative paths are relative to (default: $GITHUB_WORKSPACE, else the
    /// current directory)
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print only warnings, errors and the command's output
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print the fingerprint's table (every value in the key), not only its one-line summary
    #[arg(long, short, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

/// The command line: [`Command`]'s subcommands, each with the inputs it reads as flags.
pub fn command() -> clap::Command {
    CommandName::ALL
        .iter()
        .fold(Args::command(), |cli, &name| cli.mut_subcommand(name.name(), |sub| sub.args(input_args(name))))
}

fn input_args(command: CommandName) -> Vec<Arg> {
    INPUTS
        .iter()
        .filter(|spec| spec.read_by(command))
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
    let Args { workspace, quiet, verbose, command } = Args::from_arg_matches(&matches)?;
    let (_, sub) = matches.subcommand().expect("a subcommand is required");
    let flags = flags(sub, command.name());
    Ok(Invocation { command, workspace, quiet, verbose, flags })
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
    for spec in INPUTS.iter().filter(|spec| spec.read_by(command)) {
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
        assert_eq!(inv.command, Command::Restore);
        assert_eq!(inv.flags.get("path"), Some("a\nb"));
        assert_eq!(inv.flags.get("strict"), Some("true"));
        assert_eq!(inv.flags.get("clean-on-miss"), Some("false"));
        assert_eq!(inv.flags.get("lookup-only"), None);
        let save = parse(["exact-cache", "save", "--post", "--key", "k"]).unwrap();
        assert_eq!((save.command, save.flags.get("key")), (Command::Save { post: true }, Some("k")));
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
        assert!(parse(["exact-cache", "restore", "--json"]).is_err(), "`--json` is `list`'s alone");
        assert!(parse(["exact-cache", "list", "--dry-run"]).is_err(), "`--dry-run` is `prune`'s alone");
    }

    #[test]
    fn list_and_prune_take_refs_ages_and_a_preset_and_no_path() {
        let prune = parse(["exact-cache", "prune", "--prefix=p", "--ref=refs/heads/x", "--older-than=1d12h"]).unwrap();
        let Command::Prune { on_ref, older_than, dry_run: false, all_refs: false } = prune.command else { panic!() };
        assert_eq!(on_ref.as_deref(), Some("refs/heads/x"));
        assert_eq!(older_than, Some(Duration::from_secs(36 * 3600)));
        assert_eq!(prune.flags.get("path"), None, "nothing given, nothing made up");
        let preset = parse(["exact-cache", "list", "--preset=torch-inductor", "--all-refs"]).unwrap();
        assert!(matches!(preset.command, Command::List { all_refs: true, json: false, .. }));
        assert_eq!(preset.flags.get("preset"), Some("torch-inductor"));
        let err = parse(["exact-cache", "prune", "--older-than=7 days"]).unwrap_err().to_string();
        assert!(err.contains("`7 days` is not a duration"), "{err}");
        assert!(parse(["exact-cache", "prune", "--ref=r", "--all-refs"]).is_err(), "one or the other");
        assert!(parse(["exact-cache", "list", "--older-than=7d"]).is_err(), "prune only");
    }
}
