'use strict';
// Approvals: a person grants or denies a request (asserted, or verified by your identity
// provider), grants it scoped to the next covered proposals, or waits for an answer; a hook
// hears of each new request. These are the bodies of the Warden methods of the same names,
// given the store's native handle; the library checks every rule.

const json = require('./json');
const { invoke, invokeSync, dumps } = require('./native');
const { requireString, optionalString, optionalCount } = require('./checks');

async function approve(handle, id, { by, ttlMs, agent, verified } = {}) {
  requireString('the approval id', id);
  requireString('by', by);
  if (agent === undefined && verified === undefined) {
    const ttl = optionalCount('ttlMs', ttlMs, 0);
    return json.parse(await invoke(() => handle.approvalGrant(id, by, ttl)));
  }
  const ttl = optionalCount('ttlMs', ttlMs, null);
  return sendAnswer(handle, id, 'grant', { by, agent, verified, ttlMs: ttl });
}

async function deny(handle, id, { by, reason, agent, verified } = {}) {
  requireString('the approval id', id);
  requireString('by', by);
  optionalString('reason', reason);
  if (agent === undefined && verified === undefined) {
    return json.parse(await invoke(() => handle.approvalDeny(id, by, reason ?? undefined)));
  }
  return sendAnswer(handle, id, 'deny', { by, agent, verified, note: reason ?? null });
}

async function sendAnswer(handle, id, decision, { by, agent, verified, ttlMs = null, note = null }) {
  optionalString('agent', agent);
  // Without `agent`, the library parses `by` (approval::person::parse_name): one rule, one place.
  const approver = agent === undefined || agent === null ? by : { agent, user: by };
  const answer = {
    approval_id: id,
    decision,
    approver,
    verified: verified ?? null,
    ttl_ms: ttlMs,
    note,
  };
  const text = dumps(answer, 'the answer');
  return json.parse(await invoke(() => handle.approvalAnswer(text)));
}

async function approveScoped(handle, id, { by, scope, agent, verified, actionHash } = {}) {
  requireString('the approval id', id);
  requireString('by', by);
  optionalString('agent', agent);
  optionalString('actionHash', actionHash);
  if (scope === null || typeof scope !== 'object' || Array.isArray(scope)) {
    throw new TypeError('approveScoped(id, { scope }): scope must be an object {uses, minutes, fixed, atMost}');
  }
  // The library reads the scope and refuses any field it does not know: `atMost` is its
  // `at_most`, and everything else is passed as given.
  const { atMost, ...rest } = scope;
  if (atMost !== undefined && 'at_most' in rest) {
    throw new TypeError('approveScoped(id, { scope }): give atMost or at_most, not both');
  }
  const wire = atMost === undefined ? rest : { ...rest, at_most: atMost };
  const approver = agent === undefined || agent === null ? by : { agent, user: by };
  const answer = { approval_id: id, approver, verified: verified ?? null, action_hash: actionHash ?? null, scope: wire };
  const text = dumps(answer, 'the scoped answer');
  return json.parse(await invoke(() => handle.approvalGrantScoped(text)));
}

async function scopedGrants(handle, { liveOnly = true } = {}) {
  if (typeof liveOnly !== 'boolean') throw new TypeError('scopedGrants({ liveOnly }): liveOnly must be a boolean');
  return json.parse(await invoke(() => handle.scopedGrants(liveOnly)));
}

async function revokeScopedGrant(handle, grantId, { by, reason } = {}) {
  requireString('the grant id', grantId);
  requireString('by', by);
  requireString('reason', reason);
  return json.parse(await invoke(() => handle.scopedGrantRevoke(grantId, by, reason)));
}

async function waitForAnswer(handle, id, timeoutMs) {
  requireString('the approval id', id);
  const timeout = optionalCount('timeoutMs', timeoutMs, 0);
  return json.parse(await invoke(() => handle.approvalWait(id, timeout)));
}

function onApprovalRequest(handle, hook) {
  if (hook !== null && hook !== undefined && typeof hook !== 'function') {
    throw new TypeError('onApprovalRequest(hook): hook must be a function or null');
  }
  const bridge = (text) => {
    const report = (error) => console.error('warden: the approval hook failed; the action is not affected:', error);
    try {
      const outcome = hook(json.parse(text));
      if (outcome && typeof outcome.then === 'function') outcome.then(undefined, report);
    } catch (error) {
      report(error);
    }
  };
  invokeSync(() => handle.setApprovalHook(hook ? bridge : null));
}

async function approval(handle, id) {
  requireString('the approval id', id);
  return json.parse(await invoke(() => handle.approvalGet(id)));
}

async function pending(handle) {
  return json.parse(await invoke(() => handle.approvalsPending()));
}

module.exports = { approve, deny, approveScoped, scopedGrants, revokeScopedGrant, waitForAnswer, onApprovalRequest, approval, pending };
