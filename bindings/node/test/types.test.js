'use strict';
// index.d.ts declares exactly what index.js exports, and (when TypeScript is installed, as a
// devDependency) type-checks together with a usage file under --strict.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const warden = require('..');

const binding = path.resolve(__dirname, '..');
const declarations = fs.readFileSync(path.join(binding, 'index.d.ts'), 'utf8');

// The snapshot: every name the package exports. A change here is a change of public API.
const EXPORTS = [
  'ABI_VERSION',
  'AbiMismatch',
  'Ambiguous',
  'ApprovalMismatch',
  'ApprovalRequired',
  'AttemptCeiling',
  'AuthorityDenied',
  'AuthorityEscalation',
  'ConfigError',
  'Denied',
  'Duplicate',
  'Fault',
  'FetchFault',
  'InvalidInput',
  'LateOutcome',
  'NotExecuted',
  'NotFound',
  'NotResolvable',
  'OutOfWindow',
  'Panic',
  'Poisoned',
  'Refused',
  'StoreFault',
  'Warden',
  'WardenError',
  'actionHash',
  'canonical',
  'defaults',
  'evidence',
  'extendLease',
  'idempotencyToken',
  'parseJson',
  'stringifyJson',
  'version',
  'withApproval',
  'withContext',
];

test('the exported names are the snapshot', () => {
  assert.deepEqual(Object.keys(warden).sort(), EXPORTS);
});

test('index.d.ts declares every exported value and nothing else', () => {
  const declared = [...declarations.matchAll(/^export declare (?:class|function|const) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual([...new Set(declared)].sort(), EXPORTS);
});

test('the Warden methods are declared', () => {
  const methods = Object.getOwnPropertyNames(warden.Warden.prototype).filter((name) => name !== 'constructor');
  for (const method of methods) {
    assert.match(declarations, new RegExp(`^\\s+(readonly )?${method}\\b`, 'm'), `index.d.ts declares Warden.${method}`);
  }
});

function findTsc() {
  try {
    return require.resolve('typescript/bin/tsc', { paths: [binding] });
  } catch {
    return null;
  }
}

test('index.d.ts type-checks with a usage file (tsc --noEmit --strict)', (t) => {
  const tsc = findTsc();
  if (!tsc) {
    t.skip('typescript is not installed (npm install in bindings/node adds it)');
    return;
  }
  const run = spawnSync(process.execPath, [tsc, '-p', path.join(__dirname, 'types', 'tsconfig.json')], {
    encoding: 'utf8',
    cwd: binding,
  });
  assert.equal(run.status, 0, `tsc failed:\n${run.stdout}${run.stderr}`);
});
