//! The store matrix: every store the shared scenarios (`grow`, `safety`, `concurrency`, …) run
//! on, each one line of [`on_every_store!`]'s table — its test's name, the tools it needs, what
//! it can do, and how to start it empty for one test — and one [`Peer`]: what a step needs to
//! reach it (variables and inputs), how to plant, evict and corrupt its entries and count them.
//! The [`Store`] enum, its capabilities and [`Store::start`] are made from the table, and every
//! kind of store the product has ([`StoreKind::ALL`]) is in it.
//!
//! Adding a store: its line in the table and its `impl Peer`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use exact_cache::backend::azure::{self, AzureBlobBackend, AzureInputs};
use exact_cache::backend::http::Http;
use exact_cache::backend::s3::{self, S3Backend, S3Inputs};
use exact_cache::backend::{Backend, Catalog, Committed, Listed, LocalBackend, Reservation, StoreKind};
use exact_cache::backend::{V1Backend, V2Backend};
use exact_cache::content::names::{PACK_MARK, pack_version};
use exact_cache::content::{Hash, store::PackStore};
use exact_cache::env::Env;
use exact_cache::runner::SecretSink;

use super::s3::{BUCKET, S3Server};
use super::services::azurite::{self, ACCOUNT, ACCOUNT_KEY};
use super::services::{BlobStore, REST_TOKEN, Services};
use super::{Step, write};

