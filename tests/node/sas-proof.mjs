// Proof that a hand-computed ACCOUNT SAS works against Azurite using only
// Node built-ins (fetch, crypto, http, child_process). No Azure SDK.
//
// Usage:
//   node sas-proof.mjs                 # starts its own Azurite (blob only) on a free port
//   AZURITE_BLOB_URL=http://127.0.0.1:10000 node sas-proof.mjs   # use a running one
//
// Prints one line per check and exits non-zero on the first failure.
// The string-to-sign and query parameters used are printed so a Rust
// implementation can reproduce them byte for byte.

import { createHmac } from 'node:crypto';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import http from 'node:http';
import net from 'node:net';

const HERE = dirname(fileURLToPath(import.meta.url));
const ACCOUNT = 'devstoreaccount1';
const KEY_B64 =
  'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
const SV = '2022-11-02'; // any sv >= 2020-12-06 uses the same layout (with the ses line)

// ---------------------------------------------------------------- SAS recipe
// Account SAS string-to-sign for sv >= 2020-12-06 (Azure docs "Create an
// account SAS"; Azurite common/authentication/IAccountSASSignatureValues.js):
//   account \n sp \n ss \n srt \n st \n se \n sip \n spr \n sv \n ses \n
// Unused optional fields (st, sip, ses) are empty strings but keep their line.
// For sv < 2020-12-06 the "ses \n" line is absent.
function accountSas({
  sp = 'rwdlac',
  ss = 'b',
  srt = 'sco',
  se = '2099-01-01T00:00:00Z',
  spr = 'https,http',
  sv = SV,
  key = KEY_B64,
} = {}) {
  const stringToSign = [ACCOUNT, sp, ss, srt, '', se, '', spr, sv, '', ''].join('\n');
  const sig = createHmac('sha256', Buffer.from(key, 'base64'))
    .update(stringToSign, 'utf8')
    .digest('base64');
  const params = { sv, ss, srt, sp, se, spr, sig };
  const query = Object.entries(params)
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
    .join('&');
  return { stringToSign, params, query };
}

// ------------------------------------------------------------- Azurite setup
async function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Starts `azurite-blob` and resolves once it prints its "listens on" line.
export async function startAzurite({ port } = {}) {
  port ??= await freePort();
  const location = mkdtempSync(join(tmpdir(), 'azurite-'));
  const bin = join(HERE, 'node_modules', '.bin', 'azurite-blob');
  const child = spawn(
    bin,
    [
      '--blobHost', '127.0.0.1',
      '--blobPort', String(port),
      '--location', location,
      '--skipApiVersionCheck',
      '--loose',
      '--silent',
      '--disableTelemetry',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`azurite did not start:\n${out}`)), 30000);
    const onData = (d) => {
      out += d;
      if (out.includes('successfully listens on')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`azurite exited early (${code}):\n${out}`));
    });
  });
  child.removeAllListeners('exit');
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    // Resolves once the process has exited and its disk location is removed.
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(location, { recursive: true, force: true, maxRetries: 5 });
    },
  };
}

// ------------------------------------------------------------------- checks
function check(cond, what, detail = '') {
  if (!cond) {
    console.error(`FAIL ${what} ${detail}`);
    process.exitCode = 1;
    throw new Error(what);
  }
  console.log(`ok   ${what}`);
}

async function text(res) {
  return `${res.status} ${(await res.text()).slice(0, 300)}`;
}

