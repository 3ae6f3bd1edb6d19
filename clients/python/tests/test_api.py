"""The client against a real `claimcheck serve`: the Go test TestClientsAPI
(clients/api_test.go) starts one and sets CLAIMCHECK_API_URL,
CLAIMCHECK_API_TOKEN and CLAIMCHECK_API_TENANT (the token's tenant). Each
test uses job kinds of its own, so the tests share the server's queues
without taking each other's jobs."""

import hashlib
import io
import json
import os
import secrets
import tempfile
import threading
import time
import unittest

from claimcheck import APIError, Client, Permanent, Result, content_digest, key_id, parse_content_digest

URL = os.environ.get("CLAIMCHECK_API_URL")
TENANT = os.environ.get("CLAIMCHECK_API_TENANT", "acme")


class SlowSecondRead(io.BytesIO):
    """A seekable body read fast the first time (the client hashes it) and
    at per_mib seconds a MiB once it was sought back to be sent."""

    def __init__(self, data, per_mib):
        super().__init__(data)
        self.per_mib = per_mib
        self.rewound = False

    def seek(self, pos, whence=0):
        self.rewound = self.rewound or (pos == 0 and whence == 0 and self.tell() > 0)
        return super().seek(pos, whence)

    def read(self, n=-1):
        b = super().read(n if n is not None and 0 < n <= 65536 else 65536)
        if b and self.rewound:
            time.sleep(self.per_mib * len(b) / (1 << 20))
        return b


def kind(name: str) -> str:
    return f"py-{name}-{secrets.token_hex(4)}"


