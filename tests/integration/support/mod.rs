//! What the integration tests share: files and trees, the binary run as an Actions step, hand-made
//! archives and manifest lines; the store matrix the shared scenarios run on (`stores`), the
//! local cache services (`services`), the S3 server (`s3`), nektos/act (`act`) and the Windows
//! binary under wine (`wine`).
//!
//! A test that needs a tool from outside cargo is a `#[needs(tool)]` test instead of a `#[test]`
//! (the `exact-cache-test-macros` crate): a plain `cargo test` skips it and names the tool, and
//! `scripts/test` runs it. Each tool's locator here panics with its install step when it is
//! missing: [`s3::s3s_fs`], [`services::azurite::azurite`], [`act::act_bin`], [`torch_venv`],
//! [`qemu`], [`Wine::get`].

pub mod act;
mod archive;
pub mod log_model;
pub mod s3;
pub mod services;
mod shown;
mod step;
mod stores;
mod tree;
mod wine;

pub use archive::{TarBuilder, dir_entry, file_entry, link_entry};
pub use exact_cache_test_macros::needs;
pub(crate) use shown::assert_shown;
pub use shown::{planted, redactions, regex_escape};
pub use step::{CliRun, MEASURE_RSS, NO_STATE, Step, StepResult, exe, list_table};
pub(crate) use stores::on_every_store;
pub use stores::{Peer, Store};
pub use tree::{
    Immutable, counting, generate_model, noise, one_disk_heavy_test_at_a_time, random_file, set_exec, snapshot, write,
};
pub use wine::Wine;

/// The torch venv scripts/test prepares (PyPI torch; CPU is enough for TorchInductor).
pub fn torch_venv() -> std::path::PathBuf {
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-torch");
    assert!(
        venv.join("bin/python").exists(),
        "{} is missing: scripts/test installs torch there (pip install torch)",
        venv.display()
    );
    venv
}

/// A torch package in `dir` that the preset reads as torch 2.15.0 for the CPU (a `python -c`
/// started there finds it first); importing it fails, as the preset never does.
pub fn fake_torch(dir: &std::path::Path) {
    write(&dir.join("torch/__init__.py"), b"raise SystemExit('imported')\n");
    write(&dir.join("torch/version.py"), b"__version__ = '2.15.0+cpu'\ncuda = None\nhip = None\n");
}
