'use strict';
// exact-cache action shim. No dependencies: it picks the prebuilt binary for this runner,
// checks its sha256 against dist/SHA256SUMS, and runs it with inherited stdio, environment and
// exit code. A node action (not a composite or Docker one) is what receives
// ACTIONS_RUNTIME_TOKEN / ACTIONS_RESULTS_URL and gets a `post` step.
//
// On a runner this release has no binary for, cache trouble must not break the build (design.md,
// guarantee 5): the shim warns, sets every output of the entry point as a miss would
// (`miss-reason=unsupported-platform`, `save-result=unsupported-platform`) and exits 0, or 1 under
// `strict`. The platform comes from RUNNER_OS/RUNNER_ARCH, so tests simulate another runner by
// setting those.

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

/** `RUNNER_OS/RUNNER_ARCH` → Rust target of the binary built for it. */
const TARGETS = {
  'Linux/X64': 'x86_64-unknown-linux-gnu',
  'Linux/ARM64': 'aarch64-unknown-linux-gnu',
  'macOS/X64': 'x86_64-apple-darwin',
  'macOS/ARM64': 'aarch64-apple-darwin',
  'Windows/X64': 'x86_64-pc-windows-gnu',
};

const NODE_OS = { linux: 'Linux', darwin: 'macOS', win32: 'Windows' };
const NODE_ARCH = { x64: 'X64', arm64: 'ARM64' };

/** Entry point → binary arguments. */
const MODES = {
  main: ['restore'],
  post: ['save', '--post'],
  restore: ['restore'],
  save: ['save'],
  fingerprint: ['fingerprint'],
};

/** The action.yml (relative to dist/) whose `outputs:` an entry point sets. */
const ACTION_YML = {
  main: '../action.yml',
  restore: '../restore/action.yml',
  save: '../save/action.yml',
  fingerprint: '../fingerprint/action.yml',
};

/**
 * Outputs each entry point sets when it cannot run: those of its action.yml, plus these (the post
 * step sets the save outputs although no later step can read them; also used when the action.yml
 * cannot be read).
 */
const RESTORE_OUTPUTS = [
  'cache-hit',
  'reused',
  'entry-exists',
  'key',
  'fingerprint-file',
  'miss-reason',
  'restored-files',
  'restored-bytes',
  'extra-files',
  'layers',
  'cleaned-files',
  'generation-seconds',
  'time-saved',
];
const UNSUPPORTED_OUTPUTS = {
  main: RESTORE_OUTPUTS,
  post: ['saved', 'save-result'],
  restore: RESTORE_OUTPUTS,
  save: ['key', 'time-saved', 'saved', 'save-result', 'changed-files', 'uncovered-files'],
  fingerprint: ['key', 'fingerprint-file'],
};

/** Output values without a binary; an output not named here is set to the empty string. */
const UNSUPPORTED_VALUES = {
  'cache-hit': 'false',
  reused: 'false',
  'entry-exists': 'false',
  'miss-reason': 'unsupported-platform',
  'restored-files': '0',
  'restored-bytes': '0',
  'extra-files': '0',
  layers: '0',
  'cleaned-files': '0',
  saved: 'false',
  'save-result': 'unsupported-platform',
  // Nothing was reused or generated: no figure, and no file read to name.
  'generation-seconds': '',
  'time-saved': '',
  'uncovered-files': '',
};

/** The runner's platform, `OS/ARCH`, from RUNNER_OS/RUNNER_ARCH or else Node's own view. */
function platformOf(env, nodePlatform, nodeArch) {
  const os = env.RUNNER_OS || NODE_OS[nodePlatform] || nodePlatform;
  const arch = env.RUNNER_ARCH || NODE_ARCH[nodeArch] || nodeArch;
  return `${os}/${arch}`;
}

function binaryName(target) {
  return `exact-cache-${target}${target.includes('windows') ? '.exe' : ''}`;
}

/** `dist/SHA256SUMS` as a Map of file name → lowercase hex digest. */
function readSums(dir) {
  const sums = new Map();
  const text = fs.readFileSync(path.join(dir, 'SHA256SUMS'), 'utf8');
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]{64})\s+\*?(\S+)\s*$/.exec(line.trim());
    if (m) sums.set(m[2], m[1]);
  }
  return sums;
}