@unittest.skipUnless(URL, "CLAIMCHECK_API_URL is not set: go test -run TestClientsAPI ./clients starts a serve and sets it")
class API(unittest.TestCase):
    def setUp(self):
        self.c = Client()

    def settled(self, job_id):
        """The job once its attempt is recorded: the outcome answers before
        the job engine writes the job's row (it completes in batches)."""
        deadline = time.monotonic() + 60
        while True:
            j = self.c.job(job_id)
            if j["state"] != "running" or time.monotonic() > deadline:
                return j
            time.sleep(0.1)

    def work_one(self, k, handler):
        outcomes = []
        n = self.c.work(k, handler, wait=10, max_jobs=1, on_outcome=lambda c, o: outcomes.append((c, o)))
        self.assertEqual(n, 1)
        return outcomes[0]

    def test_submit_work_result(self):
        k = kind("roundtrip")
        payload = secrets.token_bytes(300_000)
        s = self.c.submit(payload, k, TENANT, content_type="application/x-test")
        self.assertEqual(s["kind"], k)
        self.assertEqual(s["tenant"], TENANT)
        self.assertFalse(s["duplicate"])
        self.assertEqual(s["ticket"]["sha256"], hashlib.sha256(payload).hexdigest())
        self.assertEqual(s["ticket"]["size"], len(payload))
        self.assertLessEqual(s["ticket_bytes"], 512)

        def reverse(claim, stream):
            self.assertEqual(claim.job["id"], s["id"])
            self.assertEqual(claim.payload["sha256"], s["ticket"]["sha256"])
            return Result(stream.read()[::-1], "application/x-reversed")

        claim, outcome = self.work_one(k, reverse)
        self.assertEqual(outcome["state"], "completed")
        self.assertEqual(outcome["attempt"], 1)
        j = self.c.wait(s["id"], timeout=60)
        self.assertEqual(j["state"], "completed")
        self.assertTrue(j["has_result"])
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "result")
            r = self.c.fetch_result(s["id"], out)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), payload[::-1])
            self.assertEqual(r["sha256"], hashlib.sha256(payload[::-1]).hexdigest())
            self.assertEqual(r["size"], len(payload))
            self.assertEqual(os.listdir(d), ["result"])  # no temporary file left

    def test_inline_payload_names_its_key(self):
        # The deployment seals with its key file: a small payload travels
        # sealed inline, and its ticket names the key (kid).
        k = kind("kid")
        s = self.c.submit(b"small, sealed inline", k, TENANT)
        self.assertTrue(s["ticket"]["inline"])
        self.assertRegex(s["ticket"].get("kid", ""), r"^local-[0-9a-f]{16}$")
        self.assertEqual(key_id(s["ticket"]), s["ticket"]["kid"])
        seen = []
        claim, outcome = self.work_one(k, lambda claim, stream: seen.append(claim.key_id()))
        self.assertEqual(outcome["state"], "completed")
        self.assertEqual(seen, [s["ticket"]["kid"]])

    def test_submit_from_a_stream_that_cannot_seek(self):
        k = kind("pipe")
        r, w = os.pipe()
        data = secrets.token_bytes(3 << 20)

        def feed():
            with os.fdopen(w, "wb") as f:
                f.write(data)

        t = threading.Thread(target=feed)
        t.start()
        with os.fdopen(r, "rb") as f:
            s = self.c.submit(f, k, TENANT)
        t.join()
        self.assertEqual(s["ticket"]["sha256"], hashlib.sha256(data).hexdigest())
        self.assertEqual(s["ticket"]["size"], len(data))
        _, o = self.work_one(k, lambda c, p: None)  # no result
        self.assertEqual(o["state"], "completed")
        self.assertFalse(self.c.wait(s["id"], timeout=60)["has_result"])

    def test_idempotency_key(self):
        k = kind("idem")
        first = self.c.submit(b"invoice 42", k, TENANT, idempotency_key="invoice-42")
        again = self.c.submit(io.BytesIO(b"invoice 42"), k, TENANT, idempotency_key="invoice-42")
        self.assertFalse(first["duplicate"])
        self.assertTrue(again["duplicate"])
        self.assertEqual(again["id"], first["id"])
        with self.assertRaises(APIError) as e:
            self.c.submit(b"invoice 43", k, TENANT, idempotency_key="invoice-42")
        self.assertEqual((e.exception.status, e.exception.reason), (409, "idempotency-conflict"))

    def test_digest_mismatch(self):
        with self.assertRaises(APIError) as e:
            self.c.submit(b"the bytes sent", kind("mismatch"), TENANT, sha256=hashlib.sha256(b"other bytes").digest())
        self.assertEqual((e.exception.status, e.exception.reason, e.exception.permanent), (422, "digest-mismatch", True))
        self.assertNotIn("the bytes sent", str(e.exception))

    def test_fail_permanent_is_dead(self):
        k = kind("perm")
        s = self.c.submit(b"cannot be rendered", k, TENANT)

        def refuse(claim, stream):
            raise Permanent("unsupported document")

        _, o = self.work_one(k, refuse)
        self.assertEqual(o["state"], "dead")
        j = self.settled(s["id"])
        self.assertTrue(j["dead"])
        self.assertEqual(j["attempts"], 1)
        self.assertIn("unsupported document", j["error"])

    def test_fail_transient_is_retried(self):
        k = kind("trans")
        s = self.c.submit(b"try again", k, TENANT, max_attempts=3)

        def flaky(claim, stream):
            raise ConnectionResetError("renderer went away")

        _, o = self.work_one(k, flaky)
        self.assertIn(o["state"], ("retrying", "waiting"))
        self.assertEqual(o["attempt"], 1)
        j = self.settled(s["id"])
        self.assertFalse(j["dead"])
        self.assertIn(j["state"], ("retryable", "available", "scheduled"))
        self.assertIn("renderer went away", j["error"])

    def test_lease_extended_while_the_handler_runs(self):
        k = kind("slow")
        s = self.c.submit(b"slow work", k, TENANT)

        def slow(claim, stream):
            first = claim.lease_expires_at
            deadline = time.monotonic() + 2 * claim.lease_seconds
            while claim.extensions < 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertGreaterEqual(claim.extensions, 1, "the lease was not extended")
            self.assertIsNone(claim.lost)
            self.assertNotEqual(claim.lease_expires_at, first)
            return b"done"

        claim, o = self.work_one(k, slow)
        self.assertEqual((o["state"], o["attempt"]), ("completed", 1))
        self.assertEqual(self.settled(s["id"])["attempts"], 1)
        # Once completed, the lease is gone.
        with self.assertRaises(APIError) as e:
            claim.extend()
        self.assertEqual((e.exception.status, e.exception.reason), (404, "lease-not-found"))

    def test_slow_result_upload_completes(self):
        # The result's body takes about 8 s to arrive: the attempt must wait
        # for it, not end when the server's idle timer runs out.
        k = kind("slowresult")
        s = self.c.submit(b"slow result", k, TENANT)
        body = SlowSecondRead(secrets.token_bytes(8 << 20), per_mib=1.0)
        claim, o = self.work_one(k, lambda c, p: Result(body, "application/octet-stream"))
        self.assertEqual((o["state"], o["attempt"]), ("completed", 1), o)
        with tempfile.TemporaryFile() as f:
            r = self.c.fetch_result(s["id"], f)
        self.assertEqual(r["sha256"], hashlib.sha256(body.getvalue()).hexdigest())

    def test_claim_waits_then_answers_none(self):
        t0 = time.monotonic()
        self.assertIsNone(self.c.claim(kind("empty"), wait=1))
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)

    def test_job_not_found(self):
        with self.assertRaises(APIError) as e:
            self.c.job(2**62)
        self.assertEqual((e.exception.status, e.exception.reason), (404, "job-not-found"))

    def test_unreachable_server_is_transient(self):
        with self.assertRaises(APIError) as e:
            Client("http://127.0.0.1:9", timeout=5).job(1)
        self.assertEqual((e.exception.status, e.exception.reason, e.exception.permanent), (0, "unavailable", False))

    def test_wait_gives_up_on_its_clock(self):
        s = self.c.submit(b"nobody works this", kind("never"), TENANT)
        now = [0.0]
        slept = []

        def sleep(d):
            slept.append(d)
            now[0] += d

        with self.assertRaises(TimeoutError):
            self.c.wait(s["id"], timeout=20, interval=1, clock=lambda: now[0], sleep=sleep)
        self.assertEqual(slept[:4], [1, 2, 4, 5])  # doubling, at most 5 s

    def test_list_cancel_replay(self):
        k = kind("list")
        ids = [self.c.submit(b"job %d" % i, k, TENANT)["id"] for i in range(3)]
        page = self.c.list_jobs(kind=k, limit=2)
        self.assertEqual([j["id"] for j in page["jobs"]], ids[:0:-1])
        rest = self.c.list_jobs(kind=k, limit=2, after=page["next_after"])
        self.assertEqual([j["id"] for j in rest["jobs"]], ids[:1])
        self.assertNotIn("next_after", rest)
        self.assertTrue(all(j["tenant"] == TENANT for j in self.c.list_jobs()["jobs"]))

        j = self.c.cancel(ids[0])
        self.assertEqual((j["state"], j["dead"]), ("cancelled", True))
        with self.assertRaises(APIError) as cm:
            self.c.cancel(ids[0])
        self.assertEqual((cm.exception.status, cm.exception.reason), (409, "job-finished"))
        self.assertEqual([j["id"] for j in self.c.list_dead(kind=k)["jobs"]], [ids[0]])
        self.assertEqual([j["id"] for j in self.c.list_jobs(kind=k, state="available")["jobs"]], ids[:0:-1])

        j = self.c.replay(ids[0])
        self.assertEqual((j["state"], j["dead"]), ("available", False))
        with self.assertRaises(APIError) as cm:
            self.c.replay(ids[0])
        self.assertEqual((cm.exception.status, cm.exception.reason), (409, "not-dead"))
        self.assertEqual(self.c.list_dead(kind=k)["jobs"], [])
        with self.assertRaises(APIError) as cm:
            self.c.cancel(10**15)
        self.assertEqual((cm.exception.status, cm.exception.reason), (404, "job-not-found"))

    def test_allow_empty(self):
        k = kind("empty")
        with self.assertRaises(APIError) as cm:
            self.c.submit(b"", k, TENANT)
        self.assertEqual((cm.exception.status, cm.exception.reason), (422, "payload-empty"))
        s = self.c.submit(b"", k, TENANT, allow_empty=True)
        self.assertEqual(s["ticket"]["size"], 0)

    def test_attachments_and_store(self):
        k = kind("attach")
        invoice = secrets.token_bytes(200_000)
        terms = b"terms and conditions"
        s = self.c.submit(None, k, TENANT, attachments={"invoice.pdf": (invoice, "application/pdf"), "terms.txt": io.BytesIO(terms)}, store="cold")
        self.assertEqual((s["attachments"], s["store"]), (["invoice.pdf", "terms.txt"], "cold"))
        self.assertEqual(self.c.job(s["id"])["store"], "cold")
        got = {}

        def read_all(claim, stream):
            self.assertEqual(stream.read(), b"")  # no main payload
            self.assertEqual(claim.attachments["invoice.pdf"]["type"], "application/pdf")
            for name in claim.attachments:
                with claim.open_attachment(name) as r:
                    got[name] = r.read()
            return Result(b"ok", "text/plain")

        _, outcome = self.work_one(k, read_all)
        self.assertEqual(outcome["state"], "completed")
        self.assertEqual(got, {"invoice.pdf": invoice, "terms.txt": terms})

        for bad, status, reason in [
            ({"../x": b"a"}, 400, "ticket-invalid"),
            ({"a.txt": b"a", "b.txt": b""}, 422, "payload-empty"),
        ]:
            with self.assertRaises(APIError) as cm:
                self.c.submit(None, k, TENANT, attachments=bad)
            self.assertEqual((cm.exception.status, cm.exception.reason), (status, reason))
        with self.assertRaises(APIError) as cm:
            self.c.submit(b"x", k, TENANT, store="nowhere")
        self.assertEqual((cm.exception.status, cm.exception.reason), (422, "store-not-configured"))
        self.assertEqual(self.c.list_jobs(kind=k)["jobs"][0]["id"], s["id"])  # the refusals left no job


class Digest(unittest.TestCase):
    def test_content_digest_round_trip(self):
        d = hashlib.sha256(b"abc").digest()
        v = content_digest(d)
        self.assertEqual(v, "sha-256=:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=:")  # RFC 9530 style
        self.assertEqual(parse_content_digest("sha-512=:AAAA:, " + v), d)
        self.assertIsNone(parse_content_digest("sha-512=:AAAA:"))
        with self.assertRaises(ValueError):
            parse_content_digest("sha-256=:AAAA:")


if __name__ == "__main__":
    unittest.main()
