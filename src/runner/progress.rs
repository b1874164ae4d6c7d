//! Progress lines for long transfers: CI logs do not render bars, so a line every few seconds
//! (`restore: 1.2 GiB of 2.0 GiB (60%), 150.3 MiB/s`) and one final size/time/throughput line.

use super::Runner;
use crate::units;
use std::io::{self, Read};
use std::time::{Duration, Instant};

pub struct Progress<'a> {
    runner: &'a Runner,
    verb: &'static str,
    total: Option<u64>,
    done: u64,
    started: Instant,
    last_report: Instant,
    interval: Duration,
}

impl<'a> Progress<'a> {
    pub(super) fn new(runner: &'a Runner, verb: &'static str, total: Option<u64>, interval: Duration) -> Self {
        let now = Instant::now();
        Self { runner, verb, total, done: 0, started: now, last_report: now, interval }
    }

    pub fn add(&mut self, n: u64) {
        self.done += n;
        if self.last_report.elapsed() >= self.interval {
            self.last_report = Instant::now();
            let elapsed = self.started.elapsed();
            let rate = units::throughput(self.done, elapsed);
            let line = match self.total {
                Some(total) if total > 0 => format!(
                    "{}: {} of {} ({}%), {rate}",
                    self.verb,
                    units::bytes(self.done),
                    units::bytes(total),
                    self.done.saturating_mul(100) / total
                ),
                _ => format!("{}: {}, {rate}", self.verb, units::bytes(self.done)),
            };
            self.runner.info(&line);
        }
    }

    pub fn bytes(&self) -> u64 {
        self.done
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Print the final line: `<verb>: 2.0 GiB in 13.2 s (155.0 MiB/s)`.
    pub fn finish(&self) {
        let elapsed = self.started.elapsed();
        self.runner.info(&format!(
            "{}: {} in {} ({})",
            self.verb,
            units::bytes(self.done),
            units::duration(elapsed),
            units::throughput(self.done, elapsed)
        ));
    }
}

/// Counts bytes read through it.
pub struct ProgressReader<'a, R> {
    inner: R,
    progress: Progress<'a>,
}

impl<'a, R> ProgressReader<'a, R> {
    pub fn new(inner: R, progress: Progress<'a>) -> Self {
        Self { inner, progress }
    }

    pub fn progress(&self) -> &Progress<'a> {
        &self.progress
    }
}

impl<R: Read> Read for ProgressReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(n as u64);
        Ok(n)
    }
}
