//! How an input is defined and read. Each input is one [`Input`]: its name, kind, readers,
//! default, documentation and typed parse in one definition, read with [`Input::read`] — a
//! misspelt input is a compile error, not a quiet `false`. The registry that lists every
//! input (for `action.yml`, docs/inputs.md and the command line) is `config::INPUTS`; stores
//! contribute their own definitions to it.
//!
//! Rules for values: a default is written once, in the definition; an enumerated input accepts
//! its documented names only, as [`crate::choice`] reads them; a boolean is `true`, `True`,
//! `TRUE`, `false`, `False` or `FALSE`, as the official toolkit's `getBooleanInput` reads it.

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

choice::named_enum! {
    /// The CLI's commands by name, as the inputs name their readers (`crate::cli::Command` is
    /// each with its own flags).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum CommandName {
        Fingerprint => "fingerprint",
        Restore => "restore",
        Save => "save",
        Explain => "explain",
        List => "list",
        Prune => "prune",
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
}

/// Who reads an input, in one place: the commands that take it (as `--<name>`) and the entry
/// points whose `action.yml` declares it. Each input starts from one of the groups below and
/// adds or leaves out commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readers {
    commands: u8,
    entries: u8,
}

impl Readers {
    /// What enters the key, and what every command that computes one reads: every entry point.
    pub const FINGERPRINT: Readers = Readers::of(
        &[CommandName::Fingerprint, CommandName::Restore, CommandName::Save, CommandName::Explain],
        &EntryPoint::ALL,
    );
    /// What finds and writes entries: restore, save and explain; every entry point but
    /// `fingerprint`.
    pub const CACHE: Readers = Readers::of(
        &[CommandName::Restore, CommandName::Save, CommandName::Explain],
        &[EntryPoint::Root, EntryPoint::Restore, EntryPoint::Save],
    );
    /// What a restore does: restore and explain; the root action and `restore`.
    pub const RESTORE: Readers =
        Readers::of(&[CommandName::Restore, CommandName::Explain], &[EntryPoint::Root, EntryPoint::Restore]);
    /// What a save does: save; the `save` entry point.
    pub const SAVE: Readers = Readers::of(&[CommandName::Save], &[EntryPoint::Save]);
    /// The root action's alone, read by its restore (main) and save (post) steps.
    pub const ROOT: Readers = Readers::of(&[CommandName::Restore, CommandName::Save], &[EntryPoint::Root]);

    const fn of(commands: &[CommandName], entries: &[EntryPoint]) -> Readers {
        let mut readers = Readers { commands: 0, entries: 0 };
        let mut i = 0;
        while i < commands.len() {
            readers = readers.and(commands[i]);
            i += 1;
        }
        i = 0;
        while i < entries.len() {
            readers.entries |= 1 << entries[i] as u8;
            i += 1;
        }
        readers
    }

    /// Also read by `command`.
    pub const fn and(mut self, command: CommandName) -> Readers {
        self.commands |= 1 << command as u8;
        self
    }

    /// Not read by `command` (the entry points still declare it).
    pub const fn but(mut self, command: CommandName) -> Readers {
        self.commands &= !(1 << command as u8);
        self
    }

    /// Also read by `list` and `prune`, which work on a prefix: where the entries are, the
    /// prefix, and what places an entry in its key's stack (`path`, `compression`, `grow`).
    pub const fn and_listing(self) -> Readers {
        self.and(CommandName::List).and(CommandName::Prune)
    }
}

/// An input as documented and offered: everything but its parse.
#[derive(Clone, Copy, Debug)]
pub struct InputSpec {
    pub name: &'static str,
    pub kind: InputKind,
    pub readers: Readers,
    /// The default as `action.yml` declares it (empty: none).
    pub default: &'static str,
    /// The default as docs/inputs.md shows it where it is computed (`$CC` or `cc`, …).
    pub computed_default: &'static str,
    pub description: &'static str,
}

impl InputSpec {
    /// Whether the command line's `command` takes this input as a flag.
    pub fn read_by(&self, command: CommandName) -> bool {
        self.readers.commands & 1 << command as u8 != 0
    }

