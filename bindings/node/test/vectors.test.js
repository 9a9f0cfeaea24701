'use strict';
// The shared action-hash vectors computed by ctrlrun 0.12.2: the same rows run in the Rust,
// C and Python suites. Arguments go through the BigInt-aware parser, so the 64- and 80-bit
// integers in them reach the library with every digit.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const warden = require('..');

// Beside the repository, where the Rust suite reads them too.
const VECTORS = path.resolve(__dirname, '../../../tests/vectors/ctrlrun-0.12.2/actions.json');

test('actionHash matches ctrlrun on the first 20 shared vectors', () => {
  assert.ok(fs.existsSync(VECTORS), `the reference vectors are in the repository: ${VECTORS}`);
  const rows = JSON.parse(fs.readFileSync(VECTORS, 'utf8')).slice(0, 20);
  assert.equal(rows.length, 20);
  for (const [i, row] of rows.entries()) {
    const action = {
      name: row.name,
      arguments: warden.parseJson(row.arguments_json),
      principal: row.principal,
      resource: row.resource,
      environment: row.environment,
    };
    assert.equal(warden.actionHash(action), row.action_hash, `row ${i}: ${row.name}`);
    const canonical = warden.canonical({ ...action, schema: 'ctrlrun.action/v1' });
    assert.equal(canonical, row.canonical, `row ${i}: canonical text`);
  }
});
