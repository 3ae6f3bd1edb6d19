// Client of the HTTP API of `claimcheck serve` (docs/openapi.yaml).
//
// Client submits payloads (POST /v1/jobs), reads jobs (GET /v1/jobs/{id})
// and fetches results (GET /v1/jobs/{id}/result); Client.claim and
// Client.work are a worker over the worker endpoints (/v1/claims). Bodies
// are streamed both ways: memory does not grow with the payload. Every
// payload and result is checked end to end: the client sends the SHA-256
// it computed (Content-Digest, RFC 9530), which the server compares with
// its own before anything is enqueued, and verifies the SHA-256 and size of
// what it receives before it keeps it.
//
// Node.js 20+: fetch, crypto and streams only.

import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';

import { CHUNK, contentDigest, fileSha256, parseContentDigest } from './digest.js';

/** The states a job ends in (GET /v1/jobs/{id}: state, or dead). */
export const FINAL_STATES = new Set(['completed', 'cancelled', 'discarded']);

/**
 * An error answer of the API (docs/openapi.yaml, schema Error): status is
 * the HTTP status (0 when the server could not be reached), reason the
 * machine-readable class (digest-mismatch, ticket-forbidden, job-not-found,
 * lease-not-found, payload-too-large, store-unavailable, ...), permanent
 * false when the same request may succeed later (retryAfter, in seconds,
 * may say when).
 */
export class APIError extends Error {
  constructor(status, reason, message, permanent, retryAfter = null) {
    super(`${status} ${reason}: ${message}`);
    this.name = 'APIError';
    this.status = status;
    this.reason = reason;
    this.detail = message;
    this.permanent = permanent;
    this.retryAfter = retryAfter;
  }

  toJSON() {
    return { status: this.status, reason: this.reason, message: this.detail, permanent: this.permanent };
  }
}

/** Bytes received do not match the SHA-256 or size they were announced with (reason payload-corrupt); never names bytes. */
export class PayloadCorruptError extends Error {
  constructor(message) {
    super(message);
    this.name = 'PayloadCorruptError';
    this.reason = 'payload-corrupt';
  }
}

/**
 * Thrown by a worker's handler: fail the job permanently (dead letter now,
 * reason handler-permanent) with its message. Any other error fails the
 * attempt transiently: the retry policy retries it.
 */
export class Permanent extends Error {
  constructor(message) {
    super(message);
    this.name = 'Permanent';
  }
}

/**
 * A Transform that hashes and counts what passes and, at the end, fails
 * with PayloadCorruptError unless it was exactly size bytes with the given
 * SHA-256 (a Buffer; either may be null: not checked). After the end,
 * .sha256 (Buffer) and .size are what passed.
 */
export class Verifier extends Transform {
  constructor(sha256, size) {
    super();
    this.wantSha256 = sha256;
    this.wantSize = size;
    this.h = createHash('sha256');
    this.size = 0;
    this.sha256 = null;
  }

  _transform(chunk, _enc, cb) {
    this.h.update(chunk);
    this.size += chunk.length;
    if (this.wantSize != null && this.size > this.wantSize) {
      cb(new PayloadCorruptError(`more than the ${this.wantSize} bytes announced`));
      return;
    }
    cb(null, chunk);
  }

  _flush(cb) {
    const got = this.h.digest();
    if (this.wantSize != null && this.size !== this.wantSize) {
      cb(new PayloadCorruptError(`${this.size} bytes, ${this.wantSize} announced`));
      return;
    }
    if (this.wantSha256 != null && !got.equals(this.wantSha256)) {
      cb(new PayloadCorruptError(`SHA-256 ${got.toString('hex').slice(0, 12)}…, announced ${this.wantSha256.toString('hex').slice(0, 12)}…`));
      return;
    }
    this.sha256 = got;
    cb();
  }
}

/**
 * A body to send: a Buffer/Uint8Array/string (bytes), a path (string
 * given as {path}), or a Node Readable. Resolves to {open: () => stream,
 * sha256, size, cleanup}: the body is read once to hash it (a stream is
 * spooled to a temporary file on the way) and then opened again to send.
 */
function listQuery({ kind, state, tenants = [], limit, after }) {
  return [['kind', kind], ['state', state], ['limit', limit], ['after', after], ...tenants.map((t) => ['tenant', t])];
}

