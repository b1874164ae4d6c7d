//! The Azure Blob backend through the library against Azurite (which checks every Shared Key
//! and SAS signature): round trips in one Put Blob and in blocks, exact-key misses, racing
//! saves, the catalog (list with the ref, delete), a SAS token instead of the key, a wrong key
//! and a missing container, with the backend built directly; and `backend: azure-blob` through
//! the binary. What every store must do (tampered and hostile entries, racing saves, `grow`) runs
//! on Azure Blob too, in the store matrix of `safety`, `concurrency` and `grow`.

use crate::support::needs;
use crate::support::noise;
use crate::support::services::azurite::{self, ACCOUNT, ACCOUNT_KEY};
use exact_cache::backend::azure::{self, AzureBlobBackend, AzureInputs};
use exact_cache::backend::{Backend, BackendError, Committed, ErrorKind, Reservation};
use exact_cache::backend::{Catalog, CatalogError};
use exact_cache::env::Env;
use exact_cache::keys::{Key, Version};
use exact_cache::runner::SecretSink;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

const VERSION: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The variables of a run: small blocks (so a few MiB go up in several), the account key
/// unless `credentials` says otherwise, then `extra`.
fn env(credentials: &[(&str, &str)], extra: &[(&str, &str)]) -> Env {
    let mut env = Env::from_pairs([
        ("EXACT_CACHE_UPLOAD_BLOCK_MIB", "0.25"),
        ("EXACT_CACHE_SINGLE_PUT_MIB", "0.25"),
        ("EXACT_CACHE_DOWNLOAD_CHUNK_MIB", "0.25"),
        ("EXACT_CACHE_RETRY_BASE_MS", "10"),
        ("GITHUB_REF", "refs/heads/main"),
    ]);
    let credentials =
        if credentials.is_empty() { &[("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY)][..] } else { credentials };
    for (name, value) in credentials.iter().chain(extra) {
        env.set(*name, *value);
    }
    env
}

fn backend_with(container: &str, env: &Env, sink: SecretSink) -> AzureBlobBackend {
    let inputs = AzureInputs {
        account: Some(ACCOUNT.into()),
        container: Some(container.into()),
        prefix: Some("ci".into()),
        endpoint: Some(azurite::azurite().base()),
    };
    azure::connect(&inputs, env, sink).unwrap()
}

fn backend(container: &str) -> AzureBlobBackend {
    backend_with(container, &env(&[], &[]), SecretSink::detached())
}

/// Save `bytes` under `key` and `VERSION`: how the commit ended.
fn save(backend: &AzureBlobBackend, key: &str, bytes: &[u8]) -> Result<Committed, BackendError> {
    let Reservation::Reserved(mut upload) = backend.reserve(&Key::from(key), &Version::from(VERSION))? else {
        return Ok(Committed::Exists);
    };
    upload.write_all(bytes).unwrap();
    upload.commit()
}

fn download(backend: &AzureBlobBackend, key: &str) -> Vec<u8> {
    let entry = backend.lookup(&Key::from(key), &Version::from(VERSION)).unwrap().expect("the entry");
    let mut bytes = Vec::new();
    backend.open(&entry).unwrap().read_to_end(&mut bytes).unwrap();
    bytes
}

#[needs(azurite)]
fn entries_round_trip_in_one_put_and_in_blocks_and_only_exact_keys_hit() {
    let c = azurite::container("round-trip");
    let backend = backend(&c);
    assert!(
        Backend::describe(&backend)
            .contains(&format!("Azure Blob container `{c}` of account `{ACCOUNT}`, prefix `ci/`"))
    );
    assert!(backend.lookup(&Key::from("k-small"), &Version::from(VERSION)).unwrap().is_none(), "nothing saved yet");
    let small = noise(1000, 1);
    let large = noise(3 << 20 | 123, 2);
    assert_eq!(save(&backend, "k-small", &small).unwrap(), Committed::Saved);
    assert_eq!(save(&backend, "k-large", &large).unwrap(), Committed::Saved);
    assert_eq!(download(&backend, "k-small"), small);
    assert!(download(&backend, "k-large") == large, "the blocks came back in order");
    let entry = backend.lookup(&Key::from("k-large"), &Version::from(VERSION)).unwrap().unwrap();
    assert_eq!(entry.size, Some(large.len() as u64));
    assert_eq!(backend.read_prefix(&entry, 100).unwrap(), large[..100]);
    // Another version with the same first 16 digits is another entry: a miss.
    let other = format!("{}ffff", &VERSION[..60]);
    assert!(backend.lookup(&Key::from("k-large"), &Version::from(&other)).unwrap().is_none());
    assert!(backend.lookup(&Key::from("k-missing"), &Version::from(VERSION)).unwrap().is_none());
    // A second save of the same key is `exists`, before anything is uploaded.
    assert!(matches!(backend.reserve(&Key::from("k-small"), &Version::from(VERSION)).unwrap(), Reservation::Exists));
}

#[needs(azurite)]
fn racing_saves_give_one_saved_and_one_exists() {
    let c = azurite::container("race");
    let backend = backend(&c);
    for (key, len) in [("k-small", 1000), ("k-blocks", 2 << 20)] {
        let reserve = || match backend.reserve(&Key::from(key), &Version::from(VERSION)).unwrap() {
            Reservation::Reserved(upload) => upload,
            Reservation::Exists => panic!("nothing is committed yet"),
        };
        let (mut first, mut second) = (reserve(), reserve());
        let (a, b) = (noise(len, 3), noise(len, 4));
        // Interleaved: both writers stage blocks under the same blob name.
        for (chunk_a, chunk_b) in a.chunks(100_000).zip(b.chunks(100_000)) {
            first.write_all(chunk_a).unwrap();
            second.write_all(chunk_b).unwrap();
        }
        assert_eq!(first.commit().unwrap(), Committed::Saved, "{key}");
        assert_eq!(second.commit().unwrap(), Committed::Exists, "{key}");
        assert!(download(&backend, key) == a, "{key}: the first writer's bytes, whole");
    }
}

#[needs(azurite)]
fn the_catalog_lists_with_the_ref_and_deletes() {
    let c = azurite::container("catalog");
    let backend = backend_with(&c, &env(&[], &[("GITHUB_REF", "refs/heads/café")]), SecretSink::detached());
    save(&backend, "build-a", b"first").unwrap();
    save(&backend, "build-b", b"second!").unwrap();
    save(&backend, "other-c", b"third").unwrap();
    let listed = backend.list("build-", None).unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let mut keys: Vec<_> = listed.iter().map(|l| (l.key.as_str(), l.size)).collect();
    keys.sort();
    assert_eq!(keys, [("build-a", 5), ("build-b", 7)]);
    for entry in &listed {
        assert_eq!((entry.version.as_str(), entry.r#ref.as_deref()), (VERSION, Some("refs/heads/café")));
        assert!(entry.id.starts_with("ci/build-"), "{}", entry.id);
        assert!(entry.created > 1_700_000_000, "{}", entry.created);
    }
    backend.delete(&listed[0]).unwrap();
    let left = backend.list("build-", None).unwrap();
    assert_eq!(left.len(), 1);
    assert_ne!(left[0].key, listed[0].key);
    // Deleting twice is fine; an id outside the prefix is refused.
    backend.delete(&listed[0]).unwrap();
    let stray = exact_cache::backend::Listed { id: "elsewhere/x".into(), ..listed[0].clone() };
    assert!(matches!(backend.delete(&stray), Err(CatalogError::NotLocalEntry { .. })));
    assert!(backend.lookup(&listed[0].key, &Version::from(VERSION)).unwrap().is_none());
}

#[needs(azurite)]
fn a_sas_token_works_in_place_of_the_key_and_is_masked() {
    let c = azurite::container("sas");
    let sas = azurite::account_sas();
    let sink = SecretSink::detached();
    let backend = backend_with(&c, &env(&[("AZURE_STORAGE_SAS_TOKEN", &sas)], &[]), sink.clone());
    let bytes = noise(600_000, 5);
    assert_eq!(save(&backend, "k-sas", &bytes).unwrap(), Committed::Saved);
    assert!(download(&backend, "k-sas") == bytes);
    assert_eq!(backend.list("k-", None).unwrap().len(), 1);
    assert!(sink.contains(&sas), "the token");
    assert!(sink.contains(&azurite::account_sas_signature()), "its signature alone");
}

#[needs(azurite)]
fn a_wrong_key_is_forbidden_at_once_and_never_shown() {
    let c = azurite::container("wrong-key");
    let wrong = "d3Jvbmcga2V5IGZvciB0aGUgdGVzdCwgbm90IGEgcmVhbCBvbmUgYXQgYWxsIQ==";
    // Retries would wait seconds: a refusal must not be retried.
    let env = env(&[("AZURE_STORAGE_ACCOUNT_KEY", wrong)], &[("EXACT_CACHE_RETRY_BASE_MS", "3000")]);
    let sink = SecretSink::detached();
    let backend = backend_with(&c, &env, sink.clone());
    assert!(sink.contains(wrong), "the key is masked before any request");
    let started = Instant::now();
    let e = backend.lookup(&Key::from("k"), &Version::from(VERSION)).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "retried: {:?}", started.elapsed());
    assert_eq!((e.kind, e.status), (ErrorKind::Forbidden, Some(403)), "{e}");
    // The message says access is denied, with the status and the server's code.
    let mut shown = crate::support::redactions(Path::new("[NONE]"));
    shown.add_filter(&crate::support::regex_escape(&c), "[CONTAINER]");
    shown.bind(|| insta::assert_snapshot!("azure_a_wrong_key", e.message));
    let Err(reserved) = backend.reserve(&Key::from("k"), &Version::from(VERSION)) else {
        panic!("reserved with a wrong key")
    };
    assert_eq!(reserved.kind, ErrorKind::Forbidden);
    let listed = backend.list("k", None).unwrap_err();
    assert!(matches!(listed, CatalogError::Forbidden { status: 403, .. }), "{listed:?}");
    for text in [e.to_string(), format!("{e:?}"), listed.to_string(), format!("{listed:?}")] {
        assert!(!text.contains(wrong) && !text.contains(ACCOUNT_KEY), "{text}");
    }
}

#[needs(azurite)]
fn a_missing_container_is_an_error_not_a_miss() {
    let backend = backend("no-such-container");
    let e = backend.lookup(&Key::from("k"), &Version::from(VERSION)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Fatal, "{e}");
    let shown = crate::support::redactions(Path::new("[NONE]"));
    shown.bind(|| insta::assert_snapshot!("azure_a_missing_container", e.message));
}

/// `backend: azure-blob` through the binary, as a workflow sets it: the account and key from
/// the Azure environment, the container and endpoint as inputs.
#[needs(azurite)]
fn the_azure_blob_backend_input_saves_restores_lists_and_prunes_through_the_binary() {
    use crate::support::{NO_STATE, Step, write};
    let name = azurite::container("binary");
    let endpoint = azurite::azurite().base();
    let mut step = Step::new();
    step.set_env("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT);
    step.set_env("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY);
    step.set_env("GITHUB_REF", "refs/heads/main");
    let weights = noise(300_000, 7);
    write(&step.ws.join("out/model.pth"), &weights);
    let store = [("backend", "Azure-Blob"), ("azure-container", &name), ("azure-endpoint", &endpoint)];
    let inputs: Vec<(&str, &str)> =
        [("path", "out"), ("native", "none"), ("prefix", "az")].into_iter().chain(store).collect();

    let miss = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(miss.output("miss-reason"), "not-found", "{}", miss.stdout);
    let save = step.run(&["save"], &inputs, NO_STATE);
    assert_eq!(save.output("save-result"), "saved", "{}", save.stdout);
    assert!(!step.cache.join("entries").exists(), "nothing went to the local store");
    std::fs::remove_dir_all(step.ws.join("out")).unwrap();
    let hit = step.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(hit.output("reused"), "true", "{}", hit.stdout);
    assert_eq!(std::fs::read(step.ws.join("out/model.pth")).unwrap(), weights);
    for r in [&miss, &save, &hit] {
        assert!(!r.readable().contains(ACCOUNT_KEY), "the account key never shows");
    }

    let catalog: Vec<(&str, &str)> = [("prefix", "az")].into_iter().chain(store).collect();
    let list = step.run(&["list"], &catalog, NO_STATE);
    assert_eq!(list.output("keys"), save.output("key"), "{}", list.stdout);
    let mut keep_none = catalog.clone();
    keep_none.push(("prune-keep", "1"));
    let pruned = step.run(&["prune", "--dry-run"], &keep_none, NO_STATE);
    assert_eq!(pruned.code, 0, "{}", pruned.stdout);

    let unnamed = step.run(&["save"], &[("path", "out"), ("backend", "azure-blob")], NO_STATE);
    assert_eq!(unnamed.code, 1);
    let bad = step.run(&["save"], &[("path", "out"), ("azure-container", "No_Such")], NO_STATE);
    // Each error names the input: required with `backend: azure-blob`; not a container name.
    let said = format!("--- no container\n{}--- a bad name\n{}", unnamed.said(), bad.said());
    crate::support::assert_shown!(step.dir.path(), "azure_container_input_errors", said);
}

/// Issue 30, finding 7: a restore needs no write access. With a SAS that may only read and
/// list, a restore of a saved entry hits (and explains a miss); a save is refused (a warning,
/// never a failed step), so a pull-request job given such credentials cannot claim a ref.
#[needs(azurite)]
fn a_restore_needs_only_read_access_and_a_read_only_save_claims_nothing() {
    use crate::support::{NO_STATE, Step, write};
    let name = azurite::container("read-only");
    let endpoint = azurite::azurite().base();
    let store = [("backend", "azure-blob"), ("azure-container", name.as_str()), ("azure-endpoint", endpoint.as_str())];
    let inputs: Vec<(&str, &str)> = [("path", "out"), ("native", "none"), ("prefix", "ro"), ("explain-misses", "true")]
        .into_iter()
        .chain(store)
        .collect();
    let mut writer = Step::new();
    writer.set_env("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT);
    writer.set_env("AZURE_STORAGE_ACCOUNT_KEY", ACCOUNT_KEY);
    write(&writer.ws.join("out/model.pth"), b"weights");
    let saved = writer.run(&["save"], &inputs, NO_STATE);
    assert_eq!(saved.output("save-result"), "saved", "{}", saved.stdout);

    let sas = azurite::read_only_account_sas();
    let mut reader = Step::new();
    reader.set_env("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT);
    reader.set_env("AZURE_STORAGE_SAS_TOKEN", &sas);
    reader.set_env("GITHUB_REF", "refs/heads/main");
    let hit = reader.run(&["restore"], &inputs, NO_STATE);
    assert_eq!(hit.output("reused"), "true", "{}", hit.stdout);
    assert_eq!(std::fs::read(reader.ws.join("out/model.pth")).unwrap(), b"weights");
    assert!(!hit.stdout.contains("::warning::"), "a read-only restore warns about nothing:\n{}", hit.stdout);
    let mut other: Vec<(&str, &str)> = inputs.clone();
    other.push(("variant", "other"));
    let miss = reader.run(&["restore"], &other, NO_STATE);
    assert_eq!(miss.output("miss-reason"), "not-found", "{}", miss.stdout);
    write(&reader.ws.join("out/model.pth"), b"a claim on main");
    let claim = reader.run(&["save"], &other, NO_STATE);
    assert_eq!(claim.code, 0, "{}", claim.stdout);
    assert_ne!(claim.output("save-result"), "saved", "{}", claim.stdout);
}
