'use strict';
// exact-cache action shim. No dependencies: it picks the prebuilt binary for this runner,
// checks its sha256 against dist/SHA256SUMS, and runs it with inherited stdio, environment and
// exit code. A node action (not a composite or Docker one) is what receives
// ACTIONS_RUNTIME_TOKEN / ACTIONS_RESULTS_URL and gets a `post` step.

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
  'Windows/X64': 'x86_64-pc-windows-msvc',
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
    throw new Error(
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

module.exports = { TARGETS, MODES, platformOf, binaryName, readSums, sha256File, resolveBinary, run };