async function measure(body) {
  if (body == null) return null;
  if (typeof body === 'string' || body instanceof Uint8Array) {
    const buf = Buffer.from(body);
    return { open: () => Readable.from([buf]), sha256: createHash('sha256').update(buf).digest(), size: buf.length, cleanup: async () => {} };
  }
  if (body.path && typeof body.pipe !== 'function') {
    const { sha256, size } = await fileSha256(body.path);
    return { open: () => createReadStream(body.path, { highWaterMark: CHUNK }), sha256, size, cleanup: async () => {} };
  }
  // A stream: spool it while hashing.
  const spool = join(tmpdir(), `claimcheck-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`);
  const v = new Verifier(null, null);
  await pipeline(body, v, createWriteStream(spool, { mode: 0o600 }));
  return { open: () => createReadStream(spool, { highWaterMark: CHUNK }), sha256: v.sha256, size: v.size, cleanup: () => rm(spool, { force: true }) };
}

/**
 * A multipart/form-data body of measured parts ({name, m, contentType}),
 * streamed part after part: {boundary, size, open()}.
 */
function multipart(parts) {
  const boundary = `claimcheck-${randomBytes(16).toString('hex')}`;
  const heads = parts.map((p) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"\r\n`
    + `Content-Type: ${p.contentType || 'application/octet-stream'}\r\nContent-Digest: ${contentDigest(p.m.sha256)}\r\n\r\n`));
  const crlf = Buffer.from('\r\n');
  const end = Buffer.from(`--${boundary}--\r\n`);
  const size = parts.reduce((n, p, i) => n + heads[i].length + p.m.size + crlf.length, end.length);
  async function* body() {
    for (const [i, p] of parts.entries()) {
      yield heads[i];
      for await (const b of p.m.open()) if (b.length > 0) yield b;
      yield crlf;
    }
    yield end;
  }
  return { boundary, size, open: () => Readable.from(body()) };
}

/**
 * A client of one `claimcheck serve`. baseUrl defaults to
 * $CLAIMCHECK_API_URL (e.g. http://127.0.0.1:8080), token to
 * $CLAIMCHECK_API_TOKEN (from `claimcheck tokens create`; none needed on
 * loopback when the server has no tokens). Errors: APIError for every error
 * answer and for a server that cannot be reached (status 0, reason
 * unavailable, permanent false); PayloadCorruptError for bytes that fail
 * verification.
 */
export class Client {
  constructor({ baseUrl = process.env.CLAIMCHECK_API_URL, token = process.env.CLAIMCHECK_API_TOKEN } = {}) {
    if (!baseUrl) throw new Error('no API URL: give baseUrl or set CLAIMCHECK_API_URL');
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.token = token || null;
  }

  url(path, query = []) {
    const u = new URL(this.baseUrl + path);
    for (const [k, v] of query) if (v != null) u.searchParams.append(k, String(v));
    return u;
  }

  /**
   * Send one request and resolve to the Response (status < 300); reject
   * with APIError for an error answer. Redirects (GET only) are followed
   * without the token, up to 5. body is an async iterable or Buffer.
   */
  async request(method, path, { query = [], headers = {}, body, signal } = {}) {
    let url = this.url(path, query);
    for (let hop = 0; hop < 6; hop++) {
      const h = { ...headers };
      if (this.token && hop === 0) h.authorization = `Bearer ${this.token}`;
      let resp;
      try {
        // A request with a body is never redirected: with redirect
        // 'follow' or 'manual', Node's fetch (undici) keeps every byte of
        // the body sent, to send it again after a 307 or 308, so memory
        // grows with the payload (nodejs/undici#4058); with 'error' it
        // streams in constant memory.
        resp = await fetch(url, { method, headers: h, body, duplex: body != null ? 'half' : undefined, redirect: body != null ? 'error' : 'manual', signal });
      } catch (e) {
        if (e.name === 'AbortError') throw e;
        throw new APIError(0, 'unavailable', `${method} ${path}: ${e.cause?.code || e.cause?.message || e.message}`, false);
      }
      if (resp.status >= 300 && resp.status < 400 && method === 'GET' && resp.headers.get('location')) {
        await resp.body?.cancel();
        url = new URL(resp.headers.get('location'), url);
        continue;
      }
      if (resp.status >= 300) throw await apiError(resp);
      return resp;
    }
    throw new APIError(0, 'bad-request', `${method} ${path}: more than 5 redirects`, true);
  }

