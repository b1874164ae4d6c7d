//! exact-cache: persist expensive generated CI artifacts between jobs and reuse them **only**
//! under an exact fingerprint of the environment that made them.
//!
//! Data flow: [`cli`]/[`runner`] inputs → [`config::Config`] → [`fingerprint`] (key) →
//! [`commands`] → [`backend`] (where entries live) and [`archive`] (what an entry is, with its
//! [`manifest`]). Only [`runner`] talks to the GitHub Actions runner.

pub mod archive;
pub mod backend;
pub mod cli;
pub mod commands;
pub mod config;
pub mod env;
pub mod fingerprint;
#[cfg(unix)]
#[doc(hidden)]
pub mod fuzzing;
pub mod github;
pub mod keys;
pub mod manifest;
pub mod outcome;
pub mod paths;
pub mod preset;
pub mod process;
pub mod runner;
pub mod units;
