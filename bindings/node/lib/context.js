'use strict';
// The caller's context, carried through async code: who is asking (`withContext`), which
// approval they present (`withApproval`), and, inside a protected call, its permit
// (`idempotencyToken`, `extendLease`).

const { AsyncLocalStorage } = require('node:async_hooks');

const json = require('./json');
const { InvalidInput } = require('./errors');
const { invoke } = require('./native');
const { requireString, optionalString } = require('./checks');

const callerScope = new AsyncLocalStorage();
const protectedScope = new AsyncLocalStorage();

/**
 * Run `fn` with the principal {agent, user}. Every protected call made inside it, however deep
 * in async code, proposes as this principal; concurrent calls each see their own. `task` names
 * the unit of work (grants naming `tasks` need a matching one); `hop` is a delegation id
 * ("dlg_…") another agent handed over, then the only grant the calls are judged against. Both
 * belong to this context: an inner `withContext` starts without them.
 */
function withContext({ agent, user = null, task = null, hop = null } = {}, fn) {
  requireString('agent', agent);
  optionalString('user', user);
  optionalString('task', task);
  optionalString('hop', hop);
  if (typeof fn !== 'function') throw new TypeError('withContext(principal, fn): fn must be a function');
  const outer = callerScope.getStore() ?? {};
  return callerScope.run(
    { ...outer, principal: { agent, user: user ?? null }, task: task ?? null, hop: hop ?? null },
    fn,
  );
}

/** Run `fn` presenting the approval `id` ("apr_…") to every protected call inside it. */
function withApproval(id, fn) {
  requireString('the approval id', id);
  if (typeof fn !== 'function') throw new TypeError('withApproval(id, fn): fn must be a function');
  const outer = callerScope.getStore() ?? {};
  return callerScope.run({ ...outer, approvalId: id }, fn);
}

function currentCall(what) {
  const call = protectedScope.getStore();
  if (!call) throw new InvalidInput(`${what} is only available inside a protected call`);
  return call;
}

/**
 * The provider idempotency token of the attempt the current protected call is running. Throws
 * InvalidInput outside a protected call, or when the action has no effect key.
 */
function idempotencyToken() {
  const token = currentCall('idempotencyToken()').info.idempotency_token;
  if (typeof token !== 'string') {
    throw new InvalidInput('this action has no effect key, so its attempt has no idempotency token');
  }
  return token;
}

/** Extend the current protected call's lease to `ms` from now; resolves to the new expiry. */
async function extendLease(ms) {
  const call = currentCall('extendLease()');
  if (!Number.isSafeInteger(ms) || ms <= 0) throw new TypeError('extendLease(ms): ms must be a positive integer');
  const info = json.parse(await invoke(() => call.permit.extendLease(ms)));
  call.info = { ...call.info, lease_expires_at: info.lease_expires_at };
  return info.lease_expires_at ?? null;
}

module.exports = { callerScope, protectedScope, withContext, withApproval, idempotencyToken, extendLease };