  async json(method, path, opts) {
    const resp = await this.request(method, path, opts);
    if (resp.status === 204) return null;
    return resp.json();
  }

  async sendBody(method, path, body, { query = [], headers = {}, contentType, sha256 } = {}) {
    const m = await measure(body);
    try {
      const h = { ...headers, 'content-type': contentType || 'application/octet-stream' };
      if (m == null) return await this.json(method, path, { query, headers: { ...h, 'content-length': '0' } });
      h['content-length'] = String(m.size);
      h['content-digest'] = contentDigest(sha256 ?? m.sha256);
      // An empty body goes as none: undici fails a 0-byte stream body
      // the server answers before reading (UND_ERR_SOCKET).
      return await this.json(method, path, { query, headers: h, body: m.size > 0 ? m.open() : undefined });
    } finally {
      await m?.cleanup();
    }
  }

  /**
   * Check payload in and enqueue a job of kind for tenant. payload is
   * {path} (a file), a Buffer or string, or a Readable. The client reads it
   * once to compute its SHA-256 and size (unless opts.sha256, a Buffer,
   * gives the digest the caller already has), then streams it with
   * Content-Length and Content-Digest; the server enqueues nothing unless
   * the bytes it got have that digest. Resolves to the answer (Submitted:
   * id, kind, tenant, duplicate, ticket_bytes, ticket, store,
   * attachments). Rejects with APIError: 422 digest-mismatch, 409
   * idempotency-conflict, 413 payload-too-large, 403 ticket-forbidden, 422
   * payload-empty (an empty payload or attachment without allowEmpty),
   * 422 store-not-configured, ...
   *
   * opts.store names the server's store the documents go to (serve's
   * --store NAME=URL). opts.attachments, instead of a payload (payload
   * null), are the job's named documents (submit --attach NAME=FILE): an
   * object of name → body, body as payload or {body, contentType}; each is
   * measured as a payload is, then all are streamed as one
   * multipart/form-data body, each part with its Content-Digest; the
   * server enqueues the job only if every one is stored (400
   * ticket-invalid for a bad name).
   */
  async submit(payload, kind, tenant, { idempotencyKey, contentType, priority, maxAttempts, sha256, allowEmpty, store, attachments, traceparent, tracestate } = {}) {
    const headers = traceHeaders(traceparent, tracestate);
    if (idempotencyKey != null) headers['idempotency-key'] = idempotencyKey;
    const query = [['kind', kind], ['tenant', tenant], ['priority', priority], ['max_attempts', maxAttempts],
      ['allow_empty', allowEmpty ? 'true' : null], ['store', store]];
    if (attachments == null) return this.sendBody('POST', '/v1/jobs', payload, { query, headers, contentType, sha256 });
    if (payload != null) throw new Error('give a payload or attachments, not both');
    const parts = [];
    try {
      for (const [name, v] of Object.entries(attachments)) {
        const withType = v != null && typeof v === 'object' && 'body' in v;
        parts.push({ name, contentType: withType ? v.contentType : null, m: await measure(withType ? v.body : v) });
        query.push(['attach', name]);
      }
      const mp = multipart(parts);
      headers['content-type'] = `multipart/form-data; boundary=${mp.boundary}`;
      headers['content-length'] = String(mp.size);
      return await this.json('POST', '/v1/jobs', { query, headers, body: mp.open() });
    } finally {
      for (const p of parts) await p.m?.cleanup();
    }
  }

  /** The job (schema Job: id, kind, tenant, state, dead, attempts, max_attempts, reason, error, created_at, finalized_at, has_result). */
  job(id) {
    return this.json('GET', `/v1/jobs/${encodeURIComponent(id)}`);
  }

