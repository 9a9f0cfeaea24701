'use strict';
// Part of the pure-JavaScript bundle verifier (lib/evidence.js says what it checks and how):
// Ed25519 signatures, accepted exactly as ed25519-dalek's verify_strict accepts them.

const crypto = require('node:crypto');


// ---- Ed25519, as ed25519-dalek's verify_strict decides -------------------------------------------
//
// node:crypto (OpenSSL) checks the signature equation; verify_strict also refuses a non-canonical
// s, an R that is not a point, and a small-order R or public key (OpenSSL accepts, for example,
// the identity key with R = identity and s = 0 on any message). Those checks are made here.

const P = (1n << 255n) - 19n;
const L = (1n << 252n) + 27742317777372353535851937790883648493n;

function modP(a) {
  const r = a % P;
  return r < 0n ? r + P : r;
}

function powP(base, exponent) {
  let result = 1n;
  let b = modP(base);
  let e = exponent;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
    e >>= 1n;
  }
  return result;
}

const invP = (a) => powP(a, P - 2n);
const EDWARDS_D = modP(-121665n * invP(121666n));
const SQRT_M1 = powP(2n, (P - 1n) / 4n);

/** A little-endian integer. */
function littleEndian(bytes) {
  let value = 0n;
  for (let at = bytes.length - 1; at >= 0; at--) value = (value << 8n) | BigInt(bytes[at]);
  return value;
}

/** curve25519-dalek's CompressedEdwardsY::decompress: the affine point, or null. */
function decompress(bytes) {
  const y = modP(littleEndian(bytes) & ((1n << 255n) - 1n));
  const yy = (y * y) % P;
  const u = modP(yy - 1n);
  const v = modP(EDWARDS_D * yy + 1n);
  const v3 = (((v * v) % P) * v) % P;
  const v7 = (((v3 * v3) % P) * v) % P;
  let x = (((u * v3) % P) * powP((u * v7) % P, (P - 5n) / 8n)) % P;
  const check = (((v * x) % P) * x) % P;
  if (check === modP(-u) && check !== u) x = (x * SQRT_M1) % P;
  else if (check !== u) return null;
  if (x & 1n) x = P - x;
  if (bytes[31] >> 7) x = modP(-x);
  return { x, y };
}

/** Twisted Edwards addition (a = -1), affine; complete on this curve. */
function edwardsAdd(p, q) {
  const t = (((((EDWARDS_D * p.x) % P) * q.x) % P) * ((p.y * q.y) % P)) % P;
  const x = modP((p.x * q.y + p.y * q.x) * invP(1n + t));
  const y = modP((p.y * q.y + p.x * q.x) * invP(modP(1n - t)));
  return { x, y };
}

/** Whether 8·point is the identity. */
function isSmallOrder(point) {
  let q = point;
  for (let i = 0; i < 3; i++) q = edwardsAdd(q, q);
  return q.x === 0n && q.y === 1n;
}

const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');

/** Whether `signature` is `key`'s Ed25519 signature of `message`, as verify_strict decides. */
function verifyStrict(key, message, signature) {
  if (signature.length !== 64) return false;
  if (littleEndian(signature.subarray(32)) >= L) return false;
  const r = decompress(signature.subarray(0, 32));
  if (r === null || isSmallOrder(r) || key.weak) return false;
  return crypto.verify(null, message, key.publicKey, signature);
}

module.exports = {
  decompress,
  isSmallOrder,
  SPKI_ED25519,
  verifyStrict,
};
