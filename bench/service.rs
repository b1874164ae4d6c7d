//! The benchmark's cache service: the local v2 Twirp service of the tests, run as a process.
//!
//!   cargo run --release --example bench-service -- azurite <host:port>   # host-style Azurite
//!   cargo run --release --example bench-service -- fast <account name>   # the minimal blob store
//!
//! Prints one JSON line with the environment a runner would give a node action, then serves
//! until its standard input closes. `EXACT_CACHE_AZURITE_PORT` names the running Azurite.

#[path = "../tests/integration/support/services/mod.rs"]
#[allow(dead_code, unused_imports, reason = "the benchmark runs the v2 service alone: no faults, v1 or REST")]
mod services;

use services::{BlobStore, Services};
use std::io::Read;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let store = match args.first().map(String::as_str) {
        Some("azurite") => BlobStore::AzuriteHostStyle { host: args.get(1).cloned().expect("host:port") },
        Some("fast") => BlobStore::Fast { name: args.get(1).cloned().expect("account name") },
        _ => {
            eprintln!("usage: bench-service azurite <host:port> | fast <account name>");
            std::process::exit(2);
        }
    };
    let services = Services::start_with(store);
    let env: serde_json::Map<String, serde_json::Value> =
        services.v2_env().into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect();
    println!("{}", serde_json::json!({ "env": env, "url": services.url }));
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}
