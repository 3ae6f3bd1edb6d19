#!/usr/bin/env node
// Example program of the JavaScript client: a producer and a worker of
// `claimcheck serve`'s HTTP API. Every line it prints is one JSON object.
//
//   node example.js submit --kind K --tenant T [--idempotency-key X] FILE...
//       submit each file (streamed, its SHA-256 sent as Content-Digest);
//       prints {"file", "job", "sha256", "size", "duplicate", "ticket_bytes"}
//   node example.js work --kind K [--tenant T]... [--until-empty] [--max-jobs N]
//                   [--wait S] [--delay S] [--fail permanent|transient]
//       work jobs: the handler reads the verified payload and returns a JSON
//       summary {"worker": "js", "job", "attempt", "sha256", "size",
//       "magic"} as the result (after --delay seconds, the lease extended
//       meanwhile); prints {"job", "state", "attempt", "extensions"} a job
//   node example.js status JOB       prints the job
//   node example.js result JOB OUT   waits for the job, streams its result
//       into OUT (verified); prints {"job", "state", "sha256", "size",
//       "result"} (result: the result's JSON, when it is JSON)
//
// The server is $CLAIMCHECK_API_URL; the token, if any, $CLAIMCHECK_API_TOKEN.
// An error answer prints {"error": {"status", "reason", "message",
// "permanent"}} and exits 1.

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { APIError, Client, PayloadCorruptError, Permanent, fileSha256 } from './index.js';

function out(doc) {
  const sorted = Object.fromEntries(Object.entries(doc).sort(([a], [b]) => (a < b ? -1 : 1)));
  process.stdout.write(JSON.stringify(sorted) + '\n');
}

async function submit(c, v, files) {
  for (const file of files) {
    const s = await c.submit({ path: file }, v.kind, v.tenant, {
      idempotencyKey: v['idempotency-key'],
      contentType: v['content-type'],
      sha256: v.sha256 ? Buffer.from(v.sha256, 'hex') : undefined,
    });
    const { sha256, size } = await fileSha256(file);
    if (s.ticket.sha256 !== sha256.toString('hex') || s.ticket.size !== size) {
      throw new Error(`${file}: the server's ticket does not describe the file sent`);
    }
    out({ file, job: s.id, sha256: s.ticket.sha256, size: s.ticket.size, duplicate: s.duplicate, ticket_bytes: s.ticket_bytes });
  }
}

async function work(c, v) {
  const handler = async (claim, payload) => {
    const h = createHash('sha256');
    let size = 0;
    let magic = Buffer.alloc(0);
    for await (const b of payload) {
      if (magic.length < 5) magic = Buffer.concat([magic, b.subarray(0, 5 - magic.length)]);
      h.update(b);
      size += b.length;
    }
    if (v.delay) await sleep(Number(v.delay) * 1000);
    if (v.fail === 'permanent') throw new Permanent('the example was told to fail permanently');
    if (v.fail === 'transient') throw new Error('the example was told to fail transiently');
    const summary = { attempt: claim.job.attempt, job: claim.job.id, magic: magic.toString('latin1'), sha256: h.digest('hex'), size, worker: 'js' };
    return { body: JSON.stringify(summary), contentType: 'application/json' };
  };
  await c.work(v.kind, handler, {
    tenants: v.tenant ?? [],
    wait: Number(v.wait ?? 5),
    maxJobs: v['max-jobs'] ? Number(v['max-jobs']) : Infinity,
    untilEmpty: !!v['until-empty'],
    onOutcome: (claim, o) => out({ job: o.id, state: o.state, attempt: o.attempt, extensions: claim.extensions, reason: o.reason ?? '' }),
  });
}

async function result(c, job, file, v) {
  const j = await c.wait(job, { timeout: Number(v.timeout ?? 600) * 1000 });
  const r = await c.fetchResult(job, file);
  const doc = { job, state: j.state, sha256: r.sha256, size: r.size };
  if ((r.contentType || '').startsWith('application/json')) doc.result = JSON.parse(await readFile(file, 'utf8'));
  out(doc);
}

async function main(argv) {
  const [cmd, ...rest] = argv;
  const { values: v, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      kind: { type: 'string' },
      tenant: { type: 'string', multiple: cmd === 'work' },
      'idempotency-key': { type: 'string' },
      'content-type': { type: 'string', default: 'application/pdf' },
      sha256: { type: 'string' },
      'until-empty': { type: 'boolean' },
      'max-jobs': { type: 'string' },
      wait: { type: 'string' },
      delay: { type: 'string' },
      fail: { type: 'string' },
      timeout: { type: 'string' },
    },
  });
  const c = new Client();
  try {
    switch (cmd) {
      case 'submit':
        await submit(c, v, positionals);
        break;
      case 'work':
        await work(c, v);
        break;
      case 'status':
        out(await c.job(Number(positionals[0])));
        break;
      case 'result':
        await result(c, Number(positionals[0]), positionals[1], v);
        break;
      default:
        process.stderr.write('usage: node example.js submit|work|status|result ...\n');
        return 2;
    }
  } catch (e) {
    if (e instanceof APIError) {
      out({ error: e.toJSON() });
      return 1;
    }
    if (e instanceof PayloadCorruptError) {
      out({ error: { status: 0, reason: e.reason, message: e.message, permanent: true } });
      return 1;
    }
    throw e;
  }
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
