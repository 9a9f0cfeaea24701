'use strict';
// The binding's result-code tables are checked against the library's own list,
// src/ffi/result.rs: every code there has its exception class and default reason here, the
// library names each code as the table does, and the addon's constants agree.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const warden = require('..');
const errors = require('../lib/errors');

const repo = path.resolve(__dirname, '..', '..', '..');

function codesInResultRs() {
  const text = fs.readFileSync(path.join(repo, 'src', 'ffi', 'result.rs'), 'utf8');
  const codes = new Map();
  for (const [, name, number] of text.matchAll(/pub const (WARDEN_RESULT_\w+): warden_result = (\d+);/g)) {
    codes.set(name, Number(number));
  }
  assert.ok(codes.size >= 20, 'src/ffi/result.rs no longer reads as expected; update this test');
  return codes;
}

test('every code of result.rs but OK has its class and default reason, and nothing else does', () => {
  const names = [...codesInResultRs().keys()].filter((name) => name !== 'WARDEN_RESULT_OK').sort();
  assert.deepEqual(Object.keys(errors.BY_CODE).sort(), names);
  assert.deepEqual(Object.keys(errors.DEFAULT_REASONS).sort(), names);
});

test('the library names every code of result.rs as the table does', () => {
  const native = require('../native/warden.node');
  for (const [name, number] of codesInResultRs()) assert.equal(native.resultName(number), name);
});

test('the addon constants have the numbers of result.rs', () => {
  const codes = codesInResultRs();
  const ffi = fs.readFileSync(path.join(__dirname, '..', 'src', 'ffi.rs'), 'utf8');
  const constants = [...ffi.matchAll(/pub const (WARDEN_RESULT_\w+): WardenResult = (\d+);/g)];
  assert.ok(constants.length > 0);
  for (const [, name, number] of constants) assert.equal(codes.get(name), Number(number), name);
  assert.ok(warden.WardenError);
});
