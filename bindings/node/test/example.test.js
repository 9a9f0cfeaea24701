'use strict';
// examples/refund.js runs the refund story end to end and prints its transcript.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

test('examples/refund.js tells the refund story', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-example-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const run = spawnSync(process.execPath, [path.join(__dirname, '..', 'examples', 'refund.js'), dir], {
    encoding: 'utf8',
    env: { ...process.env, RUST_BACKTRACE: '0' },
  });
  assert.equal(run.status, 0, `the example failed:\n${run.stdout}\n${run.stderr}`);
  const out = run.stdout;
  const expect = (pattern) => assert.match(out, pattern, `transcript:\n${out}`);
  expect(/stripe refunded re_1; effect refund:pay_1 is committed \(remote calls: 1\)/);
  expect(/refused: Duplicate \(WARDEN_RESULT_DUPLICATE, duplicate, state=committed\) \(remote calls: 1\)/);
  expect(/refused: ApprovalRequired \(WARDEN_RESULT_APPROVAL_REQUIRED, approval_required, request=apr_[0-9a-f]{32}\)/);
  expect(/ada \(who asked\) tries to approve it: refused: ApprovalMismatch \(WARDEN_RESULT_APPROVAL_MISMATCH, approver_is_requester\)/);
  expect(/ops:bob approves it: granted/);
  expect(/presented with the approval: stripe refunded re_2 \(remote calls: 2\)/);
  expect(/the call threw socket hang up; effect refund:pay_3 is ambiguous \(remote calls: 3\)/);
  expect(/refused: Ambiguous \(WARDEN_RESULT_AMBIGUOUS, ambiguous\) \(remote calls: 3\)/);
  expect(/receipt chain: intact, \d+ receipts verified; remote calls: 3 for 3 refunds/);
  assert.ok(out.includes(`store: ${path.join(dir, 'state.redb')}`));
});
