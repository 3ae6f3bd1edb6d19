// The client against a real `claimcheck serve`: the Go test TestClientsAPI
// (clients/api_test.go) starts one and sets CLAIMCHECK_API_URL,
// CLAIMCHECK_API_TOKEN and CLAIMCHECK_API_TENANT (the token's tenant). Each
// test uses job kinds of its own, so the tests share the server's queues
// without taking each other's jobs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';

import { APIError, Client, Permanent, contentDigest, keyId, parseContentDigest } from '../index.js';

const URL_ = process.env.CLAIMCHECK_API_URL;
const TENANT = process.env.CLAIMCHECK_API_TENANT || 'acme';
const skip = URL_ ? false : 'CLAIMCHECK_API_URL is not set: go test -run TestClientsAPI ./clients starts a serve and sets it';

const kind = (name) => `js-${name}-${randomBytes(4).toString('hex')}`;
const sha256hex = (b) => createHash('sha256').update(b).digest('hex');

// The job once its attempt is recorded: the outcome answers before the job
// engine writes the job's row (it completes in batches).
async function settled(c, id) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const j = await c.job(id);
    if (j.state !== 'running' || Date.now() > deadline) return j;
    await sleep(100);
  }
}

async function workOne(c, k, handler) {
  const outcomes = [];
  const n = await c.work(k, handler, { wait: 10, maxJobs: 1, onOutcome: (claim, o) => outcomes.push([claim, o]) });
  assert.equal(n, 1);
  return outcomes[0];
}

async function drain(stream) {
  const parts = [];
  for await (const b of stream) parts.push(b);
  return Buffer.concat(parts);
}

