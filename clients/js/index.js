// claimcheck client for Node.js 20+, with no dependencies.
//
// Client speaks the HTTP API of `claimcheck serve` (docs/openapi.yaml):
// submit a file (streamed, its SHA-256 sent as Content-Digest), poll a
// job, fetch its result (streamed and verified), and work jobs over the
// worker endpoints (Client.work: claim with a long poll, stream the
// verified payload, extend the lease while the handler runs, complete with
// a streamed result or fail permanently or transiently). checkTicket checks
// a ticket against docs/ticket.schema.json and the rules of docs/ticket.md.

export { APIError, Claim, Client, FINAL_STATES, PayloadCorruptError, Permanent, Verifier } from './api.js';
export { CHUNK, contentDigest, fileSha256, parseContentDigest } from './digest.js';
export { MAX_ENCODED_TICKET_BYTES, SchemaError, TicketError, checkTicket, keyId, loadSchema, validate } from './ticket.js';
