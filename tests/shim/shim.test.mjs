// Tests of the action shim (dist/index.js) with Node's own test runner: `node --test tests/shim`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(import.meta.url);
const distDir = path.resolve(import.meta.dirname, '../../dist');
const shim = require(path.join(distDir, 'index.js'));

const sha256 = (data) => createHash('sha256').update(data).digest('hex');

/** A dist directory with the real shim and a fake binary per target (a shell script). */
function fakeDist(targets, { corrupt } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shim-'));
  for (const f of ['index.js', 'main.js', 'post.js', 'restore.js', 'save.js', 'fingerprint.js']) {
    fs.copyFileSync(path.join(distDir, f), path.join(dir, f));
  }
  const sums = [];
  for (const target of targets) {
    const name = shim.binaryName(target);
    const script =
      '#!/bin/sh\n' +
      'echo "fake binary $*"\n' +
      'echo "token=${ACTIONS_RUNTIME_TOKEN}"\n' +
      'printf %s "$*" > "$(dirname "$0")/args"\n' +
      'exit "${FAKE_EXIT:-0}"\n';
    fs.writeFileSync(path.join(dir, name), script, { mode: 0o644 });
    sums.push(`${corrupt ? '0'.repeat(64) : sha256(script)}  ${name}`);
  }
  fs.writeFileSync(path.join(dir, 'SHA256SUMS'), sums.sort().join('\n') + '\n');
  return dir;
}

/** Run an entry file of `dir` as the runner would, on Linux/X64. */
function runEntry(dir, entry, env = {}) {
  return spawnSync(process.execPath, [path.join(dir, `${entry}.js`)], {
    env: { PATH: process.env.PATH, RUNNER_OS: 'Linux', RUNNER_ARCH: 'X64', ...env },
    encoding: 'utf8',
  });
}

test('runner platforms map to binary targets, with Node as the fallback', () => {
  const cases = [
    [{ RUNNER_OS: 'Linux', RUNNER_ARCH: 'X64' }, 'Linux/X64'],
    [{ RUNNER_OS: 'Linux', RUNNER_ARCH: 'ARM64' }, 'Linux/ARM64'],
    [{ RUNNER_OS: 'macOS', RUNNER_ARCH: 'ARM64' }, 'macOS/ARM64'],
    [{ RUNNER_OS: 'Windows', RUNNER_ARCH: 'X64' }, 'Windows/X64'],
    [{}, 'Linux/X64'],
  ];
  for (const [env, platform] of cases) {
    assert.equal(shim.platformOf(env, 'linux', 'x64'), platform);
  }
  assert.equal(shim.platformOf({}, 'darwin', 'arm64'), 'macOS/ARM64');
  assert.equal(shim.platformOf({}, 'win32', 'x64'), 'Windows/X64');
  assert.equal(shim.TARGETS['Linux/X64'], 'x86_64-unknown-linux-gnu');
  assert.equal(shim.binaryName('x86_64-pc-windows-msvc'), 'exact-cache-x86_64-pc-windows-msvc.exe');
});

test('each entry point runs the binary with its mode, inherited stdio, env and exit code', () => {
  const dir = fakeDist(['x86_64-unknown-linux-gnu']);
  const expected = {
    main: 'restore',
    post: 'save --post',
    restore: 'restore',
    save: 'save',
    fingerprint: 'fingerprint',
  };
  for (const [entry, args] of Object.entries(expected)) {
    const r = runEntry(dir, entry, { ACTIONS_RUNTIME_TOKEN: 'tok', FAKE_EXIT: '3' });
    assert.equal(r.status, 3, `${entry}: ${r.stdout}${r.stderr}`);
    assert.match(r.stdout, new RegExp(`^fake binary ${args}$`, 'm'));
    assert.match(r.stdout, /^token=tok$/m, 'the environment reaches the binary');
    assert.equal(fs.readFileSync(path.join(dir, 'args'), 'utf8'), args);
  }
  const ok = runEntry(dir, 'main');
  assert.equal(ok.status, 0);
  assert.equal(fs.statSync(path.join(dir, 'exact-cache-x86_64-unknown-linux-gnu')).mode & 0o111, 0o111, 'made executable');
});

test('a binary that does not match SHA256SUMS is never run', () => {
  const dir = fakeDist(['x86_64-unknown-linux-gnu'], { corrupt: true });
  const r = runEntry(dir, 'main');
  assert.equal(r.status, 1);
  assert.match(r.stdout, /^::error::exact-cache binary exact-cache-x86_64-unknown-linux-gnu does not match dist\/SHA256SUMS \(expected 0{64}, found [0-9a-f]{64}\); refusing to run it$/m);
  assert.doesNotMatch(r.stdout, /fake binary/);
});

test('a platform without a binary fails clearly and lists the platforms that have one', () => {
  const dir = fakeDist(['x86_64-unknown-linux-gnu', 'aarch64-apple-darwin']);
  const r = runEntry(dir, 'main', { RUNNER_OS: 'Windows', RUNNER_ARCH: 'ARM64' });
  assert.equal(r.status, 1);
  assert.match(
    r.stdout,
    /^::error::exact-cache has no binary for Windows\/ARM64; this release has binaries for: Linux\/X64, macOS\/ARM64$/m,
  );
  // Listed in SHA256SUMS but missing on disk: not available.
  fs.rmSync(path.join(dir, 'exact-cache-aarch64-apple-darwin'));
  const r2 = runEntry(dir, 'main', { RUNNER_OS: 'macOS', RUNNER_ARCH: 'ARM64' });
  assert.equal(r2.status, 1);
  assert.match(r2.stdout, /no binary for macOS\/ARM64; this release has binaries for: Linux\/X64$/m);
});

test('the committed dist binary matches the committed SHA256SUMS', () => {
  const file = shim.resolveBinary(distDir, { RUNNER_OS: 'Linux', RUNNER_ARCH: 'X64' });
  assert.equal(path.basename(file), 'exact-cache-x86_64-unknown-linux-gnu');
});
