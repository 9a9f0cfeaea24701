'use strict';
// The store's records read back (effects, receipts, events, the chain, inclusion and
// consistency proofs, checkpoints), a page at a time by the library's own defaults, and a
// human's resolution of an AMBIGUOUS effect. These are the bodies of the Warden methods of the
// same names, given the store's native handle.

const json = require('./json');
const { invoke, DEFAULTS } = require('./native');
const { requireString, optionalString, optionalCount, requireCount } = require('./checks');

async function resolve(handle, key, to, { by, attempt } = {}) {
  requireString('the effect key', key);
  if (to !== 'committed' && to !== 'failed') throw new TypeError('resolve(key, to): to is "committed" or "failed"');
  requireString('by', by);
  if (attempt !== undefined && !(Number.isInteger(attempt) && attempt >= 1 && attempt <= 0xffffffff)) {
    throw new TypeError(`resolve(key, to, {attempt}): an attempt number, 1 or more; got ${String(attempt)}`);
  }
  return json.parse(await invoke(() => handle.effectResolve(key, to, by, attempt)));
}

async function effects(handle, { state, limit } = {}) {
  optionalString('state', state);
  const count = optionalCount('limit', limit, DEFAULTS.list_limit);
  return json.parse(await invoke(() => handle.effectsList(state ?? undefined, count)));
}

async function effect(handle, key) {
  requireString('the effect key', key);
  return json.parse(await invoke(() => handle.effectGet(key)));
}

async function receipts(handle, { fromSeq, limit } = {}) {
  const from = optionalCount('fromSeq', fromSeq, DEFAULTS.from_seq);
  const count = optionalCount('limit', limit, DEFAULTS.list_limit);
  return json.parse(await invoke(() => handle.receiptsList(from, count)));
}

async function verifyChain(handle) {
  return json.parse(await invoke(() => handle.chainVerify()));
}

async function events(handle, { after, limit } = {}) {
  const from = optionalCount('after', after, DEFAULTS.after_id);
  const count = optionalCount('limit', limit, DEFAULTS.list_limit);
  return json.parse(await invoke(() => handle.eventsList(from, count)));
}

async function proofInclusion(handle, receiptId, { checkpoint } = {}) {
  requireString('the receipt id', receiptId);
  const number = optionalCount('checkpoint', checkpoint, 0);
  return json.parse(await invoke(() => handle.proofInclusion(receiptId, number)));
}

async function proofConsistency(handle, oldCheckpoint, newCheckpoint) {
  const older = requireCount('oldCheckpoint', oldCheckpoint);
  const newer = requireCount('newCheckpoint', newCheckpoint);
  return json.parse(await invoke(() => handle.proofConsistency(older, newer)));
}

async function checkpoints(handle, { from, limit } = {}) {
  const first = optionalCount('from', from, 0);
  const count = optionalCount('limit', limit, DEFAULTS.list_limit);
  return json.parse(await invoke(() => handle.checkpoints(first, count)));
}

module.exports = { resolve, effects, effect, receipts, verifyChain, events, proofInclusion, proofConsistency, checkpoints };
