"""Parse and check claimcheck tickets against docs/ticket.schema.json.

A ticket is the small JSON document a queue carries instead of the payload
(docs/ticket.md). check_ticket parses one and checks it against the JSON
Schema kept next to docs/ticket.md, then against the rules the schema cannot
state (the key under its own tenant's prefix, the inline payload's length,
the calendar date, the 6 MiB document limit), as claimcheck.ParseTicket does.

The validator implements only the part of JSON Schema 2020-12 that the
ticket schema uses (listed in KEYWORDS); a schema with any other keyword is
refused with SchemaError rather than half checked. Error messages name the
field and the rule, never the field's value: an inline ticket carries
payload bytes.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

__all__ = [
    "MAX_ENCODED_TICKET_BYTES",
    "SchemaError",
    "TicketError",
    "check_ticket",
    "load_schema",
    "validate",
]

# claimcheck.MaxEncodedTicketBytes (ticket.go): the largest document a
# reader parses, in bytes.
MAX_ENCODED_TICKET_BYTES = 6 << 20

# The schema beside docs/ticket.md, found from this file in a checkout of
# the repository; CLAIMCHECK_TICKET_SCHEMA names another copy.
_REPO_SCHEMA = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs", "ticket.schema.json"
)

# Keywords the validator understands. Annotations are read and ignored.
ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "title", "description", "format", "examples", "default"}
)
KEYWORDS = ANNOTATIONS | frozenset(
    {
        "$defs", "$ref", "type", "const", "enum", "minimum", "maximum",
        "minLength", "maxLength", "pattern", "required", "properties",
        "dependentRequired", "not", "anyOf", "allOf", "if", "then", "else",
    }
)


class TicketError(ValueError):
    """The document is not a valid ticket. str() names the field and the
    rule broken, never a value."""


class SchemaError(ValueError):
    """The schema uses a keyword this validator does not implement, or is
    malformed."""


def load_schema(path: str | None = None) -> dict:
    """Load the ticket schema: path, else $CLAIMCHECK_TICKET_SCHEMA, else
    docs/ticket.schema.json of the repository this file is in."""
    path = path or os.environ.get("CLAIMCHECK_TICKET_SCHEMA") or _REPO_SCHEMA
    with open(path, "rb") as f:
        return json.load(f)


_cached_schema: dict | None = None


def _default_schema() -> dict:
    global _cached_schema
    if _cached_schema is None:
        _cached_schema = load_schema()
    return _cached_schema


def _pattern(p: str) -> re.Pattern:
    # JSON Schema patterns are ECMA-262 regular expressions; the ticket
    # schema's are plain enough to mean the same in Python, except that
    # Python's '$' also matches before a final newline: '\Z' does not.
    if p.endswith("$") and not p.endswith("\\$"):
        p = p[:-1] + r"\Z"
    return re.compile(p)


_patterns: dict[str, re.Pattern] = {}


def _is_integer(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())


_TYPES = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "integer": _is_integer,
    "number": lambda x: not isinstance(x, bool) and isinstance(x, (int, float)),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
}


def _json_equal(a: Any, b: Any) -> bool:
    if _TYPES["number"](a) and _TYPES["number"](b):
        return a == b  # 1 and 1.0 are the same JSON number
    return type(a) is type(b) and a == b  # True is not 1


def _resolve(root: dict, ref: str) -> dict:
    if not ref.startswith("#"):
        raise SchemaError(f"$ref {ref!r}: only references within the schema are supported")
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise SchemaError(f"$ref {ref!r} does not resolve")
        node = node[part]
    return node


def validate(instance: Any, schema: dict | None = None) -> list[str]:
    """Check a parsed JSON value against schema (default: the ticket
    schema) and return the errors found, each "at /field: rule"; empty
    when valid. Raises SchemaError for a schema outside the subset."""
    root = schema if schema is not None else _default_schema()
    errors: list[str] = []
    _check(instance, root, root, "", errors)
    return errors


def _check(x: Any, s: Any, root: dict, at: str, errors: list[str]) -> None:
    if s is True:
        return
    if s is False:
        errors.append(f"at {at or '/'}: no value is allowed")
        return
    if not isinstance(s, dict):
        raise SchemaError(f"schema at {at or '/'} is not an object")
    unknown = set(s) - KEYWORDS
    if unknown:
        raise SchemaError(f"schema keywords not implemented: {sorted(unknown)}")
    where = at or "/"

    def fail(rule: str) -> None:
        errors.append(f"at {where}: {rule}")

    if "$ref" in s:
        _check(x, _resolve(root, s["$ref"]), root, at, errors)
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        if not any(_TYPES[t](x) for t in types):
            fail(f"must be of type {'/'.join(types)}")
            return
    if "const" in s and not _json_equal(x, s["const"]):
        fail(f"must be {json.dumps(s['const'])}")
    if "enum" in s and not any(_json_equal(x, e) for e in s["enum"]):
        fail("is not one of the allowed values")
    if _TYPES["number"](x):
        if "minimum" in s and x < s["minimum"]:
            fail(f"must be at least {s['minimum']}")
        if "maximum" in s and x > s["maximum"]:
            fail(f"must be at most {s['maximum']}")
    if isinstance(x, str):
        # Lengths count code points, as JSON Schema does.
        if "minLength" in s and len(x) < s["minLength"]:
            fail(f"must be at least {s['minLength']} characters")
        if "maxLength" in s and len(x) > s["maxLength"]:
            fail(f"must be at most {s['maxLength']} characters")
        if "pattern" in s:
            p = _patterns.get(s["pattern"])
            if p is None:
                p = _patterns[s["pattern"]] = _pattern(s["pattern"])
            if not p.search(x):
                fail("does not match its pattern")
    if isinstance(x, dict):
        for name in s.get("required", []):
            if name not in x:
                fail(f"lacks the required field {name!r}")
        for name, sub in s.get("properties", {}).items():
            if name in x:
                _check(x[name], sub, root, f"{at}/{name}", errors)
        for name, needs in s.get("dependentRequired", {}).items():
            if name in x:
                for n in needs:
                    if n not in x:
                        fail(f"has {name!r} but not {n!r}")
    if "allOf" in s:
        for sub in s["allOf"]:
            _check(x, sub, root, at, errors)
    if "anyOf" in s:
        if not any(not _errors(x, sub, root, at) for sub in s["anyOf"]):
            fail("matches none of the allowed forms")
    if "not" in s and not _errors(x, s["not"], root, at):
        fail(_describe_not(s["not"]))
    if "if" in s:
        branch = "then" if not _errors(x, s["if"], root, at) else "else"
        if branch in s:
            _check(x, s[branch], root, at, errors)


def _errors(x: Any, s: Any, root: dict, at: str) -> list[str]:
    out: list[str] = []
    _check(x, s, root, at, out)
    return out


def _describe_not(s: Any) -> str:
    if isinstance(s, dict):
        if list(s) == ["required"]:
            return f"must not have {', '.join(map(repr, s['required']))}"
        if "anyOf" in s and all(isinstance(a, dict) and list(a) == ["required"] for a in s["anyOf"]):
            names = [n for a in s["anyOf"] for n in a["required"]]
            return f"must have none of {', '.join(map(repr, names))}"
    return "matches a form that is not allowed"


def _reject_constant(name: str) -> Any:
    raise TicketError(f"malformed JSON: {name} is not a JSON number")


def check_ticket(ticket: bytes | str | dict, schema: dict | None = None) -> dict:
    """Parse a ticket (its encoded bytes or text, or an already decoded
    object) and check it: one JSON object, at most MAX_ENCODED_TICKET_BYTES
    bytes, no trailing data; valid against the ticket schema (default
    docs/ticket.schema.json); key under its own tenant's prefix; inline
    bytes of the right length; a real calendar date. Returns the decoded
    ticket; raises TicketError naming the first problem found."""
    if isinstance(ticket, (bytes, bytearray, str)):
        raw = ticket.encode() if isinstance(ticket, str) else bytes(ticket)
        if len(raw) > MAX_ENCODED_TICKET_BYTES:
            raise TicketError(
                f"ticket of {len(raw)} bytes is larger than any ticket ({MAX_ENCODED_TICKET_BYTES})"
            )
        try:
            doc = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError as e:
            raise TicketError(f"not UTF-8 at byte {e.start}") from None
        except json.JSONDecodeError as e:
            raise TicketError(f"malformed JSON at byte {e.pos}: {e.msg}") from None
    else:
        doc = ticket
    errors = validate(doc, schema)
    if errors:
        raise TicketError("ticket: " + "; ".join(errors))
    _check_beyond_schema(doc)
    return doc


def key_id(ticket: dict) -> str | None:
    """The id of the key-encryption key that sealed an inline payload (the
    ticket's "kid", docs/ticket.md), such as "local-3f303a29d311937f"; None
    for a plain or offloaded payload, or a ticket sealed before key ids
    were written. ticket is a checked ticket (check_ticket) or a ticket
    summary of the HTTP API."""
    kid = ticket.get("kid")
    return kid if isinstance(kid, str) and kid else None


def _check_beyond_schema(t: dict) -> None:
    """The rules of docs/ticket.md that JSON Schema cannot express."""
    if "key" in t:
        tenant = t["tenant"]
        if not (t["key"].startswith(f"payloads/{tenant}/") or t["key"].startswith(f"results/{tenant}/")):
            raise TicketError("ticket: at /key: not under its tenant's prefix")
    else:
        inline = t.get("inline", "")
        n = len(inline) // 4 * 3 - (len(inline) - len(inline.rstrip("=")))
        if "dek" in t:
            if n <= t["size"]:
                raise TicketError("ticket: at /inline: encrypted inline payload is not longer than its plaintext")
        elif n != t["size"]:
            raise TicketError(f"ticket: at /inline: inline payload is {n} bytes, size says {t['size']}")
    c = t["created"]
    year, month, day = int(c[0:4]), int(c[5:7]), int(c[8:10])
    if day > _days_in(year, month):
        raise TicketError("ticket: at /created: not a calendar date")


def _days_in(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31