/// One test per store for each scenario `fn name(store: Store)`, in a module of its name:
/// `grow::name::local_store`, `…::v1_service`, `…::v2_service`, `…::s3_store`, `…::azure_blob`;
/// the S3 and Azure ones need their servers (`#[needs(…)]`: a plain `cargo test` skips them).
/// `on_every_store!(where CAPABILITY: name, …)` runs a scenario on the stores that have that
/// capability of [`Store`]'s (`lists_entries`, `records_refs`).
macro_rules! on_every_store {
    // The table: `(test name, variant [tools it needs] lists|- records|- => an empty one)`, where
    // `lists`: `list` and `prune` reach its entries; `records`: it keeps the ref and the time of
    // each save in the entry itself, as the product writes them, so a test can plant past times.
    (@table $($then:tt)*) => {
        $crate::support::on_every_store!($($then)* [
            /// The local directory store (`EXACT_CACHE_DIR`).
            (local_store Local [] lists records => LocalDir::new())
            /// The v1 test service (act's and GHES's protocol); no catalog.
            (v1_service V1 [] - - => TestService::start(Protocol::V1))
            /// The v2 test service with its fast blob store; GitHub's service keeps its own times.
            (v2_service V2 [] lists - => TestService::start(Protocol::V2))
            /// An s3s-fs server (real SigV4 checks), entries under a prefix of its bucket.
            (s3_store S3 [s3s_fs] lists records => S3Prefix::start())
            /// A container of the shared Azurite (real Shared Key checks), entries under a prefix.
            (azure_blob AzureBlob [azurite] lists records => AzureContainer::start())
        ]);
    };
    (where $capability:ident: $($scenario:ident),+ $(,)?) => {$(
        $crate::support::on_every_store!(@table @filter $capability $scenario []);
    )+};
    ($($scenario:ident),+ $(,)?) => {$(
        $crate::support::on_every_store!(@table @filter any $scenario []);
    )+};
    // Keep each store of the table that has the capability, then write the scenario's module.
    (@filter any $scenario:ident [$($kept:tt)*]
        [$(#[$doc:meta])* ($test:ident $store:ident $tools:tt $lists:tt $records:tt => $start:expr) $($rest:tt)*]) => {
        $crate::support::on_every_store!(@filter any $scenario [$($kept)* ($test $store $tools)] [$($rest)*]);
    };
    (@filter lists_entries $scenario:ident [$($kept:tt)*]
        [$(#[$doc:meta])* ($test:ident $store:ident $tools:tt lists $records:tt => $start:expr) $($rest:tt)*]) => {
        $crate::support::on_every_store!(@filter lists_entries $scenario [$($kept)* ($test $store $tools)] [$($rest)*]);
    };
    (@filter records_refs $scenario:ident [$($kept:tt)*]
        [$(#[$doc:meta])* ($test:ident $store:ident $tools:tt $lists:tt records => $start:expr) $($rest:tt)*]) => {
        $crate::support::on_every_store!(@filter records_refs $scenario [$($kept)* ($test $store $tools)] [$($rest)*]);
    };
    (@filter $capability:ident $scenario:ident [$($kept:tt)*] [$(#[$doc:meta])* ($($skipped:tt)*) $($rest:tt)*]) => {
        $crate::support::on_every_store!(@filter $capability $scenario [$($kept)*] [$($rest)*]);
    };
    (@filter $capability:ident $scenario:ident [$(($test:ident $store:ident [$($tool:ident)*]))+] []) => {
        mod $scenario {
            $(
                #[$crate::support::needs($($tool),*)]
                fn $test() {
                    super::$scenario($crate::support::Store::$store);
                }
            )+
        }
    };
    // The `Store` enum, its capabilities and how to start each.
    (@define [$(
        $(#[$doc:meta])* ($test:ident $store:ident [$($tool:ident)*] $lists:tt $records:tt => $start:expr)
    )+]) => {
        /// A store the shared scenarios run on.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Store {
            $($(#[$doc])* $store),+
        }

        impl Store {
            /// Every store, in the matrix's order.
            pub const ALL: &[Store] = &[$(Store::$store),+];

            /// An empty store of this kind, for one test.
            pub fn start(self) -> Box<dyn Peer> {
                match self {
                    $(Store::$store => Box::new($start)),+
                }
            }

            /// Whether `list` and `prune` reach the store's entries.
            pub const fn lists_entries(self) -> bool {
                match self {
                    $(Store::$store => $crate::support::on_every_store!(@flag lists $lists)),+
                }
            }
        }
    };
    (@flag $name:ident -) => { false };
    (@flag $name:ident $flag:ident) => { true };
}
pub(crate) use on_every_store;

on_every_store!(@table @define);

impl Store {
    /// The product's kind of store this is.
    pub fn kind(self) -> StoreKind {
        match self {
            Store::Local => StoreKind::Local,
            Store::V1 | Store::V2 => StoreKind::Github,
            Store::S3 => StoreKind::S3,
            Store::AzureBlob => StoreKind::AzureBlob,
        }
    }

    /// Whether, of saves racing to commit one entry, exactly one wins and the others learn that
    /// it exists. s3s-fs checks `If-None-Match: *` without a lock: racing completions can each
    /// pass it, and the last one's object stays (S3 itself refuses all but one; `RacedS3` in
    /// `s3.rs` checks that the condition is sent and its refusal read).
    pub const fn refuses_racing_commits(self) -> bool {
        !matches!(self, Store::S3)
    }
}

/// Every kind of store the product has is in the matrix, so every shared scenario runs on it.
#[test]
fn the_matrix_has_every_kind_of_store() {
    let missing: Vec<StoreKind> =
        StoreKind::ALL.into_iter().filter(|kind| !Store::ALL.iter().any(|s| s.kind() == *kind)).collect();
    assert!(missing.is_empty(), "stores the matrix leaves out: {missing:?}");
}

/// A started store: what it does for the scenarios.
pub trait Peer: Send + Sync {
    /// The variables a step needs to reach the store.
    fn env(&self) -> Vec<(String, String)>;
    /// The inputs a step needs to choose the store.
    fn inputs(&self) -> Vec<(&'static str, String)>;
    /// Store `bytes` as the entry of `key` and `version`, as a hostile or broken writer would.
    fn plant(&self, key: &str, version: &str, bytes: &[u8]);
    /// Remove the entry of `key` and `version`, as eviction would.
    fn evict(&self, key: &str, version: &str);
    /// Flip a byte in the middle of the stored entry of `key` and `version`.
    fn corrupt(&self, key: &str, version: &str);
    /// How many entries a restore could find.
    fn entries(&self) -> usize;
    /// Uploads left neither committed nor abandoned cleanly.
    fn unfinished_uploads(&self) -> Vec<String>;
    /// Another empty store of this kind, on the same server where there is one.
    fn another(&self) -> Box<dyn Peer>;
    /// The kind of store this is: what it can do.
    fn store(&self) -> Store;
    /// Make every entry of `key` look saved (and last used) `by` earlier, as time passing
    /// would: for the stores that record refs and times ([`on_every_store!`]'s `records`).
    fn backdate(&self, key: &str, by: Duration) {
        let _ = (key, by);
        panic!("{:?} keeps no times of its own to plant", self.store());
    }

    /// The product's own backend for this store (what a step reaches through [`Peer::env`] and
    /// [`Peer::inputs`]).
    fn backend(&self) -> Box<dyn Backend>;
    /// The packs of `prefix` stored, as their keys (`<prefix>-pack.<hex>`) with their sizes,
    /// sorted.
    fn packs(&self, prefix: &str) -> Vec<(String, u64)> {
        let mut packs: Vec<(String, u64)> = pack_store(self.backend().as_ref(), prefix)
            .list()
            .unwrap()
            .into_iter()
            .map(|p| (format!("{prefix}{PACK_MARK}{}", p.name), p.size))
            .collect();
        packs.sort();
        packs
    }
    /// Remove the pack of key `key`, as eviction would.
    fn evict_pack(&self, key: &str) {
        let (prefix, name) = split_pack_key(key);
        pack_store(self.backend().as_ref(), prefix).delete(&name).unwrap();
    }
    /// Flip a byte in the middle of the stored pack of key `key`.
    fn corrupt_pack(&self, key: &str);

    /// Whether `list` and `prune` reach the store's entries ([`Store::lists_entries`]).
    fn lists_entries(&self) -> bool {
        self.store().lists_entries()
    }
    /// Whether, of saves racing to commit one entry, exactly one wins and the others learn that
    /// it exists ([`Store::refuses_racing_commits`]).
    fn refuses_racing_commits(&self) -> bool {
        self.store().refuses_racing_commits()
    }
    /// The inputs `list`, `prune` and `explain-misses` need besides [`Peer::inputs`] (the REST
    /// token of GitHub's catalog).
    fn catalog_inputs(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// A scratch step that reaches this store, its inputs given to every run.
    fn step(&self) -> Step {
        let mut step = Step::against(self.env());
        for (name, value) in self.inputs() {
            step.set_input(name, value);
        }
        step
    }
}

/// The pack store of `prefix` beside `backend`.
fn pack_store(backend: &dyn Backend, prefix: &str) -> Box<dyn PackStore> {
    backend.packs(prefix).expect("every store keeps packs")
}

/// A pack key's prefix and pack name.
fn split_pack_key(key: &str) -> (&str, Hash) {
    let (prefix, hex) = key.rsplit_once(PACK_MARK).unwrap_or_else(|| panic!("`{key}` is no pack key"));
    (prefix, Hash::parse(hex).unwrap_or_else(|| panic!("`{key}` is no pack key")))
}

/// Store `bytes` as the entry of `key` and `version` through the product's own client.
fn plant_through(client: &dyn Backend, key: &str, version: &str, bytes: &[u8]) {
    use std::io::Write;
    let Reservation::Reserved(mut upload) = client.reserve(&key.into(), &version.into()).unwrap() else {
        panic!("{key}@{version} is stored already: evict it first");
    };
    upload.write_all(bytes).unwrap();
    assert_eq!(upload.commit().unwrap(), Committed::Saved);
}

/// Remove the entry of `key` and `version` through the product's own catalog.
fn evict_through(catalog: &dyn Catalog, key: &str, version: &str) {
    catalog.delete(&listed(catalog, key, version)).unwrap();
}

/// The entry of `key` and `version`, as the product's own catalog lists it.
fn listed(catalog: &dyn Catalog, key: &str, version: &str) -> Listed {
    let listed = catalog.list(key, None).unwrap();
    listed.into_iter().find(|l| l.key == key && l.version == version).expect("the entry is stored")
}

/// The metadata field in which the product keeps an object store entry's creation time.
const CREATED: &str = "created";

/// The `created` metadata value (seconds since the epoch) `by` earlier.
fn earlier(created: &str, by: Duration) -> String {
    let seconds: u64 = created.parse().unwrap_or_else(|_| panic!("created = {created:?}"));
    (seconds - by.as_secs()).to_string()
}

/// The entries of `key`, as the product's own catalog lists them.
fn listed_of(catalog: &dyn Catalog, key: &str) -> Vec<Listed> {
    let listed: Vec<Listed> = catalog.list(key, None).unwrap().into_iter().filter(|l| l.key == key).collect();
    assert!(!listed.is_empty(), "no entry of {key}");
    listed
}

fn flip_middle_byte(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(file, bytes).unwrap();
}

/// The local directory store: `entries/<key>@<version>` and `tmp/` in a directory of its own.
struct LocalDir {
    dir: tempfile::TempDir,
}

impl LocalDir {
    fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }

    fn entry(&self, key: &str, version: &str) -> std::path::PathBuf {
        self.dir.path().join("entries").join(format!("{key}@{version}"))
    }

    fn files_in(&self, sub: &str) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(self.dir.path().join(sub)) else { return Vec::new() };
        dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    }
}

impl Peer for LocalDir {
    fn env(&self) -> Vec<(String, String)> {
        vec![("EXACT_CACHE_DIR".into(), self.dir.path().to_string_lossy().into_owned())]
    }

    fn inputs(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn plant(&self, key: &str, version: &str, bytes: &[u8]) {
        write(&self.entry(key, version), bytes);
    }

    fn evict(&self, key: &str, version: &str) {
        std::fs::remove_file(self.entry(key, version)).unwrap();
    }

    fn corrupt(&self, key: &str, version: &str) {
        flip_middle_byte(&self.entry(key, version));
    }

    fn entries(&self) -> usize {
        self.files_in("entries").len()
    }

    fn backend(&self) -> Box<dyn Backend> {
        Box::new(LocalBackend::new(self.dir.path()))
    }

    fn corrupt_pack(&self, key: &str) {
        flip_middle_byte(&self.dir.path().join("packs").join(key));
    }

    fn unfinished_uploads(&self) -> Vec<String> {
        self.files_in("tmp")
    }

    fn another(&self) -> Box<dyn Peer> {
        Box::new(Self::new())
    }

    fn store(&self) -> Store {
        Store::Local
    }

    /// The modification times of its files (`entries/`) and use records (`meta/`).
    fn backdate(&self, key: &str, by: Duration) {
        let mut moved = 0;
        for sub in ["entries", "meta"] {
            for name in self.files_in(sub).into_iter().filter(|name| name.starts_with(&format!("{key}@"))) {
                let file = std::fs::File::options().write(true).open(self.dir.path().join(sub).join(name)).unwrap();
                let modified = file.metadata().unwrap().modified().unwrap();
                file.set_modified(modified - by).unwrap();
                moved += 1;
            }
        }
        assert!(moved > 0, "no entry of {key}");
    }
}

#[derive(Clone, Copy)]
enum Protocol {
    V1,
    V2,
}

/// The local cache service (`support::services`), spoken to in one protocol; v2 blobs in the
/// fast blob store.
struct TestService {
    services: Services,
    protocol: Protocol,
}

impl TestService {
    fn start(protocol: Protocol) -> Self {
        Self { services: Services::start_with(BlobStore::Fast { name: String::new() }), protocol }
    }
}

impl Peer for TestService {
    fn env(&self) -> Vec<(String, String)> {
        match self.protocol {
            Protocol::V1 => self.services.v1_env(),
            Protocol::V2 => [self.services.v2_env(), self.services.rest_env()].concat(),
        }
    }

    fn inputs(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn plant(&self, key: &str, version: &str, bytes: &[u8]) {
        match self.protocol {
            Protocol::V1 => self.services.plant_v1(key, version, bytes),
            Protocol::V2 => self.services.plant(key, version, bytes),
        }
    }

    fn evict(&self, key: &str, version: &str) {
        self.services.forget(key, version);
    }

    fn corrupt(&self, key: &str, version: &str) {
        self.services.corrupt(key, version);
    }

    /// Packs are entries of the service too: not counted.
    fn entries(&self) -> usize {
        self.services.entries().iter().filter(|e| e.finalized && !e.key.contains(PACK_MARK)).count()
    }

    fn backend(&self) -> Box<dyn Backend> {
        let env = Env::from_pairs(self.env());
        let http = Arc::new(Http::new(&env, SecretSink::detached()).unwrap());
        let token = super::services::TOKEN.to_owned();
        match self.protocol {
            Protocol::V1 => {
                Box::new(V1Backend::new(http, env.non_empty("ACTIONS_CACHE_URL").unwrap(), Some(token)).unwrap())
            }
            Protocol::V2 => {
                Box::new(V2Backend::new(http, env.non_empty("ACTIONS_RESULTS_URL").unwrap(), token).unwrap())
            }
        }
    }

    /// Every ref's: the service's own record (its lookups see only their scope's).
    fn packs(&self, prefix: &str) -> Vec<(String, u64)> {
        let start = format!("{prefix}{PACK_MARK}");
        let mut packs: Vec<(String, u64)> = self
            .services
            .entries()
            .into_iter()
            .filter(|e| e.finalized && e.key.starts_with(&start) && e.version == pack_version().as_str())
            .map(|e| (e.key, e.size))
            .collect();
        packs.sort();
        packs
    }

    fn evict_pack(&self, key: &str) {
        self.services.forget(key, &pack_version());
    }

    fn corrupt_pack(&self, key: &str) {
        self.services.corrupt(key, &pack_version());
    }

    fn unfinished_uploads(&self) -> Vec<String> {
        self.services.unfinished()
    }

    fn another(&self) -> Box<dyn Peer> {
        Box::new(Self::start(self.protocol))
    }

    fn store(&self) -> Store {
        match self.protocol {
            Protocol::V1 => Store::V1,
            Protocol::V2 => Store::V2,
        }
    }

    fn catalog_inputs(&self) -> Vec<(&'static str, String)> {
        vec![("github-token", REST_TOKEN.into())]
    }
}

/// A prefix of its own in the bucket of an s3s-fs server, which [`Peer::another`] shares.
struct S3Prefix {
    server: Arc<S3Server>,
    prefix: String,
}

impl S3Prefix {
    fn start() -> Self {
        Self { server: Arc::new(S3Server::start()), prefix: "ci".into() }
    }

    /// The product's own S3 client for this prefix: what plants and evicts, through S3 itself.
    fn client(&self) -> S3Backend {
        let inputs = S3Inputs {
            bucket: Some(BUCKET.into()),
            prefix: Some(self.prefix.clone()),
            endpoint: Some(self.server.endpoint()),
            ..S3Inputs::default()
        };
        s3::connect(&inputs, &Env::from_pairs(self.env()), SecretSink::detached()).unwrap()
    }
}

impl Peer for S3Prefix {
    fn env(&self) -> Vec<(String, String)> {
        let mut env = self.server.env();
        env.push(("GITHUB_REF".into(), "refs/heads/main".into()));
        env
    }

    fn inputs(&self) -> Vec<(&'static str, String)> {
        self.server.inputs_at(&self.prefix)
    }

    fn plant(&self, key: &str, version: &str, bytes: &[u8]) {
        plant_through(&self.client(), key, version, bytes);
    }

    fn evict(&self, key: &str, version: &str) {
        evict_through(&self.client(), key, version);
    }

    fn corrupt(&self, key: &str, version: &str) {
        let listed = listed(&self.client(), key, version);
        flip_middle_byte(&self.server.object_file(Path::new(&listed.id)));
    }

    /// Not its packs (`<prefix>/packs/…`).
    fn entries(&self) -> usize {
        let packs = Path::new(&self.prefix).join("packs");
        self.server.objects().iter().filter(|o| o.starts_with(&self.prefix) && !o.starts_with(&packs)).count()
    }

    fn backend(&self) -> Box<dyn Backend> {
        Box::new(self.client())
    }

    fn corrupt_pack(&self, key: &str) {
        flip_middle_byte(&self.server.object_file(&Path::new(&self.prefix).join("packs").join(key)));
    }

    /// Of the whole server (every prefix [`Peer::another`] made).
    fn unfinished_uploads(&self) -> Vec<String> {
        self.server.unfinished_uploads()
    }

    fn another(&self) -> Box<dyn Peer> {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        let prefix = format!("ci-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        Box::new(Self { server: Arc::clone(&self.server), prefix })
    }

    fn store(&self) -> Store {
        Store::S3
    }

    /// Its `created` metadata and the object's modification time (S3's `LastModified`).
    fn backdate(&self, key: &str, by: Duration) {
        for entry in listed_of(&self.client(), key) {
            let object = Path::new(&entry.id);
            self.server.edit_metadata(object, |metadata| {
                let created = metadata[CREATED].as_str().unwrap().to_owned();
                metadata.insert(CREATED.into(), earlier(&created, by).into());
            });
            let file = std::fs::File::options().write(true).open(self.server.object_file(object)).unwrap();
            file.set_modified(SystemTime::now() - by).unwrap();
        }
    }
}

/// A container of its own in the shared Azurite (`services::azurite`), entries under `ci/`;
/// [`Peer::another`] makes another container.
struct AzureContainer {
    container: String,
}

impl AzureContainer {
    const PREFIX: &str = "ci";

    fn start() -> Self {
        Self { container: azurite::container("matrix") }
    }

    /// The product's own Azure client for this container: what plants, evicts and counts.
    fn client(&self) -> AzureBlobBackend {
        let inputs = AzureInputs {
            container: Some(self.container.clone()),
            prefix: Some(Self::PREFIX.into()),
            endpoint: Some(azurite::azurite().base()),
            ..AzureInputs::default()
        };
        azure::connect(&inputs, &Env::from_pairs(self.env()), SecretSink::detached()).unwrap()
    }
}

impl Peer for AzureContainer {
    /// The account key, and 1 MiB blocks: an archive of a few MiB goes up in blocks, so racing
    /// saves race their Put Block Lists.
    fn env(&self) -> Vec<(String, String)> {
        [
            ("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT),
            ("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY),
            ("GITHUB_REF", "refs/heads/main"),
            ("EXACT_CACHE_UPLOAD_BLOCK_MIB", "1"),
            ("EXACT_CACHE_SINGLE_PUT_MIB", "1"),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .into()
    }

    fn inputs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("backend", StoreKind::AzureBlob.name().into()),
            ("azure-container", self.container.clone()),
            ("azure-endpoint", azurite::azurite().base()),
            ("azure-prefix", Self::PREFIX.into()),
        ]
    }

    fn plant(&self, key: &str, version: &str, bytes: &[u8]) {
        plant_through(&self.client(), key, version, bytes);
    }

    fn evict(&self, key: &str, version: &str) {
        evict_through(&self.client(), key, version);
    }

    /// Through Azurite itself: the blob read and put back (with its metadata) by a Put Blob
    /// signed with the account SAS.
    fn corrupt(&self, key: &str, version: &str) {
        azurite::corrupt_blob(&self.container, &listed(&self.client(), key, version).id);
    }

    fn entries(&self) -> usize {
        Catalog::list(&self.client(), "", None).unwrap().len()
    }

    fn backend(&self) -> Box<dyn Backend> {
        Box::new(self.client())
    }

    fn corrupt_pack(&self, key: &str) {
        azurite::corrupt_blob(&self.container, &format!("{}/packs/{key}", Self::PREFIX));
    }

    /// Names with staged blocks and no blob: a save stopped before its Put Block List. Blocks a
    /// losing saver staged on the winner's name are not counted: Azure keeps no upload to
    /// abandon, and discards uncommitted blocks at the next commit or after a week.
    fn unfinished_uploads(&self) -> Vec<String> {
        azurite::uncommitted_blobs(&self.container)
    }

    fn another(&self) -> Box<dyn Peer> {
        Box::new(Self::start())
    }

    fn store(&self) -> Store {
        Store::AzureBlob
    }

    /// Its `created` metadata, through Set Blob Metadata.
    fn backdate(&self, key: &str, by: Duration) {
        for entry in listed_of(&self.client(), key) {
            azurite::edit_metadata(&self.container, &entry.id, |metadata| {
                let created = metadata.iter_mut().find(|(name, _)| name == CREATED).expect("a created time");
                created.1 = earlier(&created.1, by);
            });
        }
    }
}
