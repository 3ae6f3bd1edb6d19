// Parse and check claimcheck tickets against docs/ticket.schema.json.
//
// A ticket is the small JSON document a queue carries instead of the
// payload (docs/ticket.md). checkTicket parses one and checks it against the
// JSON Schema kept next to docs/ticket.md, then against the rules the schema
// cannot state (the key under its own tenant's prefix, the inline payload's
// length, the calendar date, the 6 MiB document limit), as
// claimcheck.ParseTicket does.
//
// The validator implements only the part of JSON Schema 2020-12 that the
// ticket schema uses (KEYWORDS); a schema with any other keyword is refused
// with SchemaError rather than half checked. Error messages name the field
// and the rule, never the field's value: an inline ticket carries payload
// bytes.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// claimcheck.MaxEncodedTicketBytes (ticket.go): the largest document a
// reader parses, in bytes.
export const MAX_ENCODED_TICKET_BYTES = 6 << 20;

// The schema beside docs/ticket.md, found from this file in a checkout of
// the repository; CLAIMCHECK_TICKET_SCHEMA names another copy.
const REPO_SCHEMA = fileURLToPath(new URL('../../docs/ticket.schema.json', import.meta.url));

const ANNOTATIONS = ['$schema', '$id', '$comment', 'title', 'description', 'format', 'examples', 'default'];
export const KEYWORDS = new Set([
  ...ANNOTATIONS,
  '$defs', '$ref', 'type', 'const', 'enum', 'minimum', 'maximum',
  'minLength', 'maxLength', 'pattern', 'required', 'properties',
  'dependentRequired', 'not', 'anyOf', 'allOf', 'if', 'then', 'else',
]);

/** The document is not a valid ticket; the message names the field and the rule, never a value. */
export class TicketError extends Error {
  constructor(message) {
    super(message);
    this.name = 'TicketError';
  }
}

/** The schema uses a keyword this validator does not implement, or is malformed. */
export class SchemaError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SchemaError';
  }
}

/** Load the ticket schema: path, else $CLAIMCHECK_TICKET_SCHEMA, else the repository's docs/ticket.schema.json. */
export function loadSchema(path) {
  return JSON.parse(readFileSync(path || process.env.CLAIMCHECK_TICKET_SCHEMA || REPO_SCHEMA, 'utf8'));
}

let cachedSchema;
function defaultSchema() {
  cachedSchema ??= loadSchema();
  return cachedSchema;
}

const isNumber = (x) => typeof x === 'number' && Number.isFinite(x);
const TYPES = {
  object: (x) => x !== null && typeof x === 'object' && !Array.isArray(x),
  array: (x) => Array.isArray(x),
  string: (x) => typeof x === 'string',
  integer: (x) => isNumber(x) && Number.isInteger(x),
  number: isNumber,
  boolean: (x) => typeof x === 'boolean',
  null: (x) => x === null,
};

function jsonEqual(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

// Lengths count code points, as JSON Schema does, not UTF-16 units.
function codePoints(s) {
  const surrogatePairs = s.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g);
  return s.length - (surrogatePairs ? surrogatePairs.length : 0);
}

const patterns = new Map();
function pattern(p) {
  let re = patterns.get(p);
  if (!re) {
    re = new RegExp(p, 'u');
    patterns.set(p, re);
  }
  return re;
}

function resolve(root, ref) {
  if (!ref.startsWith('#')) throw new SchemaError(`$ref ${ref}: only references within the schema are supported`);
  let node = root;
  for (const raw of ref.slice(1).split('/').slice(1)) {
    const part = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (!TYPES.object(node) || !(part in node)) throw new SchemaError(`$ref ${ref} does not resolve`);
    node = node[part];
  }
  return node;
}

/**
 * Check a parsed JSON value against schema (default: the ticket schema).
 * Returns the errors found, each "at /field: rule"; empty when valid.
 * Throws SchemaError for a schema outside the subset.
 */
export function validate(instance, schema) {
  const root = schema ?? defaultSchema();
  const errors = [];
  check(instance, root, root, '', errors);
  return errors;
}

function errorsOf(x, s, root, at) {
  const out = [];
  check(x, s, root, at, out);
  return out;
}

const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);

