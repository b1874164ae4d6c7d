//! Entries that share content (guarantee 14, docs/content.md), on every store of the matrix:
//! each store's packs (stored whole once, found, read by ranges, listed, evicted), and the
//! service's scoping of packs (one saved on a pull request's ref is not found from the default
//! branch).

use exact_cache::backend::http::Http;
use exact_cache::backend::{Backend, V1Backend, V2Backend};
use exact_cache::content::names::PACK_MARK;
use exact_cache::content::store::{PackStoreError, Ranged};
use exact_cache::content::{Hash, store::PackStore};
use exact_cache::runner::SecretSink;
use std::io::Read;
use std::sync::Arc;

use crate::support::services::{DEFAULT_REF, Services, TOKEN};
use crate::support::{Store, noise, on_every_store};

/// The bytes `range` of pack `name`, however the store gives them (a range, or the whole pack).
fn read_range(packs: &dyn PackStore, name: &Hash, range: std::ops::Range<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    match packs.read(name, range.clone()).unwrap() {
        Ranged::Range(mut r) => {
            r.read_to_end(&mut out).unwrap();
        }
        Ranged::Whole(mut r) => {
            r.read_to_end(&mut out).unwrap();
            out = out[range.start as usize..range.end as usize].to_vec();
        }
    }
    out
}

on_every_store!(a_store_keeps_finds_reads_and_evicts_packs);

/// A pack goes in whole under its name, a second put of it keeps it, it is found by name and
/// read by range; it is no entry; corrupt, it reads otherwise; once evicted it is missing, for
/// `exist` and for a read.
fn a_store_keeps_finds_reads_and_evicts_packs(store: Store) {
    let peer = store.start();
    let backend = peer.backend();
    let packs = backend.packs("p").expect("every store keeps packs");
    let bytes = noise(300_000, 7);
    let name = Hash::of(&bytes);
    let other = Hash::of(b"never stored");
    assert_eq!(packs.exist(&[name, other]).unwrap(), [false, false], "{}", packs.describe());
    packs.put(&name, bytes.len() as u64, &mut &bytes[..]).unwrap();
    packs.put(&name, bytes.len() as u64, &mut &bytes[..]).unwrap();
    assert_eq!(packs.exist(&[other, name]).unwrap(), [false, true]);
    assert!(packs.ranges(), "{} reads ranges", packs.describe());
    assert_eq!(read_range(packs.as_ref(), &name, 1000..2000), bytes[1000..2000]);
    assert_eq!(read_range(packs.as_ref(), &name, 299_990..300_000), bytes[299_990..]);
    // A range past its end brings what there is: a short read, which the fetch calls corrupt.
    assert_eq!(read_range(packs.as_ref(), &name, 299_990..300_100).len(), 10);
    assert!(matches!(packs.read(&other, 0..10), Err(PackStoreError::Missing(_))));
    let key = format!("p{PACK_MARK}{name}");
    assert_eq!(peer.packs("p"), [(key.clone(), bytes.len() as u64)]);
    assert!(peer.packs("q").is_empty(), "another prefix's packs are its own");
    assert_eq!(peer.entries(), 0, "a pack is no entry");
    // A short stream stores nothing.
    let short = Hash::of(b"short");
    assert!(packs.put(&short, 100, &mut &b"short"[..]).is_err());
    assert_eq!(packs.exist(&[short]).unwrap(), [false]);
    // Corrupt in the store: the bytes read are not the bytes put (the fetch's hash finds it).
    peer.corrupt_pack(&key);
    assert_ne!(read_range(packs.as_ref(), &name, 0..300_000), bytes, "corrupt in the store");
    peer.evict_pack(&key);
    let fresh = peer.backend().packs("p").unwrap();
    assert_eq!(fresh.exist(&[name]).unwrap(), [false]);
    assert!(matches!(fresh.read(&name, 0..10), Err(PackStoreError::Missing(_))));
    assert!(peer.packs("p").is_empty());
}

/// The cache service scopes packs as it scopes entries: saved on a pull request's ref, a pack
/// is found from that ref and not from the default branch; one saved on the default branch is
/// found from both.
#[test]
fn a_pull_requests_pack_is_invisible_to_the_default_branch() {
    let services = Services::start();
    let env = |pairs| exact_cache::env::Env::from_pairs(pairs);
    let http = |env: &exact_cache::env::Env| Arc::new(Http::new(env, SecretSink::detached()).unwrap());
    let (v1, v2) = (env(services.v1_env()), env(services.v2_env()));
    let token = || TOKEN.to_owned();
    let backends: [Box<dyn Backend>; 2] = [
        Box::new(V1Backend::new(http(&v1), v1.non_empty("ACTIONS_CACHE_URL").unwrap(), Some(token())).unwrap()),
        Box::new(V2Backend::new(http(&v2), v2.non_empty("ACTIONS_RESULTS_URL").unwrap(), token()).unwrap()),
    ];
    for (i, backend) in backends.iter().enumerate() {
        let pack = |what: &str| format!("{what} pack of protocol {i}").into_bytes();
        let (pr_bytes, main_bytes) = (pack("pr"), pack("main"));
        let (on_pr, on_main) = (Hash::of(&pr_bytes), Hash::of(&main_bytes));
        services.set_ref("refs/pull/7/merge");
        let packs = backend.packs("p").unwrap();
        packs.put(&on_pr, pr_bytes.len() as u64, &mut &pr_bytes[..]).unwrap();
        services.set_ref(DEFAULT_REF);
        packs.put(&on_main, main_bytes.len() as u64, &mut &main_bytes[..]).unwrap();
        let from_main = backend.packs("p").unwrap();
        assert_eq!(from_main.exist(&[on_pr, on_main]).unwrap(), [false, true], "{}", from_main.describe());
        assert!(matches!(from_main.read(&on_pr, 0..4), Err(PackStoreError::Missing(_))));
        services.set_ref("refs/pull/7/merge");
        let from_pr = backend.packs("p").unwrap();
        assert_eq!(from_pr.exist(&[on_pr, on_main]).unwrap(), [true, true]);
        assert_eq!(read_range(from_pr.as_ref(), &on_pr, 0..2), &pr_bytes[..2]);
        services.set_ref(DEFAULT_REF);
    }
}
