"""claimcheck client for Python 3.11+, standard library only.

check_ticket checks a ticket against docs/ticket.schema.json and the rules
of docs/ticket.md.
"""

from .ticket import MAX_ENCODED_TICKET_BYTES, SchemaError, TicketError, check_ticket, load_schema, validate

__all__ = ["MAX_ENCODED_TICKET_BYTES", "SchemaError", "TicketError", "check_ticket", "load_schema", "validate"]
