//! The integration tests as one crate (ripgrep's layout): the library and the test services are
//! built and linked once, and libtest spreads every test over its threads instead of running one
//! binary after another. A module per area; `support` holds what several of them use.
//!
//! Some need peers or minutes: `act_cache_server` and `act_examples` need nektos/act in `.venv`
//! (and `.venv-torch` for the TorchInductor example), `torch_facts` needs `.venv-torch` for its
//! comparison with importing torch, `s3` and the S3 store of the matrix that `grow`, `safety` and
//! `concurrency` run on (`support::stores`) need s3s-fs in `.tools/` (`scripts/test` installs all
//! of them), `emulated` runs the committed aarch64 binary under qemu-user (`qemu-user` and
//! `libc6-arm64-cross` from apt), `large` writes gigabytes; filter by module
//! (`cargo test --test integration -- --skip act_`). The slowest tests are marked
//! `#[ignore = "slow: …"]`: a plain `cargo test` leaves them out, `-- --include-ignored` (CI) runs
//! them. tests/dist.rs is a crate of its own (it says
//! why).
//!
//! Unix only: the tests drive modes, symlinks, processes and the unix-only fuzzing entry points.
//! Other platforms run `cargo check` and the library's unit tests (`.github/workflows/ci.yml`).
#![cfg(unix)]

mod act_cache_server;
mod act_examples;
mod action;
mod action_yml;
mod archive;
mod azure;
mod bounds;
mod cache_rules;
mod catalog_refs;
mod compile_worth;
mod concurrency;
mod content;
mod docs;
mod emulated;
mod explain_prune;
mod fault_matrix;
mod fingerprint;
mod follower;
mod fuzz_replay;
mod generations;
mod grow;
mod heal;
mod imports;
mod large;
mod local_backend;
mod official_client;
mod placement_property;
mod pool;
mod reads;
mod s3;
mod safety;
mod save_key;
mod self_hosted;
mod service_v1;
mod service_v2;
mod snapshots;
mod support;
mod torch_facts;
mod wine;
mod workflow_commands;
mod worth;
