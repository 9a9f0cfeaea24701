#!/usr/bin/env node
'use strict';
// Build the Node binding with plain cargo (no node-gyp, no downloaded headers):
//
//   1. libwarden.so, the root crate's C library, unless it is already there:
//      cargo build --release --lib --manifest-path <repo>/Cargo.toml
//   2. the N-API addon, linked against it: cargo build --release --manifest-path bindings/node/Cargo.toml
//   3. both copied into bindings/node/native/ (warden.node finds libwarden.so through its
//      rpath $ORIGIN).
//
// Both builds share one target directory, ${CARGO_TARGET_DIR:-<repo>/target}. WARDEN_LIB_DIR
// names a directory already holding libwarden.so (then step 1 is skipped); WARDEN_REBUILD=1
// runs step 1 even when the library exists.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const binding = path.resolve(__dirname, '..');
const repo = path.resolve(binding, '..', '..');
const target = process.env.CARGO_TARGET_DIR ? path.resolve(process.env.CARGO_TARGET_DIR) : path.join(repo, 'target');
const libDir = process.env.WARDEN_LIB_DIR ? path.resolve(process.env.WARDEN_LIB_DIR) : path.join(target, 'release');
const library = path.join(libDir, 'libwarden.so');
const native = path.join(binding, 'native');

// npm hides an install script's output (unless --foreground-scripts), and the compile takes
// minutes: when a terminal is attached, cargo's progress goes straight to it.
function terminal() {
  if (process.stderr.isTTY) return 'inherit';
  try {
    return fs.openSync('/dev/tty', 'w');
  } catch {
    return 'inherit';
  }
}

function cargo(args) {
  const cargoBin = process.env.CARGO || 'cargo';
  const out = terminal();
  const say = (line) => (out === 'inherit' ? console.error(line) : fs.writeSync(out, `${line}\n`));
  say(`warden: ${cargoBin} ${args.join(' ')} (a release compile: minutes on a small machine)`);
  const run = spawnSync(cargoBin, args, {
    stdio: ['ignore', out, out],
    env: { ...process.env, CARGO_TARGET_DIR: target, WARDEN_LIB_DIR: libDir },
  });
  if (run.error) {
    console.error(`warden: cannot run ${cargoBin} (${run.error.message}); install Rust from https://rustup.rs`);
    process.exit(1);
  }
  if (run.status !== 0) process.exit(run.status ?? 1);
}

function main() {
  if (process.platform !== 'linux') {
    console.error('warden: the Node binding is built and tested on Linux only');
  }
  const rebuild = process.env.WARDEN_REBUILD === '1';
  if (!process.env.WARDEN_LIB_DIR && (rebuild || !fs.existsSync(library))) {
    cargo(['build', '--release', '--lib', '--manifest-path', path.join(repo, 'Cargo.toml')]);
  }
  if (!fs.existsSync(library)) {
    console.error(`warden: ${library} is missing; build it, or point WARDEN_LIB_DIR at it`);
    process.exit(1);
  }
  cargo(['build', '--release', '--manifest-path', path.join(binding, 'Cargo.toml')]);
  const addon = path.join(target, 'release', 'libwarden_node.so');
  fs.mkdirSync(native, { recursive: true });
  // Copy through a temporary name and rename, so a running process never sees half a file.
  for (const [from, to] of [
    [library, 'libwarden.so'],
    [addon, 'warden.node'],
  ]) {
    const partial = path.join(native, `.${to}.${process.pid}`);
    fs.copyFileSync(from, partial);
    fs.renameSync(partial, path.join(native, to));
  }
  console.error(`warden: built ${path.join(native, 'warden.node')}`);
}

main();
