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

const repo = path.resolve(__dirname, '..', '..', '..');

/**
 * A built `warden` CLI that knows `subcommand`, preferring the one built with the library the
 * addon links: $WARDEN_CLI, else the one beside $WARDEN_LIB_DIR, else target/{release,debug}/warden;
 * or null.
 */
function findCli(subcommand) {
  const { spawnSync } = require('node:child_process');
  const target = process.env.CARGO_TARGET_DIR || path.join(repo, 'target');
  const candidates = [
    process.env.WARDEN_CLI,
    process.env.WARDEN_LIB_DIR && path.join(process.env.WARDEN_LIB_DIR, 'warden'),
    path.join(target, 'release', 'warden'),
    path.join(target, 'debug', 'warden'),
  ].filter(Boolean);
  return candidates.find((file) => fs.existsSync(file) && spawnSync(file, [subcommand, '--help']).status === 0) ?? null;
}

/** `CLI --store STORE --json ARGS`, parsed; its environment without WARDEN_* variables. */
async function cliJson(cli, store, ...args) {
  const { execFile } = require('node:child_process');
  const run = require('node:util').promisify(execFile);
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('WARDEN_')));
  const { stdout } = await run(cli, ['--store', store, '--json', ...args], { env, timeout: 120_000 });
  return warden.parseJson(stdout);
}

/** index.js and every .js file under lib/, its subfolders included, relative to the binding's folder. */
function bindingSources() {
  const binding = path.join(__dirname, '..');
  const under = (dir) =>
    fs.readdirSync(path.join(binding, dir), { withFileTypes: true }).flatMap((entry) => {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) return under(file);
      return file.endsWith('.js') ? [file] : [];
    });
  return ['index.js', ...under('lib')];
}

module.exports = { POLICY, scratch, open, ada, findCli, cliJson, bindingSources };
