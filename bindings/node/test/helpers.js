'use strict';
// Shared test fixtures: a policy document and a store in a fresh temporary directory.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const warden = require('..');

const POLICY = `schema: warden/v1
version: "1"
environment: test
mode: enforce
actions:
  customer.read:
    decision: allow
  stripe.refund:
    description: "Refund a Stripe payment; amount in cents"
    effect: "refund:{payment_id}"
    max_attempts: 3
    lease: PT5M
    rules:
      - when: { amount_gte: 0, amount_lte: 50000 }
        decision: allow
      - when: { amount_gte: 0, amount_lte: 500000 }
        decision: approve
      - decision: deny
  ledger.write:
    effect: "ledger:{entry}"
    decision: allow
`;

/** A temporary directory holding warden.yaml, removed when the test ends. */
function scratch(t, policy = POLICY) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-node-'));
  const config = path.join(dir, 'warden.yaml');
  fs.writeFileSync(config, policy);
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return { dir, config, store: path.join(dir, 'state.redb') };
}

/** An open Warden over a fresh store, closed when the test ends. */
function open(t, policy) {
  const { config, store, dir } = scratch(t, policy);
  const w = new warden.Warden({ store, config, environment: 'test' });
  t.after(() => w.close());
  return { w, config, store, dir };
}

const ada = (fn) => warden.withContext({ agent: 'support-agent', user: 'ada' }, fn);

module.exports = { POLICY, scratch, open, ada };
