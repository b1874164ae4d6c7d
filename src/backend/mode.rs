//! `ACTIONS_CACHE_MODE`, which the runner exports: what this job may do with the cache (GitHub's
//! rules of 2026: untrusted triggers get a mode that forbids writes, or reads). Unset, empty or
//! unknown is `write`. It holds for every store: a job the runner may not let write to GitHub's
//! cache does not write to the team's own store either.

use crate::env::Env;

crate::choice::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum CacheMode {
        None => "none",
        Read => "read",
        Write => "write",
        WriteOnly => "write-only",
    }
}

impl CacheMode {
    pub const VAR: &'static str = "ACTIONS_CACHE_MODE";

    /// The job's mode, and the value of [`CacheMode::VAR`] when it is none of the four (read
    /// as `write`).
    pub fn from_env(env: &Env) -> (CacheMode, Option<String>) {
        let Some(value) = env.get(Self::VAR).filter(|v| !v.trim().is_empty()) else {
            return (CacheMode::Write, None);
        };
        match crate::choice::parse(value) {
            Some(mode) => (mode, None),
            None => (CacheMode::Write, Some(value.to_owned())),
        }
    }

    /// Whether the job may look entries up and download them (`read`, `write`).
    pub fn readable(self) -> bool {
        matches!(self, CacheMode::Read | CacheMode::Write)
    }

    /// Whether the job may save entries (`write`, `write-only`).
    pub fn writable(self) -> bool {
        matches!(self, CacheMode::Write | CacheMode::WriteOnly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_modes_and_anything_else() {
        let mode = |value: Option<&str>| {
            CacheMode::from_env(&Env::from_pairs(value.map(|v| (CacheMode::VAR, v)).into_iter().collect::<Vec<_>>()))
        };
        assert_eq!(mode(None), (CacheMode::Write, None));
        assert_eq!(mode(Some(" ")), (CacheMode::Write, None));
        let table = [("none", false, false), ("read", true, false), ("write", true, true), ("write-only", false, true)];
        for (value, readable, writable) in table {
            let (m, unknown) = mode(Some(value));
            assert_eq!((m.name(), m.readable(), m.writable(), unknown), (value, readable, writable, None));
        }
        // As the toolkit reads it: trimmed, any case.
        assert_eq!(mode(Some(" Write-Only\n")).0, CacheMode::WriteOnly);
        // Anything else is `write`, and named for the warning.
        assert_eq!(mode(Some("readonly")), (CacheMode::Write, Some("readonly".to_owned())));
    }
}