test('submit, work, result', { skip }, async () => {
  const c = new Client();
  const k = kind('roundtrip');
  const payload = randomBytes(300_000);
  const s = await c.submit(payload, k, TENANT, { contentType: 'application/x-test' });
  assert.equal(s.kind, k);
  assert.equal(s.tenant, TENANT);
  assert.equal(s.duplicate, false);
  assert.equal(s.ticket.sha256, sha256hex(payload));
  assert.equal(s.ticket.size, payload.length);
  assert.ok(s.ticket_bytes <= 512);

  const [, o] = await workOne(c, k, async (claim, stream) => {
    assert.equal(claim.job.id, s.id);
    assert.equal(claim.payload.sha256, s.ticket.sha256);
    return { body: Buffer.from(await drain(stream)).reverse(), contentType: 'application/x-reversed' };
  });
  assert.equal(o.state, 'completed');
  assert.equal(o.attempt, 1);
  const j = await c.wait(s.id, { timeout: 60_000 });
  assert.equal(j.state, 'completed');
  assert.equal(j.has_result, true);
  const dir = await mkdtemp(join(tmpdir(), 'cc-js-'));
  try {
    const r = await c.fetchResult(s.id, join(dir, 'result'));
    const got = await readFile(join(dir, 'result'));
    assert.ok(got.equals(Buffer.from(payload).reverse()));
    assert.equal(r.sha256, sha256hex(got));
    assert.equal(r.size, payload.length);
    assert.deepEqual(await readdir(dir), ['result']); // no temporary file left
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a payload sealed inline names its key', { skip }, async () => {
  // The deployment seals with its key file: a small payload travels
  // sealed inline, and its ticket names the key (kid).
  const c = new Client();
  const k = kind('kid');
  const s = await c.submit(Buffer.from('small, sealed inline'), k, TENANT);
  assert.equal(s.ticket.inline, true);
  assert.match(s.ticket.kid ?? '', /^local-[0-9a-f]{16}$/);
  assert.equal(keyId(s.ticket), s.ticket.kid);
  let seen;
  const [, o] = await workOne(c, k, async (claim) => {
    seen = claim.keyId();
    return null;
  });
  assert.equal(o.state, 'completed');
  assert.equal(seen, s.ticket.kid);
});

test('submit from a stream (spooled to hash it first)', { skip }, async () => {
  const c = new Client();
  const k = kind('stream');
  const data = randomBytes(3 << 20);
  const s = await c.submit(Readable.from([data.subarray(0, 1 << 20), data.subarray(1 << 20)]), k, TENANT);
  assert.equal(s.ticket.sha256, sha256hex(data));
  assert.equal(s.ticket.size, data.length);
  const [, o] = await workOne(c, k, async () => null); // no result
  assert.equal(o.state, 'completed');
  assert.equal((await c.wait(s.id, { timeout: 60_000 })).has_result, false);
});

test('idempotency key', { skip }, async () => {
  const c = new Client();
  const k = kind('idem');
  const first = await c.submit('invoice 42', k, TENANT, { idempotencyKey: 'invoice-42' });
  const again = await c.submit(Buffer.from('invoice 42'), k, TENANT, { idempotencyKey: 'invoice-42' });
  assert.equal(first.duplicate, false);
  assert.equal(again.duplicate, true);
  assert.equal(again.id, first.id);
  await assert.rejects(c.submit('invoice 43', k, TENANT, { idempotencyKey: 'invoice-42' }), (e) => {
    assert.ok(e instanceof APIError);
    assert.deepEqual([e.status, e.reason], [409, 'idempotency-conflict']);
    return true;
  });
});

test('digest mismatch refused', { skip }, async () => {
  const c = new Client();
  await assert.rejects(
    c.submit('the bytes sent', kind('mismatch'), TENANT, { sha256: createHash('sha256').update('other bytes').digest() }),
    (e) => {
      assert.ok(e instanceof APIError);
      assert.deepEqual([e.status, e.reason, e.permanent], [422, 'digest-mismatch', true]);
      assert.ok(!e.message.includes('the bytes sent'));
      return true;
    },
  );
});

test('fail permanent: dead', { skip }, async () => {
  const c = new Client();
  const k = kind('perm');
  const s = await c.submit('cannot be rendered', k, TENANT);
  const [, o] = await workOne(c, k, async () => {
    throw new Permanent('unsupported document');
  });
  assert.equal(o.state, 'dead');
  const j = await settled(c, s.id);
  assert.equal(j.dead, true);
  assert.equal(j.attempts, 1);
  assert.match(j.error, /unsupported document/);
});

test('fail transient: retried', { skip }, async () => {
  const c = new Client();
  const k = kind('trans');
  const s = await c.submit('try again', k, TENANT, { maxAttempts: 3 });
  const [, o] = await workOne(c, k, async () => {
    throw new Error('renderer went away');
  });
  assert.ok(['retrying', 'waiting'].includes(o.state), o.state);
  assert.equal(o.attempt, 1);
  const j = await settled(c, s.id);
  assert.equal(j.dead, false);
  assert.ok(['retryable', 'available', 'scheduled'].includes(j.state), j.state);
  assert.match(j.error, /renderer went away/);
});

test('lease extended while the handler runs', { skip }, async () => {
  const c = new Client();
  const k = kind('slow');
  const s = await c.submit('slow work', k, TENANT);
  const [claim, o] = await workOne(c, k, async (claim) => {
    const first = claim.leaseExpiresAt;
    const deadline = Date.now() + 2000 * claim.leaseSeconds;
    while (claim.extensions < 1 && Date.now() < deadline) await sleep(100);
    assert.ok(claim.extensions >= 1, 'the lease was not extended');
    assert.equal(claim.lost, null);
    assert.notEqual(claim.leaseExpiresAt, first);
    return 'done';
  });
  assert.deepEqual([o.state, o.attempt], ['completed', 1]);
  assert.equal((await settled(c, s.id)).attempts, 1);
  // Once completed, the lease is gone.
  await assert.rejects(claim.extend(), (e) => {
    assert.deepEqual([e.status, e.reason], [404, 'lease-not-found']);
    return true;
  });
});

test('claim waits, then answers null', { skip }, async () => {
  const t0 = Date.now();
  assert.equal(await new Client().claim(kind('empty'), { wait: 1 }), null);
  assert.ok(Date.now() - t0 >= 900);
});

test('job not found', { skip }, async () => {
  await assert.rejects(new Client().job(2 ** 52), (e) => {
    assert.deepEqual([e.status, e.reason], [404, 'job-not-found']);
    return true;
  });
});

test('unreachable server is transient', async () => {
  await assert.rejects(new Client({ baseUrl: 'http://127.0.0.1:9' }).job(1), (e) => {
    assert.ok(e instanceof APIError);
    assert.deepEqual([e.status, e.reason, e.permanent], [0, 'unavailable', false]);
    return true;
  });
});

test('wait gives up on its clock', { skip }, async () => {
  const c = new Client();
  const s = await c.submit('nobody works this', kind('never'), TENANT);
  let now = 0;
  const slept = [];
  await assert.rejects(
    c.wait(s.id, {
      timeout: 20_000,
      interval: 1000,
      now: () => now,
      delay: async (d) => {
        slept.push(d);
        now += d;
      },
    }),
    /still/,
  );
  assert.deepEqual(slept.slice(0, 4), [1000, 2000, 4000, 5000]); // doubling, at most 5 s
});

test('Content-Digest', () => {
  const d = createHash('sha256').update('abc').digest();
  const v = contentDigest(d);
  assert.equal(v, 'sha-256=:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=:');
  assert.ok(parseContentDigest('sha-512=:AAAA:, ' + v).equals(d));
  assert.equal(parseContentDigest('sha-512=:AAAA:'), null);
  assert.throws(() => parseContentDigest('sha-256=:AAAA:'));
});

test('list jobs, cancel, list dead letters, replay', { skip }, async () => {
  const c = new Client();
  const k = kind('list');
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await c.submit(`job ${i}`, k, TENANT)).id);
  const newest = [...ids].reverse();
  const page = await c.listJobs({ kind: k, limit: 2 });
  assert.deepEqual(page.jobs.map((j) => j.id), newest.slice(0, 2));
  const rest = await c.listJobs({ kind: k, limit: 2, after: page.next_after });
  assert.deepEqual(rest.jobs.map((j) => j.id), newest.slice(2));
  assert.equal(rest.next_after, undefined);
  assert.ok((await c.listJobs()).jobs.every((j) => j.tenant === TENANT));

  let j = await c.cancel(ids[0]);
  assert.deepEqual([j.state, j.dead], ['cancelled', true]);
  await assert.rejects(c.cancel(ids[0]), (e) => e instanceof APIError && e.status === 409 && e.reason === 'job-finished');
  assert.deepEqual((await c.listDead({ kind: k })).jobs.map((j) => j.id), [ids[0]]);
  assert.deepEqual((await c.listJobs({ kind: k, state: 'available' })).jobs.map((j) => j.id), newest.slice(0, 2));

  j = await c.replay(ids[0]);
  assert.deepEqual([j.state, j.dead], ['available', false]);
  await assert.rejects(c.replay(ids[0]), (e) => e instanceof APIError && e.status === 409 && e.reason === 'not-dead');
  assert.deepEqual((await c.listDead({ kind: k })).jobs, []);
  await assert.rejects(c.cancel(10 ** 15), (e) => e instanceof APIError && e.status === 404 && e.reason === 'job-not-found');
});

