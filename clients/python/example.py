#!/usr/bin/env python3
"""Example program of the Python client: a producer and a worker of
`claimcheck serve`'s HTTP API. Every line it prints is one JSON object.

  example.py submit --kind K --tenant T [--idempotency-key X] FILE...
      submit each file (streamed, its SHA-256 sent as Content-Digest);
      prints {"file", "job", "sha256", "size", "duplicate", "ticket_bytes"}
  example.py work --kind K [--tenant T]... [--until-empty] [--max-jobs N]
                  [--wait S] [--delay S] [--fail permanent|transient]
      work jobs: the handler reads the verified payload and returns a JSON
      summary {"worker": "python", "job", "attempt", "sha256", "size",
      "magic"} as the result (after --delay seconds, the lease extended
      meanwhile); prints {"job", "state", "attempt", "extensions"} a job
  example.py status JOB       prints the job
  example.py result JOB OUT   waits for the job, streams its result into
      OUT (verified); prints {"job", "state", "sha256", "size", "result"}
      (result: the result's JSON, when it is JSON)

The server is $CLAIMCHECK_API_URL; the token, if any, $CLAIMCHECK_API_TOKEN.
An error answer prints {"error": {"status", "reason", "message",
"permanent"}} and exits 1.
"""

import argparse
import hashlib
import json
import sys
import time

from claimcheck import APIError, Client, PayloadCorruptError, Permanent, Result, file_sha256


def out(doc):
    print(json.dumps(doc, sort_keys=True), flush=True)


def submit(c, a):
    for path in a.files:
        sha256 = bytes.fromhex(a.sha256) if a.sha256 else None
        s = c.submit(path, a.kind, a.tenant, idempotency_key=a.idempotency_key,
                     content_type=a.content_type, sha256=sha256)
        digest, size = file_sha256(path)
        if s["ticket"]["sha256"] != digest.hex() or s["ticket"]["size"] != size:
            raise SystemExit(f"{path}: the server's ticket does not describe the file sent")
        out({"file": path, "job": s["id"], "sha256": s["ticket"]["sha256"], "size": s["ticket"]["size"],
             "duplicate": s["duplicate"], "ticket_bytes": s["ticket_bytes"]})


def work(c, a):
    def handler(claim, payload):
        h = hashlib.sha256()
        size = 0
        magic = b""
        while True:
            b = payload.read(1 << 20)
            if not b:
                break
            if len(magic) < 5:
                magic += b[: 5 - len(magic)]
            h.update(b)
            size += len(b)
        if a.delay:
            time.sleep(a.delay)
        if a.fail == "permanent":
            raise Permanent("the example was told to fail permanently")
        if a.fail == "transient":
            raise RuntimeError("the example was told to fail transiently")
        summary = {"worker": "python", "job": claim.job["id"], "attempt": claim.job["attempt"],
                   "sha256": h.hexdigest(), "size": size, "magic": magic.decode("latin-1")}
        return Result(json.dumps(summary, sort_keys=True).encode(), "application/json")

    def outcome(claim, o):
        out({"job": o["id"], "state": o["state"], "attempt": o["attempt"], "extensions": claim.extensions,
             "reason": o.get("reason", "")})

    c.work(a.kind, handler, tenants=a.tenant, wait=a.wait, max_jobs=a.max_jobs,
           until_empty=a.until_empty, on_outcome=outcome)


def status(c, a):
    out(c.job(a.job))


def result(c, a):
    j = c.wait(a.job, timeout=a.timeout)
    r = c.fetch_result(a.job, a.out)
    doc = {"job": a.job, "state": j["state"], "sha256": r["sha256"], "size": r["size"]}
    if (r["content_type"] or "").startswith("application/json"):
        with open(a.out, "rb") as f:
            doc["result"] = json.load(f)
    out(doc)


def main(argv=None):
    p = argparse.ArgumentParser(description="claimcheck Python client example")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("submit")
    s.add_argument("--kind", required=True)
    s.add_argument("--tenant", required=True)
    s.add_argument("--idempotency-key")
    s.add_argument("--content-type", default="application/pdf")
    s.add_argument("--sha256", help="send this SHA-256 (hex) instead of the file's: the server must refuse it")
    s.add_argument("files", nargs="+")
    w = sub.add_parser("work")
    w.add_argument("--kind", required=True)
    w.add_argument("--tenant", action="append")
    w.add_argument("--until-empty", action="store_true")
    w.add_argument("--max-jobs", type=int)
    w.add_argument("--wait", type=int, default=5)
    w.add_argument("--delay", type=float, default=0)
    w.add_argument("--fail", choices=["permanent", "transient"])
    st = sub.add_parser("status")
    st.add_argument("job", type=int)
    r = sub.add_parser("result")
    r.add_argument("job", type=int)
    r.add_argument("out")
    r.add_argument("--timeout", type=float, default=600)
    a = p.parse_args(argv)
    c = Client()
    try:
        {"submit": submit, "work": work, "status": status, "result": result}[a.cmd](c, a)
    except APIError as e:
        out({"error": e.as_dict()})
        return 1
    except PayloadCorruptError as e:
        out({"error": {"status": 0, "reason": e.reason, "message": str(e), "permanent": True}})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