  /**
   * A page of jobs, newest first (GET /v1/jobs): of tenants (each one the
   * token's), else of all the token's tenants; kind and state filter
   * (state: dead, sent, retrying, or River's available, running,
   * retryable, scheduled, completed, cancelled, discarded, pending). limit
   * is 1 to 1000 (default 100). Resolves to {jobs: [Job, ...], next_after}:
   * pass next_after as after for the next page (absent on the last).
   * Rejects with APIError 400, 403 ticket-forbidden.
   */
  listJobs({ kind, state, tenants = [], limit, after } = {}) {
    return this.json('GET', '/v1/jobs', { query: listQuery({ kind, state, tenants, limit, after }) });
  }

  /** A page of dead letters, newest first (GET /v1/dead), with their reason and error; filters and paging as listJobs. */
  listDead({ kind, tenants = [], limit, after } = {}) {
    return this.json('GET', '/v1/dead', { query: listQuery({ kind, tenants, limit, after }) });
  }

  /**
   * Cancel a job that has not finished (POST /v1/jobs/{id}/cancel): a
   * queued one at once, a running one when its handler returns. Resolves to
   * the Job (a cancelled job is a dead letter). Rejects with APIError 409
   * job-finished, 404 job-not-found (also for another tenant's job).
   */
  cancel(id) {
    return this.json('POST', `/v1/jobs/${encodeURIComponent(id)}/cancel`);
  }

  /**
   * Send a dead letter back to its queue (POST /v1/dead/{id}/replay) once
   * the server checked its payload still exists. Resolves to the Job.
   * Rejects with APIError 409 payload-missing (expired or deleted), 409
   * not-dead, 404 job-not-found.
   */
  replay(id) {
    return this.json('POST', `/v1/dead/${encodeURIComponent(id)}/replay`);
  }

  /**
   * Poll the job every interval ms (doubling up to 5 s) until it is
   * completed or dead and resolve to it; rejects after timeout ms.
   */
  async wait(id, { timeout = 600_000, interval = 500, now = Date.now, delay = sleep } = {}) {
    const deadline = now() + timeout;
    for (;;) {
      const j = await this.job(id);
      if (j.dead || FINAL_STATES.has(j.state)) return j;
      if (now() >= deadline) throw new Error(`job ${id} still ${j.state} after ${timeout} ms`);
      await delay(interval);
      interval = Math.min(interval * 2, 5000);
    }
  }

  /**
   * Stream the job's result into the file dest (written through a
   * temporary file renamed into place only once verified) or a Writable,
   * verifying size and SHA-256 against Content-Length and Content-Digest.
   * Resolves to {sha256: hex, size, contentType}. Rejects with APIError
   * (404 job-not-found, 409 no-result, 410 expired, ...),
   * PayloadCorruptError.
   */
  async fetchResult(id, dest) {
    const resp = await this.request('GET', `/v1/jobs/${encodeURIComponent(id)}/result`);
    const v = verifierFor(resp);
    if (typeof dest === 'string') {
      const tmp = join(dirname(resolve(dest)), `.claimcheck-${basename(dest)}-${process.pid}-${Date.now()}`);
      try {
        await pipeline(Readable.fromWeb(resp.body), v, createWriteStream(tmp, { mode: 0o600 }));
        await rename(tmp, dest);
      } catch (e) {
        await rm(tmp, { force: true });
        throw e;
      }
    } else {
      await pipeline(Readable.fromWeb(resp.body), v, dest, { end: false });
    }
    return { sha256: v.sha256.toString('hex'), size: v.size, contentType: resp.headers.get('content-type') };
  }

  /**
   * Claim the next job of kind (of tenants, default all the token may act
   * on), waiting up to wait seconds (0 to 60); resolves to a Claim, or null
   * if none came. Extend its lease (Claim.extend) before lease_seconds run
   * out, then complete or fail it.
   */
  async claim(kind, { tenants = [], wait = 30, signal } = {}) {
    const query = [['kind', kind], ['wait', wait], ...tenants.map((t) => ['tenant', t])];
    const resp = await this.request('POST', '/v1/claims', { query, headers: { 'content-length': '0' }, signal });
    if (resp.status === 204) return null;
    const c = new Claim(this, await resp.json());
    c.traceparent = resp.headers.get('traceparent');
    c.tracestate = resp.headers.get('tracestate');
    return c;
  }