    /// Whether `entry`'s `action.yml` declares this input.
    pub fn declared_by(&self, entry: EntryPoint) -> bool {
        self.readers.entries & 1 << entry as u8 != 0
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
        readers: Readers,
        default: &'static str,
        description: &'static str,
        parse: Parse<T>,
    ) -> Self {
        Input { spec: InputSpec { name, kind, readers, default, computed_default: "", description }, parse }
    }

    /// The default as docs/inputs.md shows it, for a default that is computed.
    pub const fn computed_default(mut self, shown: &'static str) -> Self {
        self.spec.computed_default = shown;
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
    pub const fn flag(name: &'static str, readers: Readers, default: bool, description: &'static str) -> Self {
        let default = if default { "true" } else { "false" };
        Input::new(name, InputKind::Bool, readers, default, description, parse_bool)
    }
}

impl Input<Vec<String>> {
    /// Trimmed, blank ones dropped.
    pub const fn lines(name: &'static str, readers: Readers, description: &'static str) -> Self {
        Input::new(name, InputKind::Lines, readers, "", description, parse_lines)
    }

    pub const fn list(name: &'static str, readers: Readers, description: &'static str) -> Self {
        Input::new(name, InputKind::List, readers, "", description, parse_list)
    }

    /// Names of environment variables.
    pub const fn var_names(name: &'static str, readers: Readers, description: &'static str) -> Self {
        Input::new(name, InputKind::List, readers, "", description, parse_var_names)
    }
}

impl Input<Option<String>> {
    /// Free text, trimmed; `None` when blank.
    pub const fn text(name: &'static str, readers: Readers, description: &'static str) -> Self {
        Input::new(name, InputKind::Text, readers, "", description, parse_text)
    }
}

impl<T: Named> Input<T> {
    /// One of `T`'s names; `default` must be one.
    pub const fn choice(
        name: &'static str,
        readers: Readers,
        default: &'static str,
        description: &'static str,
    ) -> Self {
        Input::new(name, InputKind::Text, readers, default, description, parse_choice::<T>)
    }
}

impl<T: Named> Input<Option<T>> {
    /// One of `T`'s names, or nothing.
    pub const fn optional_choice(name: &'static str, readers: Readers, description: &'static str) -> Self {
        Input::new(name, InputKind::Text, readers, "", description, parse_optional_choice::<T>)
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

    static COUNT: Input<u32> = Input::new("count", InputKind::Text, Readers::CACHE, "4", "How many.", |v| {
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
    fn each_group_of_readers_names_its_commands_and_entry_points() {
        use CommandName as C;
        use EntryPoint as E;
        let commands = |readers: Readers| -> Vec<C> {
            let spec = Input::text("x", readers, "").spec;
            C::ALL.iter().copied().filter(|c| spec.read_by(*c)).collect()
        };
        let entries = |readers: Readers| -> Vec<E> {
            let spec = Input::text("x", readers, "").spec;
            E::ALL.into_iter().filter(|e| spec.declared_by(*e)).collect()
        };
        assert_eq!(commands(Readers::FINGERPRINT), [C::Fingerprint, C::Restore, C::Save, C::Explain]);
        assert_eq!(entries(Readers::FINGERPRINT), E::ALL);
        assert_eq!(commands(Readers::CACHE), [C::Restore, C::Save, C::Explain]);
        assert_eq!(entries(Readers::CACHE), [E::Root, E::Restore, E::Save]);
        assert_eq!(
            (commands(Readers::RESTORE), entries(Readers::RESTORE)),
            (vec![C::Restore, C::Explain], vec![E::Root, E::Restore])
        );
        assert_eq!((commands(Readers::SAVE), entries(Readers::SAVE)), (vec![C::Save], vec![E::Save]));
        assert_eq!((commands(Readers::ROOT), entries(Readers::ROOT)), (vec![C::Restore, C::Save], vec![E::Root]));
        // Listing adds `list` and `prune`; leaving a command out leaves its entry point's
        // declaration as it was.
        let listed = Readers::FINGERPRINT.and_listing();
        assert_eq!(commands(listed), [C::Fingerprint, C::Restore, C::Save, C::Explain, C::List, C::Prune]);
        let keep = Readers::CACHE.but(C::Restore).and(C::Prune);
        assert_eq!((commands(keep), entries(keep)), (vec![C::Save, C::Explain, C::Prune], entries(Readers::CACHE)));
    }
}
