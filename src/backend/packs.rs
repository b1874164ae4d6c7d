//! What every store's pack store ([`crate::content::store::PackStore`]) shares: a backend
//! failure as a pack store's, a pack written through a store's own save ([`put_through`]), and a
//! range read as [`Ranged`]. Each store builds its pack store beside its backend
//! ([`super::Backend::packs`]).

use super::download::RangeRead;
use super::{Backend, BackendError, Committed, ErrorKind, Reservation, Upload};
use crate::content::PackName;
use crate::content::names::{pack_key, pack_version};
use crate::content::store::{PackStoreError, Ranged};
use std::io::{self, Read};

/// A backend failure about pack `name`: `Missing` when the store says it has no such pack.
pub(super) fn pack_error(name: &PackName, e: BackendError) -> PackStoreError {
    match e.kind {
        ErrorKind::NotFound => PackStoreError::Missing(*name),
        _ => trouble(e),
    }
}

/// A backend failure as trouble, the backend error whole inside (its kind and status survive:
/// [`BackendError::in_io`] finds it).
pub(super) fn trouble(e: BackendError) -> PackStoreError {
    PackStoreError::Trouble { what: e.message.clone(), source: Some(e.into_io()) }
}

/// The backend error inside a pack store's trouble, if there is one.
pub fn backend_error(e: &PackStoreError) -> Option<&BackendError> {
    match e {
        PackStoreError::Trouble { source: Some(io), .. } => BackendError::in_io(io),
        _ => None,
    }
}

impl From<RangeRead> for Ranged<'static> {
    fn from(read: RangeRead) -> Self {
        match read {
            RangeRead::Range(r) => Ranged::Range(r),
            RangeRead::Whole(r) => Ranged::Whole(r),
        }
    }
}

/// Store pack `name` of `prefix` (`len` bytes from `bytes`) as an entry of its key and the pack
/// version through `backend`'s own save: whole or not at all, and one already there is kept.
pub(super) fn put_through(
    backend: &dyn Backend,
    prefix: &str,
    name: &PackName,
    len: u64,
    bytes: &mut dyn Read,
) -> Result<(), PackStoreError> {
    let upload = match backend.reserve(&pack_key(prefix, name), &pack_version()) {
        Ok(Reservation::Reserved(upload)) => upload,
        Ok(Reservation::Exists) => return Ok(()),
        Err(e) if matches!(e.kind, ErrorKind::AlreadyExists | ErrorKind::Precondition) => return Ok(()),
        Err(e) => return Err(trouble(e)),
    };
    stream_into(upload, name, len, bytes)
}

/// Write pack `name` (`len` bytes from `bytes`) into a started save and commit it; a pack of
/// that name committed by another writer is as good.
pub(super) fn stream_into(
    mut upload: Box<dyn Upload>,
    name: &PackName,
    len: u64,
    bytes: &mut dyn Read,
) -> Result<(), PackStoreError> {
    // Read a MiB at a time (`io::copy` takes a `BufReader`'s buffer for its own; its default
    // is 8 KiB, a quarter of a million reads for a 2 GB save).
    let copied = match io::copy(&mut io::BufReader::with_capacity(1 << 20, bytes.take(len)), &mut upload) {
        Ok(n) => n,
        Err(e) => {
            return Err(match BackendError::from_io(e) {
                Ok(backend) => trouble(backend),
                Err(e) => PackStoreError::trouble(format!("cannot read pack {name}"), e),
            });
        }
    };
    if copied != len {
        let what = format!("pack {name} ended after {copied} of {len} bytes");
        return Err(PackStoreError::Trouble { what, source: None });
    }
    match upload.commit() {
        Ok(Committed::Saved | Committed::Exists) => Ok(()),
        // Another writer creating a pack of this very name (unique to one save): not stored.
        Ok(Committed::Creating) => {
            Err(PackStoreError::Trouble { what: format!("pack {name} is being created by another job"), source: None })
        }
        Err(e) => Err(trouble(e)),
    }
}
