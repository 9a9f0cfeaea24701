'use strict';
// The addon calls only the warden_* C functions: no Rust path into the warden crate, one
// extern block, and every function it declares exists in include/warden.h with the same
// number of parameters.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { bindingSources } = require('./helpers');

const binding = path.resolve(__dirname, '..');
const repo = path.resolve(binding, '..', '..');
const header = fs.readFileSync(path.join(repo, 'include', 'warden.h'), 'utf8');
const sources = fs
  .readdirSync(path.join(binding, 'src'))
  .filter((file) => file.endsWith('.rs'))
  .map((file) => ({ file, text: fs.readFileSync(path.join(binding, 'src', file), 'utf8') }));
const ffi = sources.find((source) => source.file === 'ffi.rs').text;

/** Split a parameter list on its top-level commas; `()`, `(void)` have none. */
function parameters(list) {
  const text = list.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '').trim();
  if (text === '' || text === 'void') return [];
  return text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

function declaredInFfi() {
  const block = /extern\s+"C"\s*\{([\s\S]*?)\n\}/.exec(ffi);
  assert.ok(block, 'src/ffi.rs has an extern "C" block');
  const functions = new Map();
  for (const match of block[1].matchAll(/\bfn\s+(\w+)\s*\(([^)]*)\)/g)) {
    functions.set(match[1], parameters(match[2]).length);
  }
  return functions;
}

function declaredInHeader() {
  const functions = new Map();
  const code = header.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  for (const match of code.matchAll(/\b(warden_\w+)\s*\(([^()]*)\)\s*;/g)) {
    functions.set(match[1], parameters(match[2]).length);
  }
  return functions;
}

test('every extern fn in src/ffi.rs is a warden_* function of include/warden.h with the same arity', () => {
  const ours = declaredInFfi();
  const theirs = declaredInHeader();
  assert.ok(ours.size >= 20, `the addon declares the C surface it uses (${ours.size})`);
  for (const [name, arity] of ours) {
    assert.match(name, /^warden_/, `${name} is a warden_* symbol`);
    assert.ok(theirs.has(name), `${name} is declared in include/warden.h`);
    assert.equal(arity, theirs.get(name), `${name} takes ${theirs.get(name)} parameters in the header`);
  }
});

test('the addon sources use no Rust path into the warden crate and no other native code', () => {
  for (const { file, text } of sources) {
    assert.doesNotMatch(text, /\bwarden::/, `${file} names a warden:: path`);
    assert.doesNotMatch(text, /extern\s+crate\s+warden\b/, `${file} links the warden crate`);
    assert.doesNotMatch(text, /\b(dlopen|dlsym|libloading)\b/, `${file} loads symbols by hand`);
    if (file !== 'ffi.rs') {
      assert.doesNotMatch(text, /extern\s+"C"\s*\{/, `${file}: extern blocks live in ffi.rs only`);
      assert.doesNotMatch(text, /#\[link/, `${file}: links are declared in build.rs only`);
    }
  }
  const manifest = fs.readFileSync(path.join(binding, 'Cargo.toml'), 'utf8');
  const dependencies = /\[dependencies\]([\s\S]*?)(\n\[|$)/.exec(manifest)[1];
  assert.doesNotMatch(dependencies, /^\s*warden\s*=/m, 'Cargo.toml does not depend on the warden crate');
  assert.match(manifest, /^\[workspace\]\s*$/m, 'its own workspace');
});

test('every warden_* function the addon calls is declared in its extern block', () => {
  const declared = declaredInFfi();
  for (const { file, text } of sources) {
    for (const match of text.matchAll(/\b(warden_[a-z0-9_]+)\s*\(/g)) {
      assert.ok(declared.has(match[1]), `${file} calls ${match[1]}, which src/ffi.rs does not declare`);
    }
  }
});

test('the built addon imports exactly the declared warden_* symbols', (t) => {
  const addon = path.join(binding, 'native', 'warden.node');
  const nm = spawnSync('nm', ['-D', '--undefined-only', addon], { encoding: 'utf8' });
  if (nm.error || nm.status !== 0) {
    t.skip('nm is not available');
    return;
  }
  const imported = new Set(
    nm.stdout
      .split('\n')
      .map((line) => line.trim().split(/\s+/).pop())
      .filter((symbol) => symbol && symbol.startsWith('warden_')),
  );
  const declared = declaredInFfi();
  for (const symbol of imported) assert.ok(declared.has(symbol), `imports ${symbol}, not declared`);
  assert.ok(imported.size > 0);
  const defined = spawnSync('nm', ['-D', '--defined-only', addon], { encoding: 'utf8' }).stdout;
  assert.doesNotMatch(defined, /\bwarden_\w+/, 'the addon defines no warden_* symbol of its own (no copy of the library)');
});

test('index.js and lib/ require only Node built-ins, lib/ and the addon (and the optional OpenTelemetry API)', () => {
  for (const file of bindingSources()) {
    const text = fs.readFileSync(path.join(binding, file), 'utf8');
    for (const match of text.matchAll(/require\(\s*(['"`])([^'"`]+)\1\s*\)/g)) {
      // The one package outside Node: the optional peer dependency, tried in lib/telemetry.js.
      if (file === path.join('lib', 'telemetry.js') && match[2] === '@opentelemetry/api') continue;
      assert.match(match[2], /^(node:|\.\/lib\/|\.\/)/, `${file} requires ${match[2]}`);
    }
  }
});
