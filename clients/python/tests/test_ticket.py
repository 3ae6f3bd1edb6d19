"""The ticket check against the fixtures the Go test also reads:
testdata/tickets/valid/*.json (real tickets made by the Go code) and
testdata/tickets/invalid.json (every case refused)."""

import glob
import json
import os
import unittest

from claimcheck import ticket

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
TICKETS = os.path.join(ROOT, "testdata", "tickets")


def valid_fixtures():
    paths = sorted(glob.glob(os.path.join(TICKETS, "valid", "*.json")))
    if not paths:
        raise AssertionError(f"no valid ticket fixtures under {TICKETS}/valid")
    for p in paths:
        with open(p, "rb") as f:
            yield os.path.basename(p), f.read()


def invalid_cases():
    with open(os.path.join(TICKETS, "invalid.json"), "rb") as f:
        return json.load(f)["cases"]


class ValidTickets(unittest.TestCase):
    def test_real_tickets_pass(self):
        for name, raw in valid_fixtures():
            with self.subTest(name):
                doc = ticket.check_ticket(raw)
                self.assertEqual(doc["v"], 1)
                self.assertEqual(ticket.validate(json.loads(raw)), [])

    def test_key_id(self):
        # Sealed inline tickets name their key; plain, offloaded and old
        # sealed tickets (written before "kid") have none.
        fixtures = dict(valid_fixtures())
        for name in ("inline-encrypted.json", "inline-empty-encrypted.json"):
            kid = ticket.key_id(ticket.check_ticket(fixtures[name]))
            self.assertRegex(kid or "", r"^local-[0-9a-f]{16}$", name)
        for name in ("inline-signed.json", "offloaded-encrypted.json", "corpus-bash.json"):
            self.assertIsNone(ticket.key_id(ticket.check_ticket(fixtures[name])), name)
        with open(os.path.join(ROOT, "testdata", "seal", "inline-streaming.json"), "rb") as f:
            old = ticket.check_ticket(f.read())
        self.assertIn("dek", old)
        self.assertIsNone(ticket.key_id(old))

    def test_unknown_fields_are_accepted(self):
        for name, raw in valid_fixtures():
            with self.subTest(name):
                doc = json.loads(raw)
                doc["priority"] = 7
                doc["trace"] = {"id": "abc", "spans": [1, 2, 3]}
                ticket.check_ticket(json.dumps(doc))

    def test_surrounding_whitespace_is_not_data(self):
        _, raw = next(valid_fixtures())
        ticket.check_ticket(b" \n" + raw + b"\r\n")


class InvalidTickets(unittest.TestCase):
    def test_every_case_is_refused(self):
        cases = invalid_cases()
        self.assertGreater(len(cases), 40)
        for c in cases:
            with self.subTest(c["name"]):
                with self.assertRaises(ticket.TicketError):
                    ticket.check_ticket(c["ticket"])

    def test_refused_by_the_check_named(self):
        for c in invalid_cases():
            with self.subTest(c["name"]):
                by = c["refused_by"]
                if by == "json":
                    with self.assertRaises(ValueError):
                        json.loads(c["ticket"])
                    continue
                errors = ticket.validate(json.loads(c["ticket"]))
                if by in ("schema", "schema-only"):
                    self.assertNotEqual(errors, [], "the schema accepts it")
                elif by == "beyond":
                    self.assertEqual(errors, [], "the schema refuses it; the case says it cannot")
                else:
                    self.fail(f"unknown refused_by {by!r}")

    def test_errors_never_contain_values(self):
        marker = "PAYLOAD-MARKER-9d1c7e <>"  # no field may hold "<>"
        _, raw = next(valid_fixtures())
        base = json.loads(raw)
        for field in ("tenant", "store", "key", "sha256", "type", "created", "inline", "sig", "size", "v"):
            doc = dict(base)
            doc[field] = marker
            with self.subTest(field):
                try:
                    ticket.check_ticket(json.dumps(doc))
                except ticket.TicketError as e:
                    self.assertNotIn("MARKER", str(e))
                else:
                    self.fail(f"{field}={marker!r} accepted")

    def test_larger_than_any_ticket(self):
        doc = b'{"v":1,"pad":"' + b"x" * ticket.MAX_ENCODED_TICKET_BYTES + b'"}'
        with self.assertRaisesRegex(ticket.TicketError, "larger than any ticket"):
            ticket.check_ticket(doc)

    def test_nan_is_not_json(self):
        with self.assertRaises(ticket.TicketError):
            ticket.check_ticket('{"v":1,"size":NaN}')


class Validator(unittest.TestCase):
    def test_unknown_keyword_is_refused(self):
        with self.assertRaises(ticket.SchemaError):
            ticket.validate({}, {"type": "object", "patternProperties": {}})

    def test_dollar_is_the_end_of_the_text(self):
        # Python's '$' matches before a final newline; JSON Schema's does not.
        self.assertNotEqual(ticket.validate("acme\n", {"pattern": "^[a-z]+$"}), [])
        self.assertEqual(ticket.validate("acme", {"pattern": "^[a-z]+$"}), [])

    def test_booleans_are_not_numbers(self):
        self.assertNotEqual(ticket.validate(True, {"const": 1}), [])
        self.assertNotEqual(ticket.validate(True, {"type": "integer"}), [])
        self.assertEqual(ticket.validate(1.0, {"type": "integer", "const": 1}), [])


if __name__ == "__main__":
    unittest.main()
