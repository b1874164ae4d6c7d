//! What every object store (S3, Azure Blob) shares, written once over each store's
//! [`ObjectClient`]: the [`ObjectBackend`], which is both the store's backend and its catalog,
//! its packs ([`ObjectPacks`]), and the parses of the prefix and endpoint inputs. How entries are
//! kept inside an object store is [`super::entries`].

mod backend;
mod catalog;
mod client;
mod packs;

pub use backend::ObjectBackend;
pub use client::{Needs, NewEntry, Object, ObjectClient};
pub use packs::{ObjectPacks, PACKS_DIR};

use crate::inputs::{Input, InputKind, Readers};

/// A store's prefix input (`<store>-prefix`), read by the catalog commands too.
pub const fn prefix_input(name: &'static str, description: &'static str) -> Input<Option<String>> {
    Input::new(name, InputKind::Text, Readers::CACHE.and_listing(), "", description, parse_prefix)
}

/// A store's endpoint input (`<store>-endpoint`), read by the catalog commands too.
pub const fn endpoint_input(name: &'static str, description: &'static str) -> Input<Option<String>> {
    Input::new(name, InputKind::Text, Readers::CACHE.and_listing(), "", description, parse_endpoint)
}

/// An object store's endpoint input: an `http(s)` URL with a host; `None` when not given.
pub fn parse_endpoint(value: Option<&str>) -> Result<Option<String>, String> {
    let Some(e) = value.map(str::trim).filter(|e| !e.is_empty()) else { return Ok(None) };
    let parsed = url::Url::parse(e).ok().filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some());
    match parsed {
        Some(_) => Ok(Some(e.to_owned())),
        None => Err(format!("`{e}` is not an `http://` or `https://` URL")),
    }
}

/// An object store's prefix input: ASCII letters, digits, `-`, `_`, `.` and `/` between
/// non-empty segments other than `.` and `..`; `None` when not given.
pub fn parse_prefix(value: Option<&str>) -> Result<Option<String>, String> {
    let Some(p) = value.map(str::trim).filter(|p| !p.is_empty()) else { return Ok(None) };
    let segments: Vec<&str> = p.trim_matches('/').split('/').collect();
    let valid = p.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/'))
        && segments.iter().all(|s| !s.is_empty() && *s != "." && *s != "..");
    match valid {
        true => Ok(Some(p.to_owned())),
        false => Err(format!(
            "`{p}` is not a key prefix: use ASCII letters, digits, `-`, `_`, `.` and `/` between non-empty segments \
             other than `.` and `..`"
        )),
    }
}