  /**
   * Work jobs of kind until signal aborts, maxJobs were handled, or
   * (untilEmpty) a claim waited wait seconds for nothing; resolves to the
   * number of jobs handled. handler(claim, payload) gets the verified
   * payload as a Readable (checked again against the claim's SHA-256 and
   * size as it is read) and returns (or resolves to) {body, contentType},
   * a Buffer or string, {path}, a Readable, or null (no result). While it
   * runs the lease is extended every lease_seconds / 3. A handler that
   * throws Permanent fails the job permanently; any other error fails the
   * attempt transiently (its message is recorded: keep payload bytes out of
   * it). onOutcome(claim, outcome) sees each Outcome (state completed,
   * retrying, waiting, dead, released, or lost: the lease ran out or could
   * not be settled, and the job is back with the server's retry policy).
   * Transient API errors of the claim are retried after Retry-After (or
   * 1 s).
   */
  async work(kind, handler, { tenants = [], wait = 30, maxJobs = Infinity, untilEmpty = false, signal, onOutcome } = {}) {
    let done = 0;
    while (!signal?.aborted && done < maxJobs) {
      let c;
      try {
        c = await this.claim(kind, { tenants, wait, signal });
      } catch (e) {
        if (e.name === 'AbortError') break;
        if (!(e instanceof APIError) || e.permanent) throw e;
        await sleep((e.retryAfter ?? 1) * 1000);
        continue;
      }
      if (c == null) {
        if (untilEmpty) break;
        continue;
      }
      let outcome;
      try {
        outcome = await c.run(handler);
      } catch (e) {
        // The lease ran out (404 lease-not-found: the job went back to its
        // queue for another attempt), or the server could not be reached to
        // settle it: the job is no longer ours.
        if (!(e instanceof APIError) || (e.status !== 404 && e.permanent)) throw e;
        outcome = { id: c.job.id, state: 'lost', attempt: c.job.attempt, reason: e.reason, message: e.detail };
      }
      done++;
      onOutcome?.(c, outcome);
    }
    return done;
  }
}

async function apiError(resp) {
  const ra = Number(resp.headers.get('retry-after'));
  const retryAfter = Number.isFinite(ra) && resp.headers.get('retry-after') ? ra : null;
  let doc;
  try {
    doc = JSON.parse(await resp.text());
  } catch {
    return new APIError(resp.status, 'unknown', `HTTP ${resp.status} without an error document`, resp.status < 500, retryAfter);
  }
  return new APIError(resp.status, String(doc.reason || 'unknown'), String(doc.message || ''), doc.permanent ?? resp.status < 500, retryAfter);
}

function verifierFor(resp, sha256 = null, size = null) {
  const cd = resp.headers.get('content-digest');
  if (cd) {
    const d = parseContentDigest(cd);
    if (sha256 && d && !d.equals(sha256)) throw new PayloadCorruptError('Content-Digest is not the SHA-256 the claim announced');
    sha256 ??= d;
  }
  const cl = resp.headers.get('content-length');
  if (size == null && cl != null) size = Number(cl);
  return new Verifier(sha256, size);
}

/**
 * A claimed job under a lease (schema Claim): lease, lease_seconds,
 * lease_expires_at, job {id, kind, tenant, attempt}, payload (its ticket
 * summary: sha256 hex, size bytes, type, inline, created, and kid
 * for a payload sealed inline).
 */
/** W3C trace context headers: traceparent (and tracestate) when given. */
function traceHeaders(traceparent, tracestate) {
  const h = {};
  if (traceparent) {
    h.traceparent = traceparent;
    if (tracestate) h.tracestate = tracestate;
  }
  return h;
}

export class Claim {
  constructor(client, doc) {
    this.client = client;
    this.doc = doc;
    this.lease = doc.lease;
    this.leaseSeconds = doc.lease_seconds;
    this.leaseExpiresAt = doc.lease_expires_at;
    this.job = doc.job;
    this.payload = doc.payload;
    /** The job's attachments by name (ticket summaries), empty without. */
    this.attachments = Object.fromEntries((doc.attachments || []).map((a) => [a.name, a]));
    this.extensions = 0; // leases renewed while the handler ran
    this.lost = null; // the APIError of an extension that found the lease gone
    // The job's W3C trace context (the claim's traceparent and tracestate
    // headers), null when it has none: a handler's spans continue it, and
    // the lease's calls send it.
    this.traceparent = null;
    this.tracestate = null;
  }

