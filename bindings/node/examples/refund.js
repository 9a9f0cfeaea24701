#!/usr/bin/env node
'use strict';
// The refund story, in process, no network: an agent refunds a payment once and its retry is
// refused; a large refund waits for a human; a lost reply leaves the refund AMBIGUOUS and the
// retry is refused instead of paying twice.
//
//   node examples/refund.js [directory]      (default: a fresh temporary directory)

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { Warden, withContext, withApproval, idempotencyToken, WardenError } = require('..');

const POLICY = `schema: warden/v1
version: "1"
environment: production
mode: enforce
actions:
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
`;

/** A stand-in for Stripe that counts the refunds it really makes. */
const stripe = {
  calls: 0,
  loseNextReply: false,
  async refund({ payment_id, amount }, idempotencyKey) {
    this.calls += 1;
    const refund = { id: `re_${this.calls}`, payment_id, amount, idempotency_key: idempotencyKey };
    if (this.loseNextReply) {
      this.loseNextReply = false;
      // The refund went through, and the reply died on the way back.
      throw new Error('socket hang up');
    }
    return refund;
  },
};

function say(line = '') {
  process.stdout.write(`${line}\n`);
}

function refusal(error) {
  if (!(error instanceof WardenError)) throw error;
  const fields = [error.code, error.reason];
  if (error.state) fields.push(`state=${error.state}`);
  if (error.requestId) fields.push(`request=${error.requestId}`);
  return `refused: ${error.name} (${fields.join(', ')})`;
}

async function main() {
  const dir = process.argv[2] ?? fs.mkdtempSync(path.join(os.tmpdir(), 'warden-refund-'));
  fs.mkdirSync(dir, { recursive: true });
  const config = path.join(dir, 'warden.yaml');
  const store = path.join(dir, 'state.redb');
  fs.writeFileSync(config, POLICY);

  const w = new Warden({ store, config, environment: 'production' });
  const refund = w.protect('stripe.refund', (args) => stripe.refund(args, idempotencyToken()));
  const asAgent = (fn) => withContext({ agent: 'support-agent', user: 'ada' }, fn);

  try {
    say('1. support-agent (for ada) refunds pay_1, 1200 cents; the policy allows it');
    const first = await asAgent(() => refund({ payment_id: 'pay_1', amount: 1200 }));
    say(`   stripe refunded ${first.id}; effect refund:pay_1 is ${(await w.effect('refund:pay_1')).state} (remote calls: ${stripe.calls})`);
    say('   the agent retries the same refund');
    const retry = await asAgent(() => refund({ payment_id: 'pay_1', amount: 1200 })).catch((e) => e);
    say(`   ${refusal(retry)} (remote calls: ${stripe.calls})`);
    say();

    say('2. a refund of 200000 cents needs a human');
    const args = { payment_id: 'pay_2', amount: 200_000 };
    const required = await asAgent(() => refund(args)).catch((e) => e);
    say(`   ${refusal(required)}`);
    const self = await w.approve(required.requestId, { by: 'ada' }).catch((e) => e);
    say(`   ada (who asked) tries to approve it: ${refusal(self)}`);
    const granted = await w.approve(required.requestId, { by: 'ops:bob' });
    say(`   ops:bob approves it: ${granted.status}`);
    const approved = await asAgent(() => withApproval(required.requestId, () => refund(args)));
    say(`   presented with the approval: stripe refunded ${approved.id} (remote calls: ${stripe.calls})`);
    say();

    say('3. lost reply: stripe refunds pay_3, and the reply never arrives');
    stripe.loseNextReply = true;
    const lost = await asAgent(() => refund({ payment_id: 'pay_3', amount: 900 })).catch((e) => e);
    say(`   the call threw ${lost.message}; effect refund:pay_3 is ${(await w.effect('refund:pay_3')).state} (remote calls: ${stripe.calls})`);
    say('   the agent retries');
    const blocked = await asAgent(() => refund({ payment_id: 'pay_3', amount: 900 })).catch((e) => e);
    say(`   ${refusal(blocked)} (remote calls: ${stripe.calls})`);
    say(`   a human checks stripe, then runs: warden --store ${store} resolve refund:pay_3 --committed`);
    say();

    const chain = await w.verifyChain();
    say(`receipt chain: ${chain.ok ? 'intact' : 'BROKEN'}, ${chain.verified} receipts verified; remote calls: ${stripe.calls} for 3 refunds`);
    say(`store: ${store}`);
  } finally {
    w.close();
  }
}

main().catch((error) => {
  process.stderr.write(`${error.stack ?? error}\n`);
  process.exit(1);
});
