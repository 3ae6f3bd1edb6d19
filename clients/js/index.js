// claimcheck client for Node.js 20+, with no dependencies.
//
// checkTicket checks a ticket against docs/ticket.schema.json and the
// rules of docs/ticket.md.

export { MAX_ENCODED_TICKET_BYTES, SchemaError, TicketError, checkTicket, loadSchema, validate } from './ticket.js';