async function main() {
  let azurite;
  let base = process.env.AZURITE_BLOB_URL;
  if (!base) {
    azurite = await startAzurite();
    base = azurite.url;
  }
  try {
    const sas = accountSas();
    console.log('string-to-sign (JSON-escaped):', JSON.stringify(sas.stringToSign));
    console.log('query:', sas.query);
    const acct = `${base}/${ACCOUNT}`;
    const container = `c${Date.now()}`;
    const hdr = { 'x-ms-version': SV };

    // 1. Create container (Container_Create needs ss=b, srt has c, sp has c or w)
    let res = await fetch(`${acct}/${container}?restype=container&${sas.query}`, {
      method: 'PUT',
      headers: hdr,
    });
    check(res.status === 201, 'create container -> 201', await text(res));

    // 2. Put Blob (single shot)
    const payload = Buffer.from('0123456789abcdefghij');
    res = await fetch(`${acct}/${container}/single.bin?${sas.query}`, {
      method: 'PUT',
      headers: { ...hdr, 'x-ms-blob-type': 'BlockBlob', 'content-type': 'application/octet-stream' },
      body: payload,
    });
    check(res.status === 201, 'Put Blob -> 201', await text(res));

    // 3. Ranged GET
    res = await fetch(`${acct}/${container}/single.bin?${sas.query}`, {
      headers: { ...hdr, Range: 'bytes=2-5' },
    });
    const ranged = Buffer.from(await res.arrayBuffer());
    check(
      res.status === 206 && ranged.toString() === '2345' &&
        res.headers.get('content-range') === `bytes 2-5/${payload.length}`,
      'GET Range bytes=2-5 -> 206 "2345"',
      `${res.status} ${ranged} ${res.headers.get('content-range')}`,
    );

    // 3b. Full GET and HEAD without x-ms-version (accepted thanks to the SAS sv)
    res = await fetch(`${acct}/${container}/single.bin?${sas.query}`);
    const full = Buffer.from(await res.arrayBuffer());
    check(res.status === 200 && full.equals(payload), 'GET without x-ms-version -> 200, full body');
    res = await fetch(`${acct}/${container}/single.bin?${sas.query}`, { method: 'HEAD' });
    check(
      res.status === 200 && res.headers.get('content-length') === String(payload.length),
      'HEAD -> 200 with Content-Length',
    );

    // 4. Put Block x2 + Put Block List
    const blocks = [Buffer.alloc(1024 * 1024, 0x61), Buffer.from('tail-bytes')];
    // Block IDs: base64 of equal-length strings (required by the service), URL-encoded in the query.
    const ids = blocks.map((_, i) => Buffer.from(`block-${String(i).padStart(6, '0')}`).toString('base64'));
    for (let i = 0; i < blocks.length; i++) {
      res = await fetch(
        `${acct}/${container}/multi.bin?comp=block&blockid=${encodeURIComponent(ids[i])}&${sas.query}`,
        { method: 'PUT', headers: hdr, body: blocks[i] },
      );
      check(res.status === 201, `Put Block #${i} -> 201`, await text(res));
    }
    const xml =
      '<?xml version="1.0" encoding="utf-8"?><BlockList>' +
      ids.map((id) => `<Latest>${id}</Latest>`).join('') +
      '</BlockList>';
    res = await fetch(`${acct}/${container}/multi.bin?comp=blocklist&${sas.query}`, {
      method: 'PUT',
      headers: { ...hdr, 'content-type': 'application/xml' },
      body: xml,
    });
    check(res.status === 201, 'Put Block List -> 201', await text(res));
    res = await fetch(`${acct}/${container}/multi.bin?${sas.query}`, { headers: hdr });
    const multi = Buffer.from(await res.arrayBuffer());
    check(res.status === 200 && multi.equals(Buffer.concat(blocks)), 'GET committed block blob -> 200, bytes match');
    res = await fetch(`${acct}/${container}/multi.bin?${sas.query}`, {
      headers: { ...hdr, Range: `bytes=${1024 * 1024}-` },
    });
    check(res.status === 206 && (await res.text()) === 'tail-bytes', 'GET open-ended Range across block boundary -> 206');

    // 5. Negative checks
    const bad = accountSas({ key: Buffer.alloc(64, 1).toString('base64') });
    res = await fetch(`${acct}/${container}/single.bin?${bad.query}`, { headers: hdr });
    check(res.status === 403, 'wrong key -> 403', await text(res));
    const httpsOnly = accountSas({ spr: 'https' });
    res = await fetch(`${acct}/${container}/single.bin?${httpsOnly.query}`, { headers: hdr });
    check(res.status === 403, 'spr=https over plain http -> 403 (AuthorizationProtocolMismatch)', await text(res));
    const readOnly = accountSas({ sp: 'r' });
    res = await fetch(`${acct}/${container}/ro.bin?${readOnly.query}`, {
      method: 'PUT', headers: { ...hdr, 'x-ms-blob-type': 'BlockBlob' }, body: 'x',
    });
    check(res.status === 403, 'sp=r cannot Put Blob -> 403', await text(res));
    // Unencoded '+' in sig is turned into ' ' by the query parser -> signature mismatch.
    if (sas.params.sig.includes('+')) {
      const raw = sas.query.replace(/sig=[^&]*/, `sig=${sas.params.sig}`);
      res = await fetch(`${acct}/${container}/single.bin?${raw}`, { headers: hdr });
      console.log(`info unencoded sig containing '+' -> ${res.status}`);
    }
    const expired = accountSas({ se: '2001-01-01T00:00:00Z' });
    res = await fetch(`${acct}/${container}/single.bin?${expired.query}`, { headers: hdr });
    check(res.status === 403, 'expired se -> 403', await text(res));

    // 6. Host-style (production-like) URL: the account comes from the first
    //    label of the Host header, the path is /container/blob. fetch cannot
    //    set Host, so use node:http directly against 127.0.0.1.
    const port = new URL(base).port;
    const hostStatus = await new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'GET',
          path: `/${container}/single.bin?${sas.query}`,
          headers: { Host: `${ACCOUNT}.blob.core.windows.net:${port}`, 'x-ms-version': SV },
        },
        (r) => {
          let body = '';
          r.on('data', (d) => (body += d));
          r.on('end', () => resolve([r.statusCode, body]));
        },
      );
      req.on('error', reject);
      req.end();
    });
    check(
      hostStatus[0] === 200 && hostStatus[1] === payload.toString(),
      'host-style Host: devstoreaccount1.blob.core.windows.net:PORT, path /container/blob -> 200',
      JSON.stringify(hostStatus),
    );
    console.log('all SAS checks passed');
  } finally {
    await azurite?.stop();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e) => {
    console.error(e.stack || String(e));
    process.exit(1);
  });
}
