'use strict';
// The native addon (native/warden.node) and the calls into it: loaded once, its ABI version
// checked; a native failure becomes the matching WardenError; a value going in becomes JSON
// text or InvalidInput. The library's defaults are read from it here, never restated.

const path = require('node:path');

const json = require('./json');
const { WardenError, AbiMismatch, InvalidInput, fromObject } = require('./errors');

/** The C ABI version this binding is written against. */
const ABI_VERSION = 1;

/** The package directory: the addon is native/warden.node in it. */
const binding = path.join(__dirname, '..');

const native = loadNative();

function loadNative() {
  const file = path.join(binding, 'native', 'warden.node');
  let addon;
  try {
    addon = require(file);
  } catch (error) {
    throw new AbiMismatch(
      `cannot load the Warden addon ${file} (${error.message}); build it with \`node scripts/build.js\` in ${binding} (npm install does this)`,
    );
  }
  const found = addon.abiVersion();
  if (found !== ABI_VERSION) {
    throw new AbiMismatch(
      `libwarden implements ABI version ${found}, and this binding was built for version ${ABI_VERSION}; rebuild it with \`node scripts/build.js\``,
    );
  }
  return addon;
}

/**
 * A native failure is a structured error: `code` is the C constant's name and `fields` the
 * library's error object; make it the matching WardenError.
 */
function translate(error) {
  if (error instanceof WardenError || error === null || typeof error !== 'object') return error;
  const { code, fields } = error;
  if (typeof code !== 'string' || !code.startsWith('WARDEN_RESULT_') || fields === null || typeof fields !== 'object') {
    return error;
  }
  return fromObject(fields);
}

/** Run a native call (sync or returning a Promise), throwing WardenErrors. */
async function invoke(call) {
  try {
    return await call();
  } catch (error) {
    throw translate(error);
  }
}

/** JSON text for the library; a value that cannot be JSON is InvalidInput, as in Python. */
function dumps(value, what) {
  try {
    return json.stringify(value);
  } catch (error) {
    throw new InvalidInput(`${what} cannot be sent to Warden as JSON: ${error.message}`);
  }
}

function invokeSync(call) {
  try {
    return call();
  } catch (error) {
    throw translate(error);
  }
}

/**
 * The library's defaults (`warden_defaults`): list calls return at most `list_limit` records
 * unless asked (0: no limit), from `from_seq` / `after_id`. Never restated here.
 */
const DEFAULTS = Object.freeze(json.parse(native.defaults()));

module.exports = { ABI_VERSION, native, invoke, invokeSync, dumps, DEFAULTS };
