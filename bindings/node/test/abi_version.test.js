'use strict';
// The binding refuses to load a library that implements another ABI version.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const binding = path.resolve(__dirname, '..');

function loadWith(preload) {
  return spawnSync(process.execPath, ['-e', `${preload}\nrequire(${JSON.stringify(binding)});\nconsole.log('loaded');`], {
    encoding: 'utf8',
  });
}

test('the real library is ABI version 1 and loads', () => {
  const run = loadWith('');
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout.trim(), 'loaded');
  assert.equal(require('..').ABI_VERSION, 1);
});

test('a library answering another ABI version is refused at load with AbiMismatch', () => {
  // Stand in for a libwarden.so of ABI version 2: the addon's abiVersion() answers 2.
  const run = loadWith(`
    const Module = require('node:module');
    const load = Module._extensions['.node'];
    Module._extensions['.node'] = (module, file) => {
      load(module, file);
      module.exports = { ...module.exports, abiVersion: () => 2 };
    };
    process.on('uncaughtException', (error) => {
      console.log(JSON.stringify({ name: error.name, code: error.code, message: error.message }));
      process.exit(3);
    });`);
  assert.equal(run.status, 3, `${run.stdout}${run.stderr}`);
  const error = JSON.parse(run.stdout);
  assert.equal(error.name, 'AbiMismatch');
  assert.equal(error.code, 'WARDEN_RESULT_ABI_MISMATCH');
  assert.match(error.message, /ABI version 2.*version 1/);
});
