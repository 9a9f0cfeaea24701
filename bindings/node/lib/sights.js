'use strict';
// Sights: confined reads of the HTTP windows the configuration names. The agent only ever names
// a window, never a URL; the library builds the request, resolves the source's credential,
// enforces every bound and shapes the result. These are the bodies of the Warden methods of
// the same names, given the store's native handle; a query may be aborted by an AbortSignal.

const json = require('./json');
const errors = require('./errors');
const { native, invoke, invokeSync, dumps } = require('./native');
const { requireString, namedOptions, signalOption } = require('./checks');

/**
 * The request object of a sight call: the window named positionally, every other option
 * passed through as it is, so the library (not this binding) refuses what is not allowed
 * (`url`, `headers`, … → OutOfWindow `invalid_params`, before any I/O).
 */
function sightRequest(what, source, endpoint, options) {
  for (const key of ['source', 'endpoint']) {
    if (Object.hasOwn(options, key)) throw new TypeError(`${what}: ${key} is the positional argument, not an option`);
  }
  return dumps({ source, endpoint, ...options }, `the ${what} request`);
}

/** What an aborted query rejects with: the library's own shape for reason `aborted`. */
function abortedError() {
  return errors.fromObject({
    code: 'WARDEN_RESULT_FETCH',
    reason: 'aborted',
    message: 'aborted: the query was cancelled',
    refusal: false,
  });
}

/**
 * Run a native sight call, aborted by `signal`: the library checks its token before connecting
 * and between reads, so a stalled server would hold the native call until the source's
 * timeout_ms: the promise settles at the abort instead, and the native call's own outcome is
 * dropped. The token is freed by the addon only once the native call has returned.
 */
async function abortable(signal, call) {
  if (!signal) return json.parse(await invoke(() => call(undefined)));
  if (signal.aborted) throw abortedError();
  const cancel = new native.Cancel();
  let onAbort;
  const aborted = new Promise((_, reject) => {
    onAbort = () => {
      cancel.trigger();
      reject(abortedError());
    };
  });
  signal.addEventListener('abort', onAbort, { once: true });
  const running = invoke(() => call(cancel));
  running.catch(() => {});
  try {
    return json.parse(await Promise.race([running, aborted]));
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * The function the addon calls (on the JavaScript thread) for each credential reference a
 * query needs: it runs the user's provider and settles the native request exactly once, with
 * a string, or null for "no value" (a throw, a rejection, anything that is not a string). It
 * never throws itself.
 */
function credentialBridge(provider) {
  return function resolveCredential(reference, request) {
    const settle = (value) => {
      try {
        request.settle(typeof value === 'string' ? value : null);
      } catch {
        // The request is already settled or gone; its query has moved on.
      }
    };
    let answer;
    try {
      answer = Promise.resolve(provider(reference));
    } catch {
      settle(null);
      return;
    }
    answer.then(settle, () => settle(null));
  };
}

async function query(handle, source, endpoint, options) {
  const { signal, ...rest } = namedOptions('query', options);
  signalOption('query', signal);
  const text = sightRequest('query', source, endpoint, rest);
  return abortable(signal, (cancel) => handle.sightQuery(text, cancel));
}

async function callTool(handle, name, args, options) {
  requireString('callTool(name)', name);
  const signal = signalOption('callTool', namedOptions('callTool', options).signal);
  const text = dumps(args ?? {}, `the ${name} arguments`);
  return abortable(signal, (cancel) => handle.sightCallTool(name, text, cancel));
}

async function history(handle, source, endpoint, options) {
  const text = sightRequest('history', source, endpoint, namedOptions('history', options));
  return json.parse(await invoke(() => handle.sightHistory(text)));
}

async function diff(handle, a, b) {
  const text = dumps({ a, b }, 'the diff request');
  return json.parse(await invoke(() => handle.sightDiff(text)));
}

function sources(handle) {
  return json.parse(invokeSync(() => handle.sightSources()));
}

function toolSchema(handle) {
  return json.parse(invokeSync(() => handle.sightToolSchema()));
}

function setCredentialProvider(handle, provider) {
  if (provider !== undefined && provider !== null && typeof provider !== 'function') {
    throw new TypeError('setCredentialProvider(provider): provider must be a function or null');
  }
  invokeSync(() => handle.setCredentialProvider(provider ? credentialBridge(provider) : null));
}

module.exports = { query, callTool, history, diff, sources, toolSchema, setCredentialProvider };