function sha256File(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** This release has no binary for the runner's platform (not a broken or tampered release). */
class UnsupportedPlatform extends Error {}

/**
 * The verified binary for this platform. Throws an Error whose message says what is wrong:
 * an unknown platform (listing those with a binary), a missing file, a missing or wrong sum.
 */
function resolveBinary(dir, env = process.env, nodePlatform = process.platform, nodeArch = process.arch) {
  const platform = platformOf(env, nodePlatform, nodeArch);
  const sums = fs.existsSync(path.join(dir, 'SHA256SUMS')) ? readSums(dir) : new Map();
  const available = Object.entries(TARGETS)
    .filter(([, target]) => sums.has(binaryName(target)) && fs.existsSync(path.join(dir, binaryName(target))))
    .map(([p]) => p);
  const target = TARGETS[platform];
  if (!target || !available.includes(platform)) {
    throw new UnsupportedPlatform(
      `exact-cache has no binary for ${platform}; this release has binaries for: ${available.join(', ') || 'none'}`,
    );
  }
  const name = binaryName(target);
  const file = path.join(dir, name);
  const expected = sums.get(name);
  const actual = sha256File(file);
  if (actual !== expected) {
    throw new Error(
      `exact-cache binary ${name} does not match dist/SHA256SUMS (expected ${expected}, found ${actual}); refusing to run it`,
    );
  }
  return file;
}

function escapeData(s) {
  return String(s).replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

/** Output names declared under `outputs:` in an action.yml's text (the generated layout). */
function outputNames(yaml) {
  const names = [];
  let inOutputs = false;
  for (const line of yaml.split(/\r?\n/)) {
    if (/^\S/.test(line)) inOutputs = /^outputs:\s*$/.test(line);
    const m = inOutputs && /^  ([A-Za-z0-9_-]+):\s*$/.exec(line);
    if (m) names.push(m[1]);
  }
  return names;
}

/** The outputs `mode` sets on an unsupported platform, as name → value. */
function unsupportedOutputs(dir, mode) {
  const names = [...UNSUPPORTED_OUTPUTS[mode]];
  if (ACTION_YML[mode]) {
    try {
      for (const name of outputNames(fs.readFileSync(path.join(dir, ACTION_YML[mode]), 'utf8'))) {
        if (!names.includes(name)) names.push(name);
      }
    } catch {
      // The table above covers the committed action.yml files.
    }
  }
  return Object.fromEntries(names.map((name) => [name, UNSUPPORTED_VALUES[name] ?? '']));
}

/** Append `name<<DELIM`, value, `DELIM` records to a runner command file, as the binary does. */
function appendKeyValues(file, values) {
  let records = '';
  for (const [name, value] of Object.entries(values)) {
    let delimiter;
    do {
      delimiter = `ghadelimiter_${crypto.randomBytes(16).toString('hex')}`;
    } while (value.includes(delimiter));
    records += `${name}<<${delimiter}\n${value}\n${delimiter}\n`;
  }
  fs.appendFileSync(file, records);
}

/** `strict` as the binary reads it (YAML 1.2 core booleans); anything else counts as false here. */
function isStrict(env) {
  return ['true', 'True', 'TRUE'].includes((env.INPUT_STRICT || '').trim());
}

/**
 * No binary for this runner: warn (an error under `strict`), set every output of `mode` as a
 * miss, export `reuse-env` (root and `restore`) as `0`, and exit 0 (1 under `strict`).
 */
function unsupported(mode, dir, env, message) {
  const strict = isStrict(env);
  const step = mode === 'post' ? 'nothing saved' : 'the step goes on without the cache';
  const text = strict ? `${message} (strict: failing the step)` : `${message}; ${step}`;
  process.stdout.write(`::${strict ? 'error' : 'warning'}::${escapeData(text)}\n`);
  try {
    if (env.GITHUB_OUTPUT) appendKeyValues(env.GITHUB_OUTPUT, unsupportedOutputs(dir, mode));
    const reuseEnv = (env.INPUT_REUSE_ENV || '').trim();
    if (env.GITHUB_ENV && (mode === 'main' || mode === 'restore') && /^[A-Za-z_][A-Za-z0-9_]*$/.test(reuseEnv)) {
      appendKeyValues(env.GITHUB_ENV, { [reuseEnv]: '0' });
    }
  } catch (e) {
    process.stdout.write(`::warning::${escapeData(`exact-cache: cannot write the step's outputs: ${e.message}`)}\n`);
  }
  process.exitCode = strict ? 1 : 0;
}

/** Run the binary for `mode`; sets process.exitCode. */
function run(mode, options = {}) {
  const dir = options.dir || __dirname;
  const env = options.env || process.env;
  const args = MODES[mode];
  if (!args) {
    process.stdout.write(`::error::exact-cache: unknown mode ${escapeData(mode)}\n`);
    process.exitCode = 1;
    return;
  }
  let binary;
  try {
    binary = resolveBinary(dir, env);
  } catch (e) {
    if (e instanceof UnsupportedPlatform) {
      unsupported(mode, dir, env, e.message);
      return;
    }
    process.stdout.write(`::error::${escapeData(e.message)}\n`);
    process.exitCode = 1;
    return;
  }
  if (process.platform !== 'win32') {
    // Archives of the action may lose the executable bit; the checksum above covers the content.
    fs.chmodSync(binary, 0o755);
  }
  const result = spawnSync(binary, args, { stdio: 'inherit', env });
  if (result.error) {
    process.stdout.write(`::error::cannot run ${escapeData(binary)}: ${escapeData(result.error.message)}\n`);
    process.exitCode = 1;
    return;
  }
  process.exitCode = result.status === null ? 1 : result.status;
}

module.exports = {
  TARGETS,
  MODES,
  UNSUPPORTED_OUTPUTS,
  UNSUPPORTED_VALUES,
  UnsupportedPlatform,
  platformOf,
  binaryName,
  readSums,
  sha256File,
  resolveBinary,
  outputNames,
  unsupportedOutputs,
  run,
};
