"""Client of the HTTP API of `claimcheck serve` (docs/openapi.yaml).

Client submits payloads (POST /v1/jobs), reads jobs (GET /v1/jobs/{id})
and fetches results (GET /v1/jobs/{id}/result); Client.claim and
Client.work are a worker over the worker endpoints (/v1/claims). Bodies
are streamed both ways, CHUNK bytes at a time: memory does not grow with
the payload. Every payload and result is checked end to end: the client
sends the SHA-256 it computed (Content-Digest, RFC 9530), which the server
compares with its own before anything is enqueued, and verifies the
SHA-256 and size of what it receives before it keeps it.

Standard library only (urllib, hashlib, json, threading).
"""

from __future__ import annotations

import binascii
import hashlib
import io
import json
import os
import secrets
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

from .digest import CHUNK, content_digest, file_sha256, parse_content_digest

__all__ = [
    "APIError",
    "Claim",
    "Client",
    "PayloadCorruptError",
    "Permanent",
    "Result",
    "VerifyingReader",
]

# The states a job ends in (GET /v1/jobs/{id}: state, or dead).
FINAL_STATES = frozenset({"completed", "cancelled", "discarded"})


class APIError(Exception):
    """An error answer of the API (docs/openapi.yaml, schema Error).

    status is the HTTP status (0 when the server could not be reached);
    reason the machine-readable class (e.g. digest-mismatch,
    ticket-forbidden, job-not-found, lease-not-found, payload-too-large,
    store-unavailable); permanent is False when the same request may
    succeed later (then retry_after, in seconds, may say when)."""

    def __init__(self, status: int, reason: str, message: str, permanent: bool, retry_after: float | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.permanent = permanent
        self.retry_after = retry_after

    def as_dict(self) -> dict:
        return {"status": self.status, "reason": self.reason, "message": self.message, "permanent": self.permanent}


class PayloadCorruptError(ValueError):
    """Bytes received do not match the SHA-256 or size they were announced
    with (reason payload-corrupt). Names the sizes and digest prefixes,
    never bytes."""

    reason = "payload-corrupt"


class Permanent(Exception):
    """Raised by a worker's handler: fail the job permanently (dead letter
    now, reason handler-permanent) with str(self) as its message. Any other
    exception fails the attempt transiently: the retry policy retries it."""


@dataclass
class Result:
    """What a handler returns: body is bytes, a path (str or os.PathLike),
    a binary file object, or None for no result; content_type is recorded
    in the result's ticket."""

    body: Any = None
    content_type: str | None = None


class VerifyingReader(io.RawIOBase):
    """A binary stream over an HTTP response body that counts and hashes
    the bytes as they are read and, at the end, raises PayloadCorruptError
    unless they are exactly size bytes with the given SHA-256 (bytes).
    Closing it closes the response."""

    def __init__(self, resp, sha256: bytes | None, size: int | None):
        self._resp = resp
        self._want_sha256 = sha256
        self._want_size = size
        self._h = hashlib.sha256()
        self.size = 0
        self.sha256: bytes | None = None  # set at the end, once verified

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._resp.readinto(b)
        if n:
            self._h.update(memoryview(b)[:n])
            self.size += n
            if self._want_size is not None and self.size > self._want_size:
                raise PayloadCorruptError(f"more than the {self._want_size} bytes announced")
            return n
        if self.sha256 is None:
            self._finish()
        return 0

    def _finish(self) -> None:
        got = self._h.digest()
        if self._want_size is not None and self.size != self._want_size:
            raise PayloadCorruptError(f"{self.size} bytes, {self._want_size} announced")
        if self._want_sha256 is not None and got != self._want_sha256:
            raise PayloadCorruptError(
                f"SHA-256 {got.hex()[:12]}…, announced {self._want_sha256.hex()[:12]}…"
            )
        self.sha256 = got

    def close(self) -> None:
        try:
            self._resp.close()
        finally:
            super().close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # Redirects are followed by Client itself, without the token.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _body_of(body: Any) -> tuple[BinaryIO | None, bool]:
    """A readable binary file for body (bytes, path, file object, None) and
    whether we opened it (and so close it)."""
    if body is None:
        return None, False
    if isinstance(body, (bytes, bytearray, memoryview)):
        return io.BytesIO(bytes(body)), True
    if isinstance(body, (str, os.PathLike)):
        return open(body, "rb"), True
    return body, False


def _measure(f: BinaryIO) -> tuple[BinaryIO, bytes, int, bool]:
    """SHA-256 and size of f from where it stands, and a file positioned
    back there to send: f itself when seekable, else a temporary copy
    (spooled while hashing; the last value says it is ours to close)."""
    try:
        start = f.tell()
        f.seek(start)
        seekable = True
    except (AttributeError, OSError, io.UnsupportedOperation):
        seekable = False
    if seekable:
        sha, size = file_sha256(f)
        f.seek(start)
        return f, sha, size, False
    spool = tempfile.TemporaryFile()
    h = hashlib.sha256()
    size = 0
    while True:
        b = f.read(CHUNK)
        if not b:
            break
        h.update(b)
        size += len(b)
        spool.write(b)
    spool.seek(0)
    return spool, h.digest(), size, True


class _Parts:
    """A multipart/form-data body streamed from its parts, one after the
    other: segments of bytes and (file, size) read CHUNK bytes at a time.
    length is its size in bytes, for Content-Length."""

    def __init__(self, parts: list[tuple[str, BinaryIO, bytes, int, str | None]]):
        self.boundary = "claimcheck-" + secrets.token_hex(16)
        self._segments: list[Any] = []
        for name, f, digest, size, ctype in parts:
            head = f"--{self.boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n"
            head += f"Content-Type: {ctype or 'application/octet-stream'}\r\n"
            head += f"Content-Digest: {content_digest(digest)}\r\n\r\n"
            self._segments += [head.encode(), (f, size), b"\r\n"]
        self._segments.append(f"--{self.boundary}--\r\n".encode())
        self.length = sum(len(x) if isinstance(x, bytes) else x[1] for x in self._segments)
        self._i = 0
        self._left: Any = None

    def read(self, n: int = -1) -> bytes:
        while self._i < len(self._segments):
            seg = self._segments[self._i]
            if isinstance(seg, bytes):
                self._i += 1
                return seg
            f, size = seg
            if self._left is None:
                self._left = size
            if self._left > 0:
                b = f.read(min(CHUNK, self._left))
                if not b:
                    raise ValueError("an attachment ended before the size it was measured at")
                self._left -= len(b)
                return b
            self._left = None
            self._i += 1
        return b""


class Client:
    """A client of one `claimcheck serve`.

    base_url defaults to $CLAIMCHECK_API_URL (e.g. http://127.0.0.1:8080),
    token to $CLAIMCHECK_API_TOKEN (from `claimcheck tokens create`; none
    needed on loopback when the server has no tokens). timeout bounds, in
    seconds, each wait for the server (connect, and each read or write),
    not a whole transfer. Errors: APIError for every error answer and for
    a server that cannot be reached (status 0, reason unavailable,
    permanent False); PayloadCorruptError for bytes that fail verification.
    """

    def __init__(self, base_url: str | None = None, token: str | None = None, timeout: float = 60.0):
        base_url = base_url or os.environ.get("CLAIMCHECK_API_URL")
        if not base_url:
            raise ValueError("no API URL: give base_url or set CLAIMCHECK_API_URL")
        self.base_url = base_url.rstrip("/")
        self.token = token if token is not None else os.environ.get("CLAIMCHECK_API_TOKEN") or None
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_NoRedirect)

    # -- transport ---------------------------------------------------------

    def _url(self, path: str, query: list[tuple[str, Any]] | None = None) -> str:
        u = self.base_url + path
        if query:
            u += "?" + urllib.parse.urlencode([(k, str(v)) for k, v in query if v is not None])
        return u

    def _request(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        body: BinaryIO | bytes | None = None,
        timeout: float | None = None,
        url: str | None = None,
    ):
        """Send one request and return the open response (status < 300);
        raise APIError for an error answer. Redirects (GET only) are
        followed without the token, up to 5."""
        url = url or self._url(path, query)
        hdrs = dict(headers or {})
        for hop in range(6):
            req = urllib.request.Request(url, data=body, method=method, headers=hdrs)
            if self.token and hop == 0:
                req.add_header("Authorization", "Bearer " + self.token)
            try:
                resp = self._opener.open(req, timeout=timeout or self.timeout)
            except urllib.error.HTTPError as e:
                if e.code in (301, 302, 303, 307, 308) and method == "GET" and e.headers.get("Location"):
                    url = urllib.parse.urljoin(url, e.headers["Location"])
                    e.close()
                    continue
                raise self._error(e) from None
            except urllib.error.URLError as e:
                raise APIError(0, "unavailable", f"{method} {path}: {e.reason}", False) from None
            except (ConnectionError, TimeoutError) as e:
                raise APIError(0, "unavailable", f"{method} {path}: {e}", False) from None
            return resp
        raise APIError(0, "bad-request", f"{method} {path}: more than 5 redirects", True)

    @staticmethod
    def _error(e: urllib.error.HTTPError) -> APIError:
        try:
            raw = e.read(64 << 10)
        except OSError:
            raw = b""
        finally:
            e.close()
        retry = e.headers.get("Retry-After")
        try:
            retry_after = float(retry) if retry else None
        except ValueError:
            retry_after = None
        try:
            doc = json.loads(raw)
            return APIError(
                e.code,
                str(doc.get("reason") or "unknown"),
                str(doc.get("message") or ""),
                bool(doc.get("permanent", e.code < 500)),
                retry_after,
            )
        except (ValueError, AttributeError):
            return APIError(e.code, "unknown", f"HTTP {e.code} without an error document", e.code < 500, retry_after)

    def _json(self, method: str, path: str, **kw) -> Any:
        with self._request(method, path, **kw) as resp:
            if resp.status == 204:
                return None
            return json.load(resp)

    # -- producer ----------------------------------------------------------

    def submit(
        self,
        payload: Any,
        kind: str,
        tenant: str,
        *,
        idempotency_key: str | None = None,
        content_type: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        sha256: bytes | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
        allow_empty: bool = False,
        store: str | None = None,
        attachments: Any = None,
    ) -> dict:
        """Check payload in and enqueue a job of kind for tenant.

        payload is bytes, a path or a binary file object (read from where
        it stands). The client reads it once to compute its SHA-256 and
        size (unless sha256 gives the digest the caller already has), then
        streams it as the request body with Content-Length and
        Content-Digest; the server enqueues nothing unless the bytes it got
        have that digest. Returns the answer (Submitted: id, kind, tenant,
        duplicate, ticket_bytes, ticket, store, attachments). Raises
        APIError: 422 digest-mismatch, 409 idempotency-conflict, 413
        payload-too-large, 403 ticket-forbidden (a tenant the token may not
        act on), 422 payload-empty (an empty payload or attachment without
        allow_empty=True), 422 store-not-configured, …

        store names the server's store the documents go to (serve's
        --store NAME=URL). attachments, instead of a payload (payload
        None), are the job's named documents (submit --attach NAME=FILE):
        a dict or a list of (name, body) pairs, body as payload or a
        (body, content_type) pair; each is measured as a payload is, then
        all are streamed as one multipart/form-data body, each part with
        its Content-Digest; the server enqueues the job only if every one
        is stored (400 ticket-invalid for a bad name).

        traceparent (and tracestate), the W3C trace context of the
        caller's span, make the job join the caller's trace."""
        if attachments is not None:
            if payload is not None:
                raise ValueError("give a payload or attachments, not both")
            return self._submit_attachments(kind, tenant, attachments, idempotency_key, priority, max_attempts, allow_empty, store, traceparent, tracestate)
        f, ours = _body_of(payload)
        try:
            f, digest, size, spooled = _measure(f)
            try:
                headers = _trace_headers(traceparent, tracestate) | {
                    "Content-Length": str(size),
                    "Content-Digest": content_digest(sha256 if sha256 is not None else digest),
                    "Content-Type": content_type or "application/octet-stream",
                }
                if idempotency_key is not None:
                    headers["Idempotency-Key"] = idempotency_key
                query = self._submit_query(kind, tenant, priority, max_attempts, allow_empty, store)
                return self._json("POST", "/v1/jobs", query=query, headers=headers, body=f)
            finally:
                if spooled:
                    f.close()
        finally:
            if ours:
                f.close()

    @staticmethod
    def _submit_query(kind, tenant, priority, max_attempts, allow_empty, store) -> list[tuple[str, Any]]:
        return [("kind", kind), ("tenant", tenant), ("priority", priority), ("max_attempts", max_attempts),
                ("allow_empty", "true" if allow_empty else None), ("store", store)]

    def _submit_attachments(self, kind, tenant, attachments, idempotency_key, priority, max_attempts, allow_empty, store, traceparent=None, tracestate=None) -> dict:
        items = list(attachments.items()) if isinstance(attachments, dict) else list(attachments)
        if not items:
            raise ValueError("no attachments")
        opened: list[BinaryIO] = []
        try:
            parts = []
            for name, body in items:
                ctype = None
                if isinstance(body, tuple):
                    body, ctype = body
                f, ours = _body_of(body)
                if ours:
                    opened.append(f)
                f, digest, size, spooled = _measure(f)
                if spooled:
                    opened.append(f)
                parts.append((name, f, digest, size, ctype))
            body = _Parts(parts)
            headers = _trace_headers(traceparent, tracestate) | {"Content-Length": str(body.length), "Content-Type": f"multipart/form-data; boundary={body.boundary}"}
            if idempotency_key is not None:
                headers["Idempotency-Key"] = idempotency_key
            query = self._submit_query(kind, tenant, priority, max_attempts, allow_empty, store)
            query += [("attach", name) for name, _ in items]
            return self._json("POST", "/v1/jobs", query=query, headers=headers, body=body)
        finally:
            for f in opened:
                f.close()

    def job(self, job_id: int) -> dict:
        """The job (schema Job: id, kind, tenant, state, dead, attempts,
        max_attempts, reason, error, created_at, finalized_at, has_result).
        Raises APIError 404 job-not-found, 403 ticket-forbidden."""
        return self._json("GET", f"/v1/jobs/{int(job_id)}")

    def list_jobs(
        self,
        *,
        kind: str | None = None,
        state: str | None = None,
        tenants: list[str] | None = None,
        limit: int | None = None,
        after: int | None = None,
    ) -> dict:
        """A page of jobs, newest first (GET /v1/jobs): of tenants (each
        one the token's), else of all the token's tenants; kind and state
        filter (state: dead, sent, retrying, or River's available, running,
        retryable, scheduled, completed, cancelled, discarded, pending).
        limit is 1 to 1000 (default 100). Returns {"jobs": [Job, ...],
        "next_after": id}; pass next_after as after for the next page (it
        is absent on the last). Raises APIError 400, 403 ticket-forbidden."""
        return self._json("GET", "/v1/jobs", query=self._list_query(kind, state, tenants, limit, after))

    def list_dead(
        self,
        *,
        kind: str | None = None,
        tenants: list[str] | None = None,
        limit: int | None = None,
        after: int | None = None,
    ) -> dict:
        """A page of dead letters, newest first (GET /v1/dead), with their
        reason and error; filters and paging as list_jobs."""
        return self._json("GET", "/v1/dead", query=self._list_query(kind, None, tenants, limit, after))

    @staticmethod
    def _list_query(kind, state, tenants, limit, after) -> list[tuple[str, Any]]:
        q: list[tuple[str, Any]] = [("kind", kind), ("state", state), ("limit", limit), ("after", after)]
        q += [("tenant", t) for t in tenants or []]
        return q

    def cancel(self, job_id: int) -> dict:
        """Cancel a job that has not finished (POST /v1/jobs/{id}/cancel):
        a queued one at once, a running one when its handler returns.
        Returns the Job (a cancelled job is a dead letter). Raises APIError
        409 job-finished, 404 job-not-found (also for another tenant's)."""
        return self._json("POST", f"/v1/jobs/{int(job_id)}/cancel")

    def replay(self, job_id: int) -> dict:
        """Send a dead letter back to its queue (POST
        /v1/dead/{id}/replay) after the server checked its payload still
        exists. Returns the Job. Raises APIError 409 payload-missing (its
        payload expired or was deleted), 409 not-dead, 404 job-not-found."""
        return self._json("POST", f"/v1/dead/{int(job_id)}/replay")

    def wait(
        self,
        job_id: int,
        timeout: float = 600.0,
        interval: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> dict:
        """Poll the job every interval seconds (doubling up to 5 s) until
        it is completed or dead and return it; raises TimeoutError after
        timeout seconds. clock and sleep are injectable for tests."""
        deadline = clock() + timeout
        while True:
            j = self.job(job_id)
            if j.get("dead") or j.get("state") in FINAL_STATES:
                return j
            if clock() >= deadline:
                raise TimeoutError(f"job {job_id} still {j.get('state')} after {timeout:g} s")
            sleep(interval)
            interval = min(interval * 2, 5.0)

    def fetch_result(self, job_id: int, dest: str | os.PathLike | BinaryIO) -> dict:
        """Stream the job's result into dest (a path, written through a
        temporary file renamed into place only once verified, or a binary
        file object), verifying size and SHA-256 against Content-Length and
        Content-Digest. Returns {"sha256": hex, "size": bytes,
        "content_type": …}. Raises APIError (404 job-not-found, 409
        no-result while it has none yet, 410 when it expired, …),
        PayloadCorruptError."""
        resp = self._request("GET", f"/v1/jobs/{int(job_id)}/result")
        with self._verifying(resp) as r:
            if isinstance(dest, (str, os.PathLike)):
                d = os.path.dirname(os.path.abspath(dest))
                fd, tmp = tempfile.mkstemp(dir=d, prefix=".claimcheck-")
                try:
                    with os.fdopen(fd, "wb") as out:
                        _copy(r, out)
                    os.replace(tmp, dest)
                except BaseException:
                    os.unlink(tmp)
                    raise
            else:
                _copy(r, dest)
            return {"sha256": r.sha256.hex(), "size": r.size, "content_type": resp.headers.get("Content-Type")}

    @staticmethod
    def _verifying(resp, sha256: bytes | None = None, size: int | None = None) -> VerifyingReader:
        digest = resp.headers.get("Content-Digest")
        if digest:
            d = parse_content_digest(digest)
            if sha256 is not None and d is not None and d != sha256:
                resp.close()
                raise PayloadCorruptError("Content-Digest is not the SHA-256 the claim announced")
            sha256 = sha256 or d
        length = resp.headers.get("Content-Length")
        if size is None and length is not None:
            size = int(length)
        return VerifyingReader(resp, sha256, size)

    # -- worker ------------------------------------------------------------

    def claim(self, kind: str, tenants: list[str] | None = None, wait: int = 30) -> "Claim | None":
        """Claim the next job of kind (of tenants, default all the token
        may act on), waiting up to wait seconds (0 to 60) for one; None if
        none came. The job is held under a lease of claim.lease_seconds:
        extend it (Claim.extend) before it runs out, then complete or fail
        it. Raises APIError."""
        query: list[tuple[str, Any]] = [("kind", kind), ("wait", int(wait))]
        query += [("tenant", t) for t in tenants or []]
        with self._request("POST", "/v1/claims", query=query, headers={"Content-Length": "0"}, body=b"",
                           timeout=self.timeout + wait) as resp:
            if resp.status == 204:
                return None
            c = Claim(self, json.load(resp))
            c.traceparent = resp.headers.get("traceparent")
            c.tracestate = resp.headers.get("tracestate")
            return c

    def work(
        self,
        kind: str,
        handler: Callable[["Claim", BinaryIO], Any],
        *,
        tenants: list[str] | None = None,
        wait: int = 30,
        max_jobs: int | None = None,
        until_empty: bool = False,
        stop: threading.Event | None = None,
        on_outcome: Callable[["Claim", dict], None] | None = None,
    ) -> int:
        """Work jobs of kind until stop is set, max_jobs were handled, or
        (until_empty) a claim waited wait seconds for nothing. Returns the
        number of jobs handled.

        For each job, handler(claim, payload) gets the verified payload as
        a binary stream (checked again here against the claim's SHA-256
        and size as it is read) and returns a Result, bytes, a path, a
        binary file, or None (no result). While it runs, the lease is
        extended every lease_seconds / 3. A handler that raises Permanent
        fails the job permanently; any other exception fails the attempt
        transiently (the message is the exception's type and text: keep
        payload bytes out of it). on_outcome(claim, outcome) sees each
        Outcome (state completed, retrying, waiting, dead, released, or
        lost: the lease ran out or could not be settled, and the job is
        back with the server's retry policy).
        Transient API errors of the claim are retried after Retry-After (or
        1 s); others are raised."""
        done = 0
        while not (stop and stop.is_set()) and (max_jobs is None or done < max_jobs):
            try:
                c = self.claim(kind, tenants, wait)
            except APIError as e:
                if e.permanent:
                    raise
                time.sleep(e.retry_after or 1.0)
                continue
            if c is None:
                if until_empty:
                    break
                continue
            try:
                outcome = c.run(handler)
            except APIError as e:
                # The lease ran out (404 lease-not-found: the job went back
                # to its queue for another attempt), or the server could not
                # be reached to settle it: the job is no longer ours.
                if e.status != 404 and e.permanent:
                    raise
                outcome = {"id": c.job["id"], "state": "lost", "attempt": c.job["attempt"], "reason": e.reason, "message": e.message}
            done += 1
            if on_outcome:
                on_outcome(c, outcome)
        return done


class Claim:
    """A claimed job under a lease (schema Claim): lease, lease_seconds,
    lease_expires_at, job {id, kind, tenant, attempt}, payload (its ticket
    summary: sha256 hex, size bytes, type, inline, created, and kid
    for a payload sealed inline)."""

    def __init__(self, client: Client, doc: dict):
        self.client = client
        self.doc = doc
        self.lease: str = doc["lease"]
        self.lease_seconds: int = int(doc["lease_seconds"])
        self.lease_expires_at: str = doc["lease_expires_at"]
        self.job: dict = doc["job"]
        self.payload: dict = doc["payload"]
        # The job's attachments by name (ticket summaries), empty without.
        self.attachments: dict[str, dict] = {a["name"]: a for a in doc.get("attachments") or []}
        self.lost: APIError | None = None  # set when an extension found the lease gone
        self.extensions = 0  # leases renewed while the handler ran
        # The job's W3C trace context (the claim's traceparent and
        # tracestate headers), None when it has none: a handler's spans
        # continue it, and the lease's calls send it.
        self.traceparent: str | None = None
        self.tracestate: str | None = None

    def _headers(self, headers: dict[str, str] | None = None) -> dict[str, str]:
        return _trace_headers(self.traceparent, self.tracestate) | (headers or {})

    def key_id(self) -> str | None:
        """The id of the key that sealed the payload inline (its ticket's
        "kid"), None for a plain or offloaded payload."""
        kid = self.payload.get("kid")
        return kid if isinstance(kid, str) and kid else None

    def _path(self, op: str) -> str:
        return f"/v1/claims/{urllib.parse.quote(self.lease, safe='')}/{op}"

    def open_payload(self) -> VerifyingReader:
        """The verified payload as a binary stream; reading to its end
        raises PayloadCorruptError unless the bytes have the claim's
        SHA-256 and size. Close it when done."""
        resp = self.client._request("GET", self._path("payload"), headers=self._headers())
        return self.client._verifying(resp, binascii.unhexlify(self.payload["sha256"]), int(self.payload["size"]))

    def open_attachment(self, name: str) -> VerifyingReader:
        """The verified attachment name as a binary stream, checked against
        the claim's SHA-256 and size for it as open_payload is. Raises
        KeyError for a name the claim does not list, APIError 404
        lease-not-found once the lease is gone."""
        a = self.attachments[name]
        resp = self.client._request("GET", self._path("attachments/" + urllib.parse.quote(name, safe="")), headers=self._headers())
        return self.client._verifying(resp, binascii.unhexlify(a["sha256"]), int(a["size"]))

    def extend(self) -> dict:
        """Renew the lease for another lease_seconds; returns the claim
        document. Raises APIError 404 lease-not-found once it ran out."""
        doc = self.client._json("POST", self._path("extend"), headers=self._headers({"Content-Length": "0"}), body=b"")
        self.extensions += 1
        self.lease_expires_at = doc.get("lease_expires_at", self.lease_expires_at)
        return doc

    def complete(self, result: Any = None, content_type: str | None = None) -> dict:
        """Complete the job with result (bytes, a path, a binary file, or
        None for none), streamed with its SHA-256 in Content-Digest.
        Returns the Outcome. Raises APIError (404 lease-not-found, 422
        digest-mismatch, 413 …)."""
        f, ours = _body_of(result)
        if f is None:
            return self.client._json("POST", self._path("complete"), headers=self._headers({"Content-Length": "0"}), body=b"")
        try:
            f, digest, size, spooled = _measure(f)
            try:
                headers = self._headers({
                    "Content-Length": str(size),
                    "Content-Digest": content_digest(digest),
                    "Content-Type": content_type or "application/octet-stream",
                })
                return self.client._json("POST", self._path("complete"), headers=headers, body=f)
            finally:
                if spooled:
                    f.close()
        finally:
            if ours:
                f.close()

    def fail(self, message: str, permanent: bool = False) -> dict:
        """Fail the attempt: permanently (dead letter now) or transiently
        (the retry policy retries it). message (at most 1024 characters
        are kept) is recorded on the job. Returns the Outcome."""
        body = json.dumps({"message": message[:1024], "permanent": bool(permanent)}).encode()
        return self.client._json(
            "POST", self._path("fail"), headers=self._headers({"Content-Type": "application/json", "Content-Length": str(len(body))}), body=body
        )

    def run(self, handler: Callable[["Claim", BinaryIO], Any]) -> dict:
        """Run handler on this claim as Client.work does and return the
        Outcome."""
        stop = threading.Event()
        keeper = threading.Thread(target=self._keep, args=(stop,), daemon=True)
        keeper.start()
        try:
            try:
                with self.open_payload() as payload:
                    out = handler(self, payload)
            except Permanent as e:
                return self.fail(str(e) or "permanent failure", permanent=True)
            except PayloadCorruptError as e:
                return self.fail(f"payload-corrupt: {e}", permanent=False)
            except Exception as e:  # the handler's failure: transient
                return self.fail(f"{type(e).__name__}: {e}", permanent=False)
            if isinstance(out, Result):
                return self.complete(out.body, out.content_type)
            return self.complete(out)
        finally:
            stop.set()
            keeper.join()

    def _keep(self, stop: threading.Event) -> None:
        every = max(self.lease_seconds / 3, 0.2)
        while not stop.wait(every):
            try:
                self.extend()
            except APIError as e:
                if e.status == 404:
                    self.lost = e
                    return
                # Unreachable for a moment: try again at the next tick.


def _trace_headers(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    """W3C trace context headers: traceparent (and tracestate) when given."""
    if not traceparent:
        return {}
    return {"traceparent": traceparent} | ({"tracestate": tracestate} if tracestate else {})


def _copy(r: BinaryIO, out: BinaryIO) -> None:
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while True:
        n = r.readinto(buf)
        if not n:
            return
        out.write(view[:n])
