//! exact-cache: persist expensive generated CI artifacts between jobs and reuse them **only**
//! under an exact fingerprint of the environment that made them.
//!
//! Data flow: [`cli`]/[`runner`] inputs → [`config::Config`] → [`fingerprint`] (key) →
//! [`commands`] → [`backend`] (where entries live) and [`archive`] (what an entry is, with its
//! [`manifest`]). Only [`runner`] talks to the GitHub Actions runner.

pub mod archive;
pub mod backend;
pub mod choice;
pub mod cli;
pub mod commands;
pub mod config;
pub mod content;
pub mod env;
pub(crate) mod file_mode;
pub mod fingerprint;
pub(crate) mod inputs;
pub mod keys;
pub mod manifest;
pub mod outcome;
pub mod paths;
pub(crate) mod preset;
pub(crate) mod process;
pub mod reads;
pub mod runner;
pub(crate) mod stack;
pub mod text;
pub mod units;
