//! How an input is defined and read. Each input is one [`Input`]: its name, kind, scope,
//! default, documentation and typed parse in one definition, read with [`Input::read`] — a
//! misspelt input is a compile error, not a quiet `false`. The registry that lists every
//! input (for `action.yml`, docs/inputs.md and the command line) is `config::INPUTS`; stores
//! contribute their own definitions to it.
//!
//! Rules for values: a default is written once, in the definition; an enumerated input accepts
//! its documented names only, with surrounding whitespace ignored and ASCII case not
//! significant ([`crate::choice`]); a boolean is `true`, `True`, `TRUE`, `false`, `False` or
//! `FALSE`, as the official toolkit's `getBooleanInput` reads it.

use crate::choice::{self, Named};
use crate::env;
use crate::paths::PathError;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Newline-separated lines.
    Lines,
    /// Names separated by commas, spaces or newlines.
    List,
    Bool,
    Text,
}

/// Which entry points take an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// fingerprint, restore and save.
    Fingerprint,
    /// restore and save.
    Cache,
    Restore,
    Save,
    /// Only the root action (read by its restore step and its post step).
    Root,
}

/// The CLI's commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandName {
    Fingerprint,
    Restore,
    Save,
    Explain,
    List,
    Prune,
}

/// What reads inputs: an entry point of the action, or a command of the CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    Action(EntryPoint),
    Cli(CommandName),
}

impl Scope {
    /// Whether `reader` takes the inputs of this scope.
    pub fn taken_by(self, reader: Reader) -> bool {
        use CommandName as C;
        use Reader::{Action, Cli};
        match self {
            Scope::Fingerprint => true,
            Scope::Cache => !matches!(reader, Action(EntryPoint::Fingerprint) | Cli(C::Fingerprint)),
            Scope::Restore => {
                matches!(reader, Action(EntryPoint::Root | EntryPoint::Restore) | Cli(C::Restore | C::Explain))
            }
            Scope::Save => matches!(reader, Action(EntryPoint::Save) | Cli(C::Save)),
            // The root action's restore (main) and save (post) steps both read these.
            Scope::Root => matches!(reader, Action(EntryPoint::Root) | Cli(C::Restore | C::Save)),
        }
    }
}

/// The action's entry points (`action.yml` files).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryPoint {
    /// `uses: owner/exact-cache@sha`: restore in `main`, save in `post`.
    Root,
    Restore,
    Save,
    Fingerprint,
}

impl EntryPoint {
    pub const ALL: [EntryPoint; 4] = [EntryPoint::Root, EntryPoint::Restore, EntryPoint::Save, EntryPoint::Fingerprint];

    /// The directory of its `action.yml`, relative to the repository root.
    pub fn dir(self) -> &'static str {
        match self {
            EntryPoint::Root => ".",
            EntryPoint::Restore => "restore",
            EntryPoint::Save => "save",
            EntryPoint::Fingerprint => "fingerprint",
        }
    }

    /// Whether this entry point declares an input of `scope`.
    pub fn takes(self, scope: Scope) -> bool {
        scope.taken_by(Reader::Action(self))
    }
}

/// Which of the catalog commands (`list`, `prune`), which work on a prefix rather than on paths
/// or a fingerprint, read an input besides the commands its scope gives it to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Catalog {
    /// Neither.
    No,
    /// Both: where the entries are (the store), the prefix, and what places an entry in its
    /// key's stack (`path`, `compression`, `grow`).
    Both,
    /// Only `prune`.
    Prune,
}

/// An input as documented and offered: everything but its parse.
#[derive(Clone, Copy, Debug)]
pub struct InputSpec {
    pub name: &'static str,
    pub kind: InputKind,
    pub scope: Scope,
    pub catalog: Catalog,
    /// The default as `action.yml` declares it (empty: none).
    pub default: &'static str,
    /// The default as docs/inputs.md shows it where it is computed (`$CC` or `cc`, …).
    pub computed_default: &'static str,
    pub description: &'static str,
    /// Read only by saves: the `restore` command does not offer it although its scope does.
    pub save_only: bool,
}

impl InputSpec {
    /// Whether the command line's `command` offers this input as a flag.
    pub fn offered_by(&self, command: CommandName) -> bool {
        self.scope.taken_by(Reader::Cli(command))
            && match command {
                CommandName::List => self.catalog == Catalog::Both,
                CommandName::Prune => self.catalog != Catalog::No,
                CommandName::Restore => !self.save_only,
                _ => true,
            }
    }
}

/// The parse of an input: its value (else its default; `None` when both are blank) → `T`, or
/// what is wrong with it.
pub type Parse<T> = fn(Option<&str>) -> Result<T, String>;

/// One input: its [`InputSpec`] and its typed parse.
pub struct Input<T: 'static> {
    pub spec: InputSpec,
    parse: Parse<T>,
}

impl<T> Input<T> {
    pub const fn new(
        name: &'static str,
        kind: InputKind,
        scope: Scope,
        default: &'static str,
        description: &'static str,
        parse: Parse<T>,
    ) -> Self {
        let spec = InputSpec {
            name,
            kind,
            scope,
            catalog: Catalog::No,
            default,
            computed_default: "",
            description,
            save_only: false,
        };
        Input { spec, parse }
    }

