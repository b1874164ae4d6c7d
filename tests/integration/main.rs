//! The integration tests, one crate so the library and the test services are built and linked
//! once: a module per area, and `support` for what they share (the binary run as a step, trees
//! and hand-made archives, the local cache services, nektos/act).
//!
//! The tests that need test peers or minutes of machine time filter by module: `act_cache_server`
//! and `act_examples` need `.venv` (nektos/act) and `.venv-torch`, `large` writes gigabytes.
//! tests/dist.rs is a crate of its own (see there).

mod act_cache_server;
mod act_examples;
mod action;
mod action_yml;
mod archive;
mod concurrency;
mod explain_prune;
mod fault_matrix;
mod fingerprint;
mod fuzz_replay;
mod large;
mod local_backend;
mod official_client;
mod placement_property;
mod safety;
mod service_v1;
mod service_v2;
mod snapshots;
mod support;
mod workflow_commands;