  /** The claim's trace headers, for its lease's calls. */
  traceHeaders(headers = {}) {
    return { ...traceHeaders(this.traceparent, this.tracestate), ...headers };
  }

  path(op) {
    return `/v1/claims/${encodeURIComponent(this.lease)}/${op}`;
  }

  /** The id of the key that sealed the payload inline (its ticket's "kid"), null for a plain or offloaded payload. */
  keyId() {
    return typeof this.payload.kid === 'string' && this.payload.kid !== '' ? this.payload.kid : null;
  }

  /**
   * The verified payload as a Readable; it errors with PayloadCorruptError
   * at its end unless the bytes have the claim's SHA-256 and size.
   */
  async openPayload() {
    return this.openVerified('payload', this.payload);
  }

  /** The body of GET op below the lease, verified against ticket t's SHA-256 and size. */
  async openVerified(op, t) {
    const resp = await this.client.request('GET', this.path(op), { headers: this.traceHeaders() });
    const v = verifierFor(resp, Buffer.from(t.sha256, 'hex'), t.size);
    const body = Readable.fromWeb(resp.body);
    body.on('error', (e) => v.destroy(e));
    return body.pipe(v);
  }

  /**
   * The verified attachment name as a Readable, checked against the
   * claim's SHA-256 and size for it as openPayload is. Rejects for a name
   * the claim does not list, with APIError 404 lease-not-found once the
   * lease is gone.
   */
  async openAttachment(name) {
    const a = this.attachments[name];
    if (!a) throw new Error(`the claim has no attachment ${JSON.stringify(name)}`);
    return this.openVerified(`attachments/${encodeURIComponent(name)}`, a);
  }

  /** Renew the lease for another lease_seconds; rejects with APIError 404 lease-not-found once it ran out. */
  async extend() {
    const doc = await this.client.json('POST', this.path('extend'), { headers: this.traceHeaders({ 'content-length': '0' }) });
    this.extensions++;
    this.leaseExpiresAt = doc.lease_expires_at ?? this.leaseExpiresAt;
    return doc;
  }

  /**
   * Complete the job with result (a Buffer or string, {path}, a Readable,
   * or null for none), streamed with its SHA-256 in Content-Digest;
   * resolves to the Outcome.
   */
  complete(result = null, contentType) {
    return this.client.sendBody('POST', this.path('complete'), result, { contentType, headers: this.traceHeaders() });
  }

  /** Fail the attempt, permanently (dead letter now) or transiently (retried); resolves to the Outcome. */
  fail(message, permanent = false) {
    const body = Buffer.from(JSON.stringify({ message: String(message).slice(0, 1024), permanent: !!permanent }));
    return this.client.json('POST', this.path('fail'), {
      headers: this.traceHeaders({ 'content-type': 'application/json', 'content-length': String(body.length) }),
      body,
    });
  }

  /** Run handler on this claim as Client.work does; resolves to the Outcome. */
  async run(handler) {
    // The lease is extended until the attempt's outcome is recorded (a
    // large result may take a while to stream).
    const every = Math.max((this.leaseSeconds * 1000) / 3, 200);
    let extending = Promise.resolve();
    const timer = setInterval(() => {
      extending = extending.then(() => this.extend()).catch((e) => {
        if (e instanceof APIError && e.status === 404) {
          this.lost = e;
          clearInterval(timer);
        } // unreachable for a moment: try again at the next tick
      });
    }, every);
    try {
      let out;
      try {
        const payload = await this.openPayload();
        try {
          out = await handler(this, payload);
        } finally {
          payload.destroy();
        }
      } catch (e) {
        if (e instanceof Permanent) return await this.fail(e.message || 'permanent failure', true);
        if (e instanceof PayloadCorruptError) return await this.fail(`payload-corrupt: ${e.message}`, false);
        return await this.fail(`${e?.name || 'Error'}: ${e?.message ?? e}`, false);
      }
      if (out != null && typeof out === 'object' && 'body' in out && !(out instanceof Uint8Array) && typeof out.pipe !== 'function') {
        return await this.complete(out.body, out.contentType);
      }
      return await this.complete(out);
    } finally {
      clearInterval(timer);
      await extending;
    }
  }
}
