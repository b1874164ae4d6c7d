//! The stack's lookups through the backend: every slot version of one key looked up at once (one
//! thread each), for [`crate::stack`]'s finding.

use crate::backend::{Backend, BackendError, CacheEntry};
use crate::ids::{Key, Version};
use crate::stack::{Answer, SlotLookup};

/// Exact lookups of the slots of `key`'s stack.
pub(super) struct KeyLookups<'a> {
    pub backend: &'a dyn Backend,
    pub key: &'a Key,
}

impl SlotLookup for KeyLookups<'_> {
    type Entry = CacheEntry;
    type Error = BackendError;

    fn lookup_all(&self, versions: &[Version]) -> Vec<Result<Answer<CacheEntry>, BackendError>> {
        let (backend, key) = (self.backend, self.key);
        let found = match versions {
            [version] => vec![backend.lookup(key, version)],
            _ => std::thread::scope(|scope| {
                let lookups: Vec<_> = versions.iter().map(|v| scope.spawn(move || backend.lookup(key, v))).collect();
                lookups.into_iter().map(|l| l.join().expect("a lookup thread panicked")).collect()
            }),
        };
        found
            .into_iter()
            .map(|result| {
                result.map(|entry| match entry {
                    Some(entry) if entry.key == *key => Answer::Ours(entry),
                    Some(other) => Answer::Offered(other.key),
                    None => Answer::Absent,
                })
            })
            .collect()
    }

    fn describe(&self, error: &BackendError) -> String {
        crate::text::error_chain(error)
    }
}
