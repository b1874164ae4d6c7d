//! A snapshot of the process environment, taken once at start-up.
//!
//! Everything else reads variables through [`Env`] instead of `std::env`, so tests can run
//! commands in-process with a controlled environment, and so the fingerprint never depends on
//! when a variable happened to be read. `Debug` prints names only: values may be tokens.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// Whether `name` can name an environment variable set by a step (`$GITHUB_ENV`) or read from
/// an input: ASCII letters, digits and `_`, not starting with a digit.
pub fn is_var_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

#[derive(Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The current process environment (variables that are not valid UTF-8 are skipped).
    pub fn capture() -> Self {
        Self {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self { vars: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect() }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// The value, or `None` when the variable is unset or empty.
    pub fn non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty())
    }

    pub fn is_true(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.vars.insert(name.into(), value.into());
    }

    pub fn remove(&mut self, name: &str) {
        self.vars.remove(name);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The user's home directory: `HOME` (or `USERPROFILE` on Windows), else the OS's idea of it.
    pub fn home_dir(&self) -> Option<PathBuf> {
        self.non_empty("HOME").or_else(|| self.non_empty("USERPROFILE")).map(PathBuf::from).or_else(dirs::home_dir)
    }
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}
