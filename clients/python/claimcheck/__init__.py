"""claimcheck client for Python 3.11+, standard library only.

Client speaks the HTTP API of `claimcheck serve` (docs/openapi.yaml):
submit a file (streamed, its SHA-256 sent as Content-Digest), poll a job,
fetch its result (streamed and verified), and work jobs over the worker
endpoints (Client.work: claim with a long poll, stream the verified
payload, extend the lease while the handler runs, complete with a
streamed result or fail permanently or transiently). check_ticket checks
a ticket against docs/ticket.schema.json and the rules of docs/ticket.md.
"""

from .api import APIError, Claim, Client, PayloadCorruptError, Permanent, Result, VerifyingReader
from .digest import content_digest, file_sha256, parse_content_digest
from .ticket import MAX_ENCODED_TICKET_BYTES, SchemaError, TicketError, check_ticket, key_id, load_schema, validate

__all__ = [
    "APIError",
    "Claim",
    "Client",
    "MAX_ENCODED_TICKET_BYTES",
    "PayloadCorruptError",
    "Permanent",
    "Result",
    "SchemaError",
    "TicketError",
    "VerifyingReader",
    "check_ticket",
    "content_digest",
    "file_sha256",
    "key_id",
    "load_schema",
    "parse_content_digest",
    "validate",
]