test('allow empty', { skip }, async () => {
  const c = new Client();
  const k = kind('empty');
  await assert.rejects(c.submit('', k, TENANT), (e) => e instanceof APIError && e.status === 422 && e.reason === 'payload-empty');
  const s = await c.submit('', k, TENANT, { allowEmpty: true });
  assert.equal(s.ticket.size, 0);
});

test('attachments and a named store', { skip }, async () => {
  const c = new Client();
  const k = kind('attach');
  const invoice = randomBytes(200_000);
  const terms = Buffer.from('terms and conditions');
  const s = await c.submit(null, k, TENANT, {
    store: 'cold',
    attachments: { 'invoice.pdf': { body: invoice, contentType: 'application/pdf' }, 'terms.txt': Readable.from([terms]) },
  });
  assert.deepEqual([s.attachments, s.store], [['invoice.pdf', 'terms.txt'], 'cold']);
  assert.equal((await c.job(s.id)).store, 'cold');
  const got = {};
  const [, outcome] = await workOne(c, k, async (claim, payload) => {
    assert.equal((await drain(payload)).length, 0); // no main payload
    assert.equal(claim.attachments['invoice.pdf'].type, 'application/pdf');
    for (const name of Object.keys(claim.attachments)) got[name] = await drain(await claim.openAttachment(name));
    return { body: 'ok', contentType: 'text/plain' };
  });
  assert.equal(outcome.state, 'completed');
  assert.deepEqual(got, { 'invoice.pdf': invoice, 'terms.txt': terms });

  await assert.rejects(c.submit(null, k, TENANT, { attachments: { '../x': 'a' } }), (e) => e instanceof APIError && e.status === 400 && e.reason === 'ticket-invalid');
  await assert.rejects(c.submit(null, k, TENANT, { attachments: { 'a.txt': 'a', 'b.txt': '' } }), (e) => e instanceof APIError && e.status === 422 && e.reason === 'payload-empty');
  await assert.rejects(c.submit('x', k, TENANT, { store: 'nowhere' }), (e) => e instanceof APIError && e.status === 422 && e.reason === 'store-not-configured');
  assert.deepEqual((await c.listJobs({ kind: k })).jobs.map((j) => j.id), [s.id]); // the refusals left no job
});
