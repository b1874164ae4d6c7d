//! Test support for the content core: pseudo-random bytes, and a pack store in memory with
//! faults to inject (a missing pack, corrupt bytes, ranges refused, a failing store).

use super::PackName;
use super::store::{ListedPack, PackStore, PackStoreError, Ranged};
use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::ops::Range;
use std::sync::Mutex;

/// `len` bytes of xorshift noise from `seed` (incompressible, different for every seed).
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend(x.to_le_bytes());
    }
    out.truncate(len);
    out
}

#[derive(Default)]
pub struct Faults {
    /// Packs the store answers as missing (evicted), though it holds them.
    pub missing: HashSet<PackName>,
    /// Packs whose bytes come back with one byte flipped at this offset.
    pub corrupt: Vec<(PackName, u64)>,
    /// Reads give whole packs (as the v1 service does).
    pub refuse_ranges: bool,
    /// Every call fails as trouble (the service is down).
    pub down: bool,
}

/// Packs in memory, with [`Faults`] and a count of what was read.
#[derive(Default)]
pub struct MemoryPackStore {
    pub packs: Mutex<BTreeMap<PackName, (Vec<u8>, i64)>>,
    pub faults: Mutex<Faults>,
    /// Every read: the pack and the range asked for.
    pub reads: Mutex<Vec<(PackName, Range<u64>)>>,
    /// When packs stored from now on were created.
    pub now: Mutex<i64>,
}

impl MemoryPackStore {
    pub fn new() -> Self {
        let store = MemoryPackStore::default();
        *store.now.lock().unwrap() = 1_800_000_000;
        store
    }

    pub fn bytes_stored(&self) -> u64 {
        self.packs.lock().unwrap().values().map(|(b, _)| b.len() as u64).sum()
    }

    pub fn bytes_read(&self) -> u64 {
        self.reads.lock().unwrap().iter().map(|(_, r)| r.end - r.start).sum()
    }

    fn down(&self) -> Result<(), PackStoreError> {
        if self.faults.lock().unwrap().down {
            return Err(PackStoreError::Trouble { what: "the store is down".into(), source: None });
        }
        Ok(())
    }
}

impl PackStore for MemoryPackStore {
    fn describe(&self) -> String {
        "packs in memory".into()
    }

    fn put(&self, name: &PackName, len: u64, bytes: &mut dyn Read) -> Result<(), PackStoreError> {
        self.down()?;
        let mut data = Vec::new();
        bytes.take(len).read_to_end(&mut data).map_err(|e| PackStoreError::trouble("read", e))?;
        assert_eq!(data.len() as u64, len);
        assert_eq!(super::Hash::of(&data), *name, "a pack is stored under the hash of its bytes");
        let now = *self.now.lock().unwrap();
        self.packs.lock().unwrap().entry(*name).or_insert((data, now));
        Ok(())
    }

    fn exist(&self, names: &[PackName]) -> Result<Vec<bool>, PackStoreError> {
        self.down()?;
        let (packs, faults) = (self.packs.lock().unwrap(), self.faults.lock().unwrap());
        Ok(names.iter().map(|n| packs.contains_key(n) && !faults.missing.contains(n)).collect())
    }

    fn ranges(&self) -> bool {
        !self.faults.lock().unwrap().refuse_ranges
    }

    fn read(&self, name: &PackName, range: Range<u64>) -> Result<Ranged<'_>, PackStoreError> {
        self.down()?;
        let faults = self.faults.lock().unwrap();
        let packs = self.packs.lock().unwrap();
        let Some((bytes, _)) = packs.get(name).filter(|_| !faults.missing.contains(name)) else {
            return Err(PackStoreError::Missing(*name));
        };
        let mut bytes = bytes.clone();
        for (_, at) in faults.corrupt.iter().filter(|(n, _)| n == name) {
            bytes[*at as usize] ^= 0x20;
        }
        if faults.refuse_ranges {
            self.reads.lock().unwrap().push((*name, 0..bytes.len() as u64));
            return Ok(Ranged::Whole(Box::new(std::io::Cursor::new(bytes))));
        }
        let end = range.end.min(bytes.len() as u64);
        self.reads.lock().unwrap().push((*name, range.start..end));
        let part = bytes.get(range.start as usize..end as usize).unwrap_or_default().to_vec();
        Ok(Ranged::Range(Box::new(std::io::Cursor::new(part))))
    }

    fn list(&self) -> Result<Vec<ListedPack>, PackStoreError> {
        self.down()?;
        let packs = self.packs.lock().unwrap();
        Ok(packs.iter().map(|(n, (b, c))| ListedPack { name: *n, size: b.len() as u64, created: *c }).collect())
    }

    fn delete(&self, name: &PackName) -> Result<(), PackStoreError> {
        self.down()?;
        self.packs.lock().unwrap().remove(name);
        Ok(())
    }
}