function check(x, s, root, at, errors) {
  const where = at || '/';
  if (s === true) return;
  if (s === false) {
    errors.push(`at ${where}: no value is allowed`);
    return;
  }
  if (!TYPES.object(s)) throw new SchemaError(`schema at ${where} is not an object`);
  const unknown = Object.keys(s).filter((k) => !KEYWORDS.has(k));
  if (unknown.length) throw new SchemaError(`schema keywords not implemented: ${unknown.sort().join(', ')}`);
  const fail = (rule) => errors.push(`at ${where}: ${rule}`);

  if (has(s, '$ref')) check(x, resolve(root, s.$ref), root, at, errors);
  if (has(s, 'type')) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((t) => TYPES[t](x))) {
      fail(`must be of type ${types.join('/')}`);
      return;
    }
  }
  if (has(s, 'const') && !jsonEqual(x, s.const)) fail(`must be ${JSON.stringify(s.const)}`);
  if (has(s, 'enum') && !s.enum.some((e) => jsonEqual(x, e))) fail('is not one of the allowed values');
  if (isNumber(x)) {
    if (has(s, 'minimum') && x < s.minimum) fail(`must be at least ${s.minimum}`);
    if (has(s, 'maximum') && x > s.maximum) fail(`must be at most ${s.maximum}`);
  }
  if (typeof x === 'string') {
    if (has(s, 'minLength') && codePoints(x) < s.minLength) fail(`must be at least ${s.minLength} characters`);
    if (has(s, 'maxLength') && codePoints(x) > s.maxLength) fail(`must be at most ${s.maxLength} characters`);
    if (has(s, 'pattern') && !pattern(s.pattern).test(x)) fail('does not match its pattern');
  }
  if (TYPES.object(x)) {
    for (const name of s.required ?? []) if (!has(x, name)) fail(`lacks the required field '${name}'`);
    for (const [name, sub] of Object.entries(s.properties ?? {})) {
      if (has(x, name)) check(x[name], sub, root, `${at}/${name}`, errors);
    }
    for (const [name, needs] of Object.entries(s.dependentRequired ?? {})) {
      if (!has(x, name)) continue;
      for (const n of needs) if (!has(x, n)) fail(`has '${name}' but not '${n}'`);
    }
  }
  for (const sub of s.allOf ?? []) check(x, sub, root, at, errors);
  if (has(s, 'anyOf') && !s.anyOf.some((sub) => errorsOf(x, sub, root, at).length === 0)) {
    fail('matches none of the allowed forms');
  }
  if (has(s, 'not') && errorsOf(x, s.not, root, at).length === 0) fail(describeNot(s.not));
  if (has(s, 'if')) {
    const branch = errorsOf(x, s.if, root, at).length === 0 ? 'then' : 'else';
    if (has(s, branch)) check(x, s[branch], root, at, errors);
  }
}

function describeNot(s) {
  const onlyRequired = (a) => TYPES.object(a) && Object.keys(a).length === 1 && has(a, 'required');
  if (onlyRequired(s)) return `must not have ${s.required.map((n) => `'${n}'`).join(', ')}`;
  if (TYPES.object(s) && Array.isArray(s.anyOf) && s.anyOf.every(onlyRequired)) {
    return `must have none of ${s.anyOf.flatMap((a) => a.required).map((n) => `'${n}'`).join(', ')}`;
  }
  return 'matches a form that is not allowed';
}

/**
 * Parse a ticket (its encoded bytes, its text, or an already decoded
 * object) and check it: one JSON object of at most MAX_ENCODED_TICKET_BYTES
 * bytes, no trailing data; valid against the ticket schema (default
 * docs/ticket.schema.json); key under its own tenant's prefix; inline bytes
 * of the right length; a real calendar date. Returns the decoded ticket;
 * throws TicketError naming the first problem found.
 */
export function checkTicket(ticket, schema) {
  let doc = ticket;
  if (typeof ticket === 'string' || ticket instanceof Uint8Array) {
    const size = typeof ticket === 'string' ? Buffer.byteLength(ticket, 'utf8') : ticket.byteLength;
    if (size > MAX_ENCODED_TICKET_BYTES) {
      throw new TicketError(`ticket of ${size} bytes is larger than any ticket (${MAX_ENCODED_TICKET_BYTES})`);
    }
    let text = ticket;
    if (typeof ticket !== 'string') {
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(ticket);
      } catch {
        throw new TicketError('ticket is not UTF-8');
      }
    }
    try {
      doc = JSON.parse(text);
    } catch (e) {
      // V8's message quotes the text near the error: keep only the position.
      const at = /position (\d+)/.exec(e.message);
      throw new TicketError(`malformed JSON${at ? ` at byte ${at[1]}` : ''}`);
    }
  }
  const errors = validate(doc, schema);
  if (errors.length) throw new TicketError(`ticket: ${errors.join('; ')}`);
  checkBeyondSchema(doc);
  return doc;
}

/**
 * The id of the key-encryption key that sealed an inline payload (the
 * ticket's "kid", docs/ticket.md), such as "local-3f303a29d311937f"; null
 * for a plain or offloaded payload, or a ticket sealed before key ids were
 * written. ticket is a checked ticket (checkTicket) or a ticket summary of
 * the HTTP API.
 */
export function keyId(ticket) {
  return typeof ticket.kid === 'string' && ticket.kid !== '' ? ticket.kid : null;
}

// The rules of docs/ticket.md that JSON Schema cannot express.
function checkBeyondSchema(t) {
  if (has(t, 'key')) {
    if (!t.key.startsWith(`payloads/${t.tenant}/`) && !t.key.startsWith(`results/${t.tenant}/`)) {
      throw new TicketError("ticket: at /key: not under its tenant's prefix");
    }
  } else {
    const inline = t.inline ?? '';
    const n = (inline.length / 4) * 3 - (inline.endsWith('==') ? 2 : inline.endsWith('=') ? 1 : 0);
    if (has(t, 'dek')) {
      if (n <= t.size) throw new TicketError('ticket: at /inline: encrypted inline payload is not longer than its plaintext');
    } else if (n !== t.size) {
      throw new TicketError(`ticket: at /inline: inline payload is ${n} bytes, size says ${t.size}`);
    }
  }
  const year = Number(t.created.slice(0, 4));
  const month = Number(t.created.slice(5, 7));
  const day = Number(t.created.slice(8, 10));
  if (day > daysIn(year, month)) throw new TicketError('ticket: at /created: not a calendar date');
}

function daysIn(year, month) {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}
