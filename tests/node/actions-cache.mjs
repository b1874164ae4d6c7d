#!/usr/bin/env node
// Thin CLI around the official GitHub Actions cache client (@actions/cache).
//
//   node actions-cache.mjs save    <key> <path...>
//   node actions-cache.mjs restore <key> <path...>
//
// stdout: exactly one JSON line
//   {"op":"save","key":"...","cacheId":123}
//   {"op":"restore","key":"...","matchedKey":"..."}   (matchedKey null on a miss)
// stderr: everything @actions/core / @actions/exec would normally print
//   (info, ::debug::, ::warning::, tar command lines) plus error messages.
// exit:   0 on success or a clean restore miss; 1 on any failure; 2 on usage error.
//
// The protocol is chosen by the environment, exactly as in a workflow:
//   v2 (Twirp):  ACTIONS_CACHE_SERVICE_V2=1, ACTIONS_RESULTS_URL, ACTIONS_RUNTIME_TOKEN
//   v1 (REST):   ACTIONS_CACHE_URL (must end with "/"), ACTIONS_RUNTIME_TOKEN
//   GITHUB_WORKSPACE: root the archive paths are relative to / extracted into
//     (default: cwd). Like a real runner step, this CLI chdir()s into it, because
//     @actions/glob resolves relative path patterns against process.cwd().
//   GITHUB_SERVER_URL: if set to a non github.com/*.ghe.com/*.localhost host the
//     library assumes GHES and forces v1.
//   RUNNER_TEMP: scratch dir for the archive; if unset this CLI uses a fresh
//     temp dir (the library's own default is /home/actions/temp).
//
// The library swallows almost every failure (it logs a warning and returns
// -1 / undefined). This CLI turns those into a non-zero exit: save returning
// -1 is a failure; restore returning undefined is a failure if the library
// emitted a ::warning:: or ::error::, and a miss otherwise.
// No restore keys are passed.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const realStdoutWrite = process.stdout.write.bind(process.stdout);
const problems = [];
const saveNotes = [];

// Route everything the library prints to stderr, remembering warnings/errors.
process.stdout.write = (chunk, encoding, cb) => {
  const s = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
  for (const line of s.split('\n')) {
    const m = /^::(warning|error)(?: [^:]*)?::(.*)$/.exec(line);
    if (m) problems.push(`${m[1]}: ${m[2]}`);
    // Save failures are often only reported via info/debug (ReserveCacheError).
    else if (/^Failed to save: |^::debug::Failed to reserve cache: /.test(line)) saveNotes.push(line);
  }
  return process.stderr.write(chunk, encoding, cb);
};

function emit(obj) {
  realStdoutWrite(JSON.stringify(obj) + '\n');
}

function usage(msg) {
  if (msg) process.stderr.write(`error: ${msg}\n`);
  process.stderr.write(
    'usage: node actions-cache.mjs save <key> <path...>\n' +
      '       node actions-cache.mjs restore <key> <path...>\n',
  );
  process.exit(2);
}

async function main() {
  const [op, key, ...paths] = process.argv.slice(2);
  if (op !== 'save' && op !== 'restore') usage(op ? `unknown op '${op}'` : 'missing op');
  if (!key) usage('missing key');
  if (paths.length === 0) usage('missing path');

  if (process.env.GITHUB_WORKSPACE) process.chdir(process.env.GITHUB_WORKSPACE);

  let ownTemp;
  if (!process.env.RUNNER_TEMP) {
    ownTemp = mkdtempSync(join(tmpdir(), 'actions-cache-cli-'));
    process.env.RUNNER_TEMP = ownTemp;
  }

  // Imported after the stdout redirect and env defaults are in place.
  const cache = await import('@actions/cache');
  try {
    if (op === 'save') {
      const cacheId = await cache.saveCache(paths, key);
      if (typeof cacheId !== 'number' || cacheId === -1) {
        throw new Error(
          `saveCache returned ${cacheId}` +
            (problems.length || saveNotes.length
              ? `: ${[...saveNotes, ...problems].join(' | ')}`
              : ' (see stderr)'),
        );
      }
      emit({ op, key, cacheId });
    } else {
      const matchedKey = await cache.restoreCache(paths, key);
      if (matchedKey === undefined && problems.length) {
        throw new Error(`restoreCache failed: ${problems.join(' | ')}`);
      }
      emit({ op, key, matchedKey: matchedKey ?? null });
    }
  } finally {
    if (ownTemp) rmSync(ownTemp, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err && err.message ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
