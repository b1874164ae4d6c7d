//! The stack's lookups through the backend ([`crate::stack::SlotLookup`]): the newest base in one
//! call, and a round of exact lookups at once (one thread each).

use crate::backend::{Backend, BackendError, CacheEntry};
use crate::keys::{Key, Version};
use crate::stack::{self, Answer, SlotLookup};

/// The lookups of `key`'s stack.
pub(super) struct KeyLookups<'a> {
    pub backend: &'a dyn Backend,
    pub key: &'a Key,
}

impl KeyLookups<'_> {
    /// A found entry is the stack's only under a key of the stack (`<key>` or a well-formed
    /// later generation's); the service offered any other.
    fn answer(&self, found: Option<CacheEntry>) -> Answer<CacheEntry> {
        match found {
            Some(entry) if stack::generation_of(self.key, &entry.key).is_some() => {
                Answer::Ours(entry.key.clone(), entry)
            }
            Some(other) => Answer::Offered(other.key),
            None => Answer::Absent,
        }
    }
}

impl SlotLookup for KeyLookups<'_> {
    type Entry = CacheEntry;
    type Error = BackendError;

    fn newest_or(&self, newest_of: &str, key: &Key, version: &Version) -> Result<Answer<CacheEntry>, BackendError> {
        self.backend.lookup_newest_or(newest_of, key, version).map(|found| self.answer(found))
    }

    fn lookup_all(&self, names: &[(Key, Version)]) -> Vec<Result<Answer<CacheEntry>, BackendError>> {
        let backend = self.backend;
        let found = match names {
            [(key, version)] => vec![backend.lookup(key, version)],
            _ => std::thread::scope(|scope| {
                let lookups: Vec<_> = names.iter().map(|(k, v)| scope.spawn(move || backend.lookup(k, v))).collect();
                lookups.into_iter().map(|l| l.join().expect("a lookup thread panicked")).collect()
            }),
        };
        found.into_iter().map(|result| result.map(|found| self.answer(found))).collect()
    }

    fn describe(&self, error: &BackendError) -> String {
        crate::text::error_chain(error)
    }
}
