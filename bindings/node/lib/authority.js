'use strict';
// Authority: delegating part of a grant to another agent, and revoking delegations one by one
// or by sweep. These are the bodies of the Warden methods of the same names, given the store's
// native handle; the library judges containment.

const json = require('./json');
const { invoke, dumps } = require('./native');
const { requireString } = require('./checks');

function principalOf(what, value) {
  if (value === null || typeof value !== 'object' || typeof value.agent !== 'string') {
    throw new TypeError(`${what} must be {agent, user}`);
  }
  return { agent: value.agent, user: value.user ?? null };
}

// Who revokes, as the one-line name the store records: "agent" or "agent/user".
function revokerOf(by) {
  if (by === undefined || by === null) return null;
  if (typeof by === 'string') return by;
  const principal = principalOf('by', by);
  return principal.user === null ? principal.agent : `${principal.agent}/${principal.user}`;
}

async function delegate(handle, parentId, grant, { by, byExpiresAtMs, via = 'api' } = {}) {
  requireString('the parent id', parentId);
  if (grant === null || typeof grant !== 'object' || Array.isArray(grant)) {
    throw new TypeError('delegate(parentId, grant): grant must be an object');
  }
  const request = {
    parent_id: parentId,
    grant,
    by: principalOf('by', by),
    by_expires_at_ms: byExpiresAtMs ?? null,
    via,
  };
  const created = json.parse(await invoke(() => handle.delegate(dumps(request, 'the delegation'))));
  return created.delegation_id;
}

async function revoke(handle, id, { by } = {}) {
  requireString('the delegation id', id);
  const revoker = revokerOf(by);
  const answer = json.parse(await invoke(() => handle.revoke(id, revoker ?? undefined)));
  return answer.revoked;
}

async function revokeSweep(handle, { createdBy, under, by } = {}) {
  const request = { by: revokerOf(by) };
  if (createdBy !== undefined) request.created_by = principalOf('createdBy', createdBy);
  if (under !== undefined) request.under = requireString('under', under);
  return json.parse(await invoke(() => handle.revokeSweep(dumps(request, 'the sweep'))));
}

async function delegations(handle) {
  return json.parse(await invoke(() => handle.delegations()));
}

module.exports = { delegate, revoke, revokeSweep, delegations };
