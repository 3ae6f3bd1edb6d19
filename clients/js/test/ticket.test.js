// The ticket check against the fixtures the Go test also reads:
// testdata/tickets/valid/*.json (real tickets made by the Go code) and
// testdata/tickets/invalid.json (every case refused).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { checkTicket, keyId, validate, TicketError, SchemaError, MAX_ENCODED_TICKET_BYTES } from '../ticket.js';

const TICKETS = fileURLToPath(new URL('../../../testdata/tickets/', import.meta.url));

function validFixtures() {
  const names = readdirSync(TICKETS + 'valid').filter((n) => n.endsWith('.json')).sort();
  assert.ok(names.length > 0, `no valid ticket fixtures under ${TICKETS}valid`);
  return names.map((n) => [n, readFileSync(TICKETS + 'valid/' + n)]);
}

const invalidCases = () => JSON.parse(readFileSync(TICKETS + 'invalid.json', 'utf8')).cases;

test('real tickets pass', () => {
  for (const [name, raw] of validFixtures()) {
    const doc = checkTicket(raw);
    assert.equal(doc.v, 1, name);
    assert.deepEqual(validate(JSON.parse(raw)), [], name);
  }
});

test('sealed inline tickets name their key', () => {
  // Plain, offloaded and old sealed tickets (written before "kid") have none.
  const fixtures = new Map(validFixtures());
  for (const name of ['inline-encrypted.json', 'inline-empty-encrypted.json']) {
    assert.match(keyId(checkTicket(fixtures.get(name))) ?? '', /^local-[0-9a-f]{16}$/, name);
  }
  for (const name of ['inline-signed.json', 'offloaded-encrypted.json', 'corpus-bash.json']) {
    assert.equal(keyId(checkTicket(fixtures.get(name))), null, name);
  }
  const old = checkTicket(readFileSync(new URL('../../../testdata/seal/inline-streaming.json', import.meta.url), 'utf8'));
  assert.ok('dek' in old);
  assert.equal(keyId(old), null);
});

test('unknown fields are accepted', () => {
  for (const [name, raw] of validFixtures()) {
    const doc = { ...JSON.parse(raw), priority: 7, trace: { id: 'abc', spans: [1, 2, 3] } };
    assert.doesNotThrow(() => checkTicket(JSON.stringify(doc)), name);
  }
});

test('every invalid case is refused', () => {
  const cases = invalidCases();
  assert.ok(cases.length > 40);
  for (const c of cases) {
    assert.throws(() => checkTicket(c.ticket), TicketError, c.name);
  }
});

test('each case is refused by the check it names', () => {
  for (const c of invalidCases()) {
    if (c.refused_by === 'json') {
      assert.throws(() => JSON.parse(c.ticket), SyntaxError, c.name);
      continue;
    }
    const errors = validate(JSON.parse(c.ticket));
    if (c.refused_by === 'schema' || c.refused_by === 'schema-only') {
      assert.notDeepEqual(errors, [], `${c.name}: the schema accepts it`);
    } else if (c.refused_by === 'beyond') {
      assert.deepEqual(errors, [], `${c.name}: the schema refuses it; the case says it cannot`);
    } else {
      assert.fail(`${c.name}: unknown refused_by ${c.refused_by}`);
    }
  }
});

test('errors never contain values', () => {
  const marker = 'PAYLOAD-MARKER-9d1c7e <>'; // no field may hold "<>"
  const base = JSON.parse(validFixtures()[0][1]);
  for (const field of ['tenant', 'store', 'key', 'sha256', 'type', 'created', 'inline', 'sig', 'size', 'v']) {
    let err;
    try {
      checkTicket(JSON.stringify({ ...base, [field]: marker }));
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof TicketError, `${field}: accepted`);
    assert.ok(!err.message.includes('MARKER'), `${field}: ${err.message}`);
  }
  // Nor does a JSON syntax error quote the text.
  assert.throws(() => checkTicket('{"v":1,' + 'PAYLOAD-MARKER-9d1c7e}'), (e) => !e.message.includes('MARKER'));
});

test('larger than any ticket', () => {
  const doc = '{"v":1,"pad":"' + 'x'.repeat(MAX_ENCODED_TICKET_BYTES) + '"}';
  assert.throws(() => checkTicket(doc), /larger than any ticket/);
});

test('validator refuses keywords it does not implement', () => {
  assert.throws(() => validate({}, { type: 'object', patternProperties: {} }), SchemaError);
});

test('lengths count code points', () => {
  assert.deepEqual(validate('😀', { maxLength: 1 }), []);
  assert.notDeepEqual(validate('😀😀', { maxLength: 1 }), []);
});
