// Tests of the action shim (dist/index.js) with Node's own test runner: `node --test tests/shim`.
import { after, test } from 'node:test';
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

const repoDir = path.dirname(distDir);
const ACTION_YMLS = ['action.yml', 'restore/action.yml', 'save/action.yml', 'fingerprint/action.yml'];

/** The fake checkouts, removed when the tests end. */
const roots = [];
after(() => roots.forEach((root) => fs.rmSync(root, { recursive: true, force: true })));

/**
 * A checkout of the action (the committed action.yml files) whose dist directory, returned, has
 * the real shim and a fake binary per target (a shell script).
 */
function fakeDist(targets, { corrupt } = {}) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'shim-'));
  roots.push(root);
  for (const f of ACTION_YMLS) {
    fs.mkdirSync(path.dirname(path.join(root, f)), { recursive: true });
    fs.copyFileSync(path.join(repoDir, f), path.join(root, f));
  }
  const dir = path.join(root, 'dist');
  fs.mkdirSync(dir);
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
  assert.equal(shim.TARGETS['Linux/ARM64'], 'aarch64-unknown-linux-gnu');
  assert.equal(shim.TARGETS['Windows/X64'], 'x86_64-pc-windows-gnu');
  assert.equal(shim.binaryName('x86_64-pc-windows-gnu'), 'exact-cache-x86_64-pc-windows-gnu.exe');
  assert.equal(shim.binaryName('aarch64-unknown-linux-gnu'), 'exact-cache-aarch64-unknown-linux-gnu');
});

/** The platforms whose binaries scripts/build-dist builds and dist/ carries, with their files. */
const BUILT_HERE = [
  ['Linux', 'X64', 'exact-cache-x86_64-unknown-linux-gnu'],
  ['Linux', 'ARM64', 'exact-cache-aarch64-unknown-linux-gnu'],
  ['Windows', 'X64', 'exact-cache-x86_64-pc-windows-gnu.exe'],
];

