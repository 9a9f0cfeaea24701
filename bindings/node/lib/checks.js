'use strict';
// The checks of a Warden call's arguments, shared by its methods: each throws a TypeError that
// names what is wrong.

function requireString(what, value) {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${what} must be a non-empty string`);
  return value;
}

/** `requireString`, letting undefined and null through. */
function optionalString(what, value) {
  if (value !== undefined && value !== null) requireString(what, value);
}

function optionalCount(what, value, fallback) {
  if (value === undefined || value === null) return fallback;
  if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`${what} must be a non-negative integer`);
  return value;
}

/** `optionalCount` with no fallback: the count is required. */
function requireCount(what, value) {
  if (value === undefined || value === null) throw new TypeError(`${what} must be a non-negative integer`);
  return optionalCount(what, value, 0);
}

/** `options` as a plain object of named options ({} when absent). */
function namedOptions(what, options) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object' || Array.isArray(options)) throw new TypeError(`${what}: options must be an object`);
  return options;
}

/** The `signal` option of a sight call or a protected call: an AbortSignal, or undefined/null for none. */
function signalOption(what, signal) {
  if (signal === undefined || signal === null) return signal;
  if (typeof signal !== 'object' || typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
    throw new TypeError(`${what}: signal must be an AbortSignal`);
  }
  return signal;
}

module.exports = { requireString, optionalString, optionalCount, requireCount, namedOptions, signalOption };