    /// Also read by the catalog commands.
    pub const fn catalog(mut self, catalog: Catalog) -> Self {
        self.spec.catalog = catalog;
        self
    }

    /// The default as docs/inputs.md shows it, for a default that is computed.
    pub const fn computed_default(mut self, shown: &'static str) -> Self {
        self.spec.computed_default = shown;
        self
    }

    /// Not offered by the `restore` command.
    pub const fn save_only(mut self) -> Self {
        self.spec.save_only = true;
        self
    }

    pub const fn name(&self) -> &'static str {
        self.spec.name
    }

    /// The value given, else the default, parsed; an error names the input.
    pub fn read(&self, raw: &RawInputs) -> Result<T, InputError> {
        let value = raw.get(self.spec.name).or_else(|| Some(self.spec.default).filter(|d| !d.trim().is_empty()));
        (self.parse)(value).map_err(|detail| InputError::Invalid { name: self.spec.name, detail })
    }

    /// Whether the input was given (not blank).
    pub fn given(&self, raw: &RawInputs) -> bool {
        raw.get(self.spec.name).is_some()
    }

    /// Whether the input was given, but blank (`--prefix=`, or `prefix: ''` in a workflow).
    pub fn given_blank(&self, raw: &RawInputs) -> bool {
        raw.values.get(self.spec.name).is_some_and(|v| v.trim().is_empty())
    }
}

impl Input<bool> {
    pub const fn flag(name: &'static str, scope: Scope, default: bool, description: &'static str) -> Self {
        let default = if default { "true" } else { "false" };
        Input::new(name, InputKind::Bool, scope, default, description, parse_bool)
    }
}

impl Input<Vec<String>> {
    /// Newline-separated lines, trimmed, blank ones dropped.
    pub const fn lines(name: &'static str, scope: Scope, description: &'static str) -> Self {
        Input::new(name, InputKind::Lines, scope, "", description, parse_lines)
    }

    /// Names separated by commas, spaces or newlines.
    pub const fn list(name: &'static str, scope: Scope, description: &'static str) -> Self {
        Input::new(name, InputKind::List, scope, "", description, parse_list)
    }

    /// Names of environment variables.
    pub const fn var_names(name: &'static str, scope: Scope, description: &'static str) -> Self {
        Input::new(name, InputKind::List, scope, "", description, parse_var_names)
    }
}

impl Input<Option<String>> {
    /// Free text, trimmed; `None` when blank.
    pub const fn text(name: &'static str, scope: Scope, description: &'static str) -> Self {
        Input::new(name, InputKind::Text, scope, "", description, parse_text)
    }
}

impl<T: Named> Input<T> {
    /// One of `T`'s names; `default` must be one.
    pub const fn choice(name: &'static str, scope: Scope, default: &'static str, description: &'static str) -> Self {
        Input::new(name, InputKind::Text, scope, default, description, parse_choice::<T>)
    }
}

impl<T: Named> Input<Option<T>> {
    /// One of `T`'s names, or nothing.
    pub const fn optional_choice(name: &'static str, scope: Scope, description: &'static str) -> Self {
        Input::new(name, InputKind::Text, scope, "", description, parse_optional_choice::<T>)
    }
}

pub fn parse_bool(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None => Ok(false),
        Some("true" | "True" | "TRUE") => Ok(true),
        Some("false" | "False" | "FALSE") => Ok(false),
        Some(other) => Err(format!("`{other}` is not `true` or `false`")),
    }
}

/// A boolean that may be left unset.
pub fn parse_optional_bool(value: Option<&str>) -> Result<Option<bool>, String> {
    value.map(|v| parse_bool(Some(v))).transpose()
}

fn parse_lines(value: Option<&str>) -> Result<Vec<String>, String> {
    Ok(value
        .map(|v| v.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default())
}

fn parse_list(value: Option<&str>) -> Result<Vec<String>, String> {
    Ok(value.map(split_list).unwrap_or_default())
}

fn parse_var_names(value: Option<&str>) -> Result<Vec<String>, String> {
    let names = parse_list(value)?;
    match names.iter().find(|n| !env::is_var_name(n)) {
        Some(bad) => Err(format!("`{bad}` is not a variable name")),
        None => Ok(names),
    }
}

pub fn parse_text(value: Option<&str>) -> Result<Option<String>, String> {
    Ok(value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()))
}

fn parse_optional_choice<T: Named>(value: Option<&str>) -> Result<Option<T>, String> {
    let Some(value) = value.map(str::trim) else {
        return Ok(None);
    };
    choice::parse(value).map(Some).ok_or_else(|| format!("`{value}` is not one of {}", choice::names::<T>()))
}

fn parse_choice<T: Named>(value: Option<&str>) -> Result<T, String> {
    parse_optional_choice(value)?.ok_or_else(|| format!("is empty: write one of {}", choice::names::<T>()))
}