test('each platform with a binary runs its own: Linux arm64 and Windows x64 next to Linux x64', () => {
  const dir = fakeDist(['x86_64-unknown-linux-gnu', 'aarch64-unknown-linux-gnu', 'x86_64-pc-windows-gnu']);
  for (const [os, arch, name] of BUILT_HERE) {
    const file = shim.resolveBinary(dir, { RUNNER_OS: os, RUNNER_ARCH: arch });
    assert.equal(path.basename(file), name, `${os}/${arch}`);
    // The fake binaries are shell scripts, so each runs here whatever platform it stands for.
    const r = runEntry(dir, 'restore', { RUNNER_OS: os, RUNNER_ARCH: arch });
    assert.equal(r.status, 0, `${os}/${arch}: ${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /^fake binary restore$/m);
  }
  // macOS still has none: a miss, naming the three that exist.
  assert.throws(
    () => shim.resolveBinary(dir, { RUNNER_OS: 'macOS', RUNNER_ARCH: 'ARM64' }),
    (e) =>
      e instanceof shim.UnsupportedPlatform &&
      /no binary for macOS\/ARM64; this release has binaries for: Linux\/X64, Linux\/ARM64, Windows\/X64$/.test(e.message),
  );
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

/** Parse `name<<DELIM\nvalue\nDELIM\n` records, checking each delimiter closes its record. */
function parseCommandFile(text) {
  const values = {};
  const lines = text.split('\n');
  for (let i = 0; i < lines.length - 1; ) {
    const m = /^([^<]+)<<(ghadelimiter_[0-9a-f]{32})$/.exec(lines[i]);
    assert.ok(m, `a heredoc record starts at line ${i}: ${JSON.stringify(lines[i])}`);
    const end = lines.indexOf(m[2], i + 1);
    assert.ok(end > i, `delimiter ${m[2]} closes its record`);
    values[m[1]] = lines.slice(i + 1, end).join('\n');
    i = end + 1;
  }
  return values;
}

/** Run `entry` on macOS/ARM64 (no binary) with command files in a scratch directory. */
function runUnsupported(entry, env = {}) {
  const dir = fakeDist(['x86_64-unknown-linux-gnu']);
  const outputs = path.join(dir, 'github_output');
  const envFile = path.join(dir, 'github_env');
  const r = runEntry(dir, entry, {
    RUNNER_OS: 'macOS',
    RUNNER_ARCH: 'ARM64',
    GITHUB_OUTPUT: outputs,
    GITHUB_ENV: envFile,
    ...env,
  });
  const read = (f) => (fs.existsSync(f) ? parseCommandFile(fs.readFileSync(f, 'utf8')) : {});
  return { ...r, outputs: read(outputs), exported: read(envFile) };
}

const RESTORE_MISS = {
  'cache-hit': 'false',
  reused: 'false',
  'entry-exists': 'false',
  key: '',
  'fingerprint-file': '',
  'miss-reason': 'unsupported-platform',
  'restored-files': '0',
  'restored-bytes': '0',
  'extra-files': '0',
  layers: '0',
  'cleaned-files': '0',
  'generation-seconds': '',
  'time-saved': '',
};

test('a platform without a binary warns, sets every output as a miss and lets the job go on', () => {
  const expected = {
    main: RESTORE_MISS,
    restore: RESTORE_MISS,
    save: { key: '', 'time-saved': '', saved: 'false', 'save-result': 'unsupported-platform', 'changed-files': '', 'uncovered-files': '' },
    fingerprint: { key: '', 'fingerprint-file': '' },
    post: { saved: 'false', 'save-result': 'unsupported-platform' },
  };
  for (const [entry, outputs] of Object.entries(expected)) {
    const r = runUnsupported(entry, { INPUT_REUSE_ENV: 'FIXTURES_REUSED' });
    assert.equal(r.status, 0, `${entry}: ${r.stdout}${r.stderr}`);
    assert.match(
      r.stdout,
      /^::warning::exact-cache has no binary for macOS\/ARM64; this release has binaries for: Linux\/X64; (the step goes on without the cache|nothing saved)$/m,
    );
    assert.doesNotMatch(r.stdout, /::error::|fake binary/);
    assert.deepEqual(r.outputs, outputs, entry);
    const restores = entry === 'main' || entry === 'restore';
    assert.deepEqual(r.exported, restores ? { FIXTURES_REUSED: '0' } : {}, `${entry}: reuse-env`);
  }
});

test('under strict, a platform without a binary fails the step after setting the outputs', () => {
  for (const strict of ['true', 'TRUE', ' True\n']) {
    const r = runUnsupported('restore', { INPUT_STRICT: strict });
    assert.equal(r.status, 1, r.stdout);
    assert.match(r.stdout, /^::error::exact-cache has no binary for macOS\/ARM64; .* \(strict: failing the step\)$/m);
    assert.deepEqual(r.outputs, RESTORE_MISS);
  }
  const lax = runUnsupported('restore', { INPUT_STRICT: 'false' });
  assert.equal(lax.status, 0, lax.stdout);
});

test('the unsupported-platform warning escapes workflow-command characters', () => {
  const r = runUnsupported('main', { RUNNER_OS: 'mac%OS\n::error::x', RUNNER_ARCH: 'ARM64' });
  assert.equal(r.status, 0, r.stdout);
  assert.match(r.stdout, /^::warning::exact-cache has no binary for mac%25OS%0A::error::x\/ARM64; /m);
  assert.doesNotMatch(r.stdout, /^::error::/m);
});

test('without GITHUB_OUTPUT (a local run) an unsupported platform still only warns', () => {
  const dir = fakeDist([]);
  const r = runEntry(dir, 'main', { RUNNER_OS: 'Windows', RUNNER_ARCH: 'ARM64' });
  assert.equal(r.status, 0, r.stdout);
  assert.match(r.stdout, /^::warning::exact-cache has no binary for Windows\/ARM64; this release has binaries for: none; /m);
});

test('the unsupported-platform outputs cover every output of the committed action.yml files', () => {
  const entries = { 'action.yml': 'main', 'restore/action.yml': 'restore', 'save/action.yml': 'save', 'fingerprint/action.yml': 'fingerprint' };
  for (const [file, mode] of Object.entries(entries)) {
    const declared = shim.outputNames(fs.readFileSync(path.join(repoDir, file), 'utf8'));
    assert.ok(declared.length > 0, file);
    assert.deepEqual(declared, shim.UNSUPPORTED_OUTPUTS[mode], `${file}: update UNSUPPORTED_OUTPUTS and decide each new output's value`);
    for (const name of declared) {
      if (!(name in shim.UNSUPPORTED_VALUES)) {
        assert.ok(['key', 'fingerprint-file', 'changed-files'].includes(name), `${file}: ${name} has no unsupported-platform value`);
      }
    }
  }
});

test('a platform without a binary is told apart from a binary missing on disk', () => {
  const dir = fakeDist(['x86_64-unknown-linux-gnu', 'aarch64-apple-darwin']);
  // Listed in SHA256SUMS but missing on disk: not available.
  fs.rmSync(path.join(dir, 'exact-cache-aarch64-apple-darwin'));
  assert.throws(
    () => shim.resolveBinary(dir, { RUNNER_OS: 'macOS', RUNNER_ARCH: 'ARM64' }),
    (e) => e instanceof shim.UnsupportedPlatform && /no binary for macOS\/ARM64; this release has binaries for: Linux\/X64$/.test(e.message),
  );
  assert.throws(() => shim.resolveBinary(dir, { RUNNER_OS: 'Windows', RUNNER_ARCH: 'ARM64' }), shim.UnsupportedPlatform);
});

test('the committed dist binaries match the committed SHA256SUMS', () => {
  for (const [os, arch, name] of BUILT_HERE) {
    const file = shim.resolveBinary(distDir, { RUNNER_OS: os, RUNNER_ARCH: arch });
    assert.equal(path.basename(file), name);
  }
  assert.throws(() => shim.resolveBinary(distDir, { RUNNER_OS: 'macOS', RUNNER_ARCH: 'ARM64' }), shim.UnsupportedPlatform);
});
