// The propose-and-wait scenario in Node (the twin of wait_agent.py): a precondition, a wait of
// two days judged by the library's clock (moved by libfaketime through CLOCK_FILE, never
// slept), a reconcile hook. Prints one JSON transcript; wait.py compares it with Python's.
//
//     node wait_agent.js STORE CONFIG CLOCK_FILE
'use strict';
const fs = require('node:fs');
const { Warden, withContext, WardenError } = require(process.env.WARDEN_NODE_PACKAGE);

const TWO_DAYS_MS = 2 * 24 * 60 * 60 * 1000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const [store, config, clockFile] = process.argv.slice(2);
  const w = new Warden({ store, config });
  const transcript = [];
  const asked = [];
  const balance = { value: 100 };
  const ran = [];

  const ledger = async (action) => {
    asked.push(action.name);
    return { balance: balance.value };
  };
  const failingLedger = () => {
    throw new Error('the ledger is down');
  };
  const moveClock = async (offset) => {
    fs.writeFileSync(clockFile, offset);
    await sleep(500); // lets the waiting call read the store at the new time
  };
  const pendingId = async () => {
    for (;;) {
      const pending = await w.pending();
      if (pending.length > 0) return pending[0].approval_id;
      await sleep(10);
    }
  };
  const outcome = async (call, args) => {
    try {
      return { returned: await call(args) };
    } catch (error) {
      if (error instanceof WardenError) return { raised: error.name, reason: error.reason };
      return { raised: 'host_error', message: error.message }; // the host's own error, unchanged
    }
  };

  const report = w.protect('report.send', async ({ id }) => (ran.push(id), `sent ${id}`), { precondition: ledger });
  const payout = w.protect('payout.large', async ({ id }) => (ran.push(id), `paid ${id}`), {
    precondition: ledger,
    waitMs: TWO_DAYS_MS,
  });
  const payoutUnchecked = w.protect('payout.large', async ({ id }) => (ran.push(id), `paid ${id}`), {
    precondition: failingLedger,
    waitMs: TWO_DAYS_MS,
  });
  let calls = 0;
  const flaky = async ({ id }) => {
    calls += 1;
    if (calls === 1) throw new Error('the reply was lost');
    ran.push(id);
    return `posted ${id}`;
  };
  const keys = [];
  const post = w.protect('ledger.post', flaky);
  const postReconciling = w.protect('ledger.post', flaky, {
    reconcile: async (key) => (keys.push(key), 'not_executed'),
  });

  await withContext({ agent: 'payout-agent', user: 'carol' }, async () => {
    // 1. An allowed action never asks the precondition.
    transcript.push({ step: 'allowed', ...(await outcome(report, { id: 'r1' })), asked: asked.length });

    // 2. A wait of two days: granted ten minutes in, the same call runs, the precondition
    //    asked when the request was made and again before the grant was spent.
    let waiting = outcome(payout, { id: 'p1' });
    let request = await pendingId();
    await moveClock('+10m');
    await w.approve(request, { by: 'ops:bob' });
    transcript.push({ step: 'waited_and_granted', ...(await waiting), asked: asked.length });

    // 3. The state changed while waiting: the grant is not spent.
    waiting = outcome(payout, { id: 'p2' });
    request = await pendingId();
    balance.value = 50;
    await w.approve(request, { by: 'ops:bob' });
    const box = await waiting;
    const status = (await w.approval(request))?.status;
    transcript.push({ step: 'precondition_changed', ...box, approval: status, asked: asked.length });

    // 4. Nobody answers: the request's fifteen minutes end the two-day wait.
    waiting = outcome(payout, { id: 'p3' });
    request = await pendingId();
    await moveClock('+30m');
    transcript.push({ step: 'request_expired', ...(await waiting), pending: (await w.pending()).length });

    // 5. A precondition that fails: its own error, nothing requested.
    const failed = await outcome(payoutUnchecked, { id: 'p4' });
    transcript.push({ step: 'precondition_failed', ...failed, pending: (await w.pending()).length });

    // 6. AMBIGUOUS, then the reconcile hook answers not_executed: the proposal runs again.
    transcript.push({ step: 'lost_reply', ...(await outcome(post, { id: 'l1' })) });
    transcript.push({ step: 'reconciled', ...(await outcome(postReconciling, { id: 'l1' })), asked_about: keys });
  });
  transcript.push({ step: 'ran', ids: ran });
  w.close();
  console.log(JSON.stringify(transcript));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