/// Names separated by commas, spaces or newlines.
pub fn split_list(value: &str) -> Vec<String> {
    value.split([',', ' ', '\t', '\n', '\r']).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("input `{name}` is required")]
    Missing { name: &'static str },
    #[error("input `{name}`: {detail}")]
    Invalid { name: &'static str, detail: String },
    #[error("input `{name}`")]
    Path {
        name: &'static str,
        #[source]
        source: PathError,
    },
    #[error("{}", foreign_inputs_message(inputs))]
    ActionsCacheInputs { inputs: Vec<ForeignInput> },
    #[error("unknown input `{name}`: did you mean `{near}`? (as written, its value would be left out)")]
    Misspelt { name: String, near: &'static str },
}

/// An actions/cache input given to an entry point that does not declare it.
#[derive(Debug)]
pub struct ForeignInput {
    pub name: &'static str,
    pub hint: &'static str,
}

fn foreign_inputs_message(inputs: &[ForeignInput]) -> String {
    let each: Vec<String> =
        inputs.iter().map(|i| format!("input `{}` (from actions/cache): {}", i.name, i.hint)).collect();
    each.join("; ")
}

/// Input values as given, by input name. Unset and blank inputs are absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawInputs {
    values: BTreeMap<String, String>,
}

impl RawInputs {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str).filter(|v| !v.trim().is_empty())
    }

    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        self.values.insert(name.to_owned(), value.into());
    }

    /// `other`'s values replace ours.
    pub fn overlay(&mut self, other: RawInputs) {
        self.values.extend(other.values);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static COUNT: Input<u32> = Input::new("count", InputKind::Text, Scope::Cache, "4", "How many.", |v| {
        v.unwrap_or_default().trim().parse().map_err(|_| "not a number".to_owned())
    });

    #[test]
    fn a_definition_reads_its_value_else_its_default_and_names_itself_in_errors() {
        let mut raw = RawInputs::default();
        assert_eq!(COUNT.read(&raw).unwrap(), 4);
        raw.set("count", " 7 ");
        assert_eq!(COUNT.read(&raw).unwrap(), 7);
        raw.set("count", "  ");
        assert!(COUNT.given_blank(&raw) && !COUNT.given(&raw));
        assert_eq!(COUNT.read(&raw).unwrap(), 4, "blank reads as unset");
        raw.set("count", "many");
        assert_eq!(COUNT.read(&raw).unwrap_err().to_string(), "input `count`: not a number");
    }

    #[test]
    fn booleans_accept_the_toolkits_spellings_only() {
        for (value, expected) in [("true", true), ("True", true), ("TRUE", true), ("false", false), (" FALSE ", false)]
        {
            assert_eq!(parse_bool(Some(value)), Ok(expected));
        }
        assert_eq!(parse_bool(Some("yes")).unwrap_err(), "`yes` is not `true` or `false`");
        assert_eq!(parse_optional_bool(None), Ok(None));
    }

    #[test]
    fn catalog_commands_offer_only_what_they_read() {
        let prefix = Input::text("prefix", Scope::Fingerprint, "").catalog(Catalog::Both).spec;
        let keep = Input::text("prune-keep", Scope::Cache, "").catalog(Catalog::Prune).save_only().spec;
        let python = Input::text("python", Scope::Fingerprint, "").spec;
        assert!(prefix.offered_by(CommandName::List) && prefix.offered_by(CommandName::Prune));
        assert!(!keep.offered_by(CommandName::List) && keep.offered_by(CommandName::Prune));
        assert!(!keep.offered_by(CommandName::Restore) && keep.offered_by(CommandName::Save));
        assert!(!python.offered_by(CommandName::List) && python.offered_by(CommandName::Explain));
    }

    #[test]
    fn scopes_decide_which_entry_points_and_commands_take_an_input() {
        use CommandName as C;
        use Scope::*;
        let scopes = |reader: Reader| -> Vec<Scope> {
            [Fingerprint, Cache, Restore, Save, Root].into_iter().filter(|s| s.taken_by(reader)).collect()
        };
        assert_eq!(scopes(Reader::Action(EntryPoint::Root)), [Fingerprint, Cache, Restore, Root]);
        assert_eq!(scopes(Reader::Action(EntryPoint::Restore)), [Fingerprint, Cache, Restore]);
        assert_eq!(scopes(Reader::Action(EntryPoint::Save)), [Fingerprint, Cache, Save]);
        assert_eq!(scopes(Reader::Action(EntryPoint::Fingerprint)), [Fingerprint]);
        assert_eq!(scopes(Reader::Cli(C::Restore)), [Fingerprint, Cache, Restore, Root]);
        assert_eq!(scopes(Reader::Cli(C::Save)), [Fingerprint, Cache, Save, Root]);
        assert_eq!(scopes(Reader::Cli(C::Explain)), [Fingerprint, Cache, Restore]);
        assert_eq!(scopes(Reader::Cli(C::Fingerprint)), [Fingerprint]);
        assert_eq!(scopes(Reader::Cli(C::List)), [Fingerprint, Cache]);
        assert_eq!(scopes(Reader::Cli(C::Prune)), [Fingerprint, Cache]);
    }
}
