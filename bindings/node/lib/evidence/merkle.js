'use strict';
// Part of the pure-JavaScript bundle verifier (lib/evidence.js says what it checks and how): the
// Merkle tree of RFC 9162: leaf and node hashes, inclusion and consistency proofs, the frontier.

const crypto = require('node:crypto');

const { U64_MAX, inc } = require('./common');

// ---- the Merkle tree (RFC 9162 §2.1) --------------------------------------------------------------

function sha256(...parts) {
  const hash = crypto.createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
}

const LEAF_PREFIX = Buffer.from([0x00]);
const NODE_PREFIX = Buffer.from([0x01]);
const EMPTY_ROOT = sha256();

/** The leaf hash of one receipt document: SHA-256(0x00 ‖ data). */
function leafHash(data) {
  return sha256(LEAF_PREFIX, bytesOf('leafHash(data)', data));
}

/** The hash of an interior node: SHA-256(0x01 ‖ left ‖ right). */
function nodeHash(left, right) {
  return sha256(NODE_PREFIX, hashOf('nodeHash(left)', left), hashOf('nodeHash(right)', right));
}

/** `value` as bytes (a Buffer, a Uint8Array or a string's UTF-8), else a TypeError. */
function bytesOf(what, value) {
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof Uint8Array) return value;
  throw new TypeError(`${what} must be a Buffer, a Uint8Array or a string`);
}

/** `value` as a 32-byte hash, else a TypeError. */
function hashOf(what, value) {
  if (!(value instanceof Uint8Array) || value.length !== 32) throw new TypeError(`${what} must be 32 bytes`);
  return value;
}

/** `value` (a number or a bigint) as a u64 BigInt, else a TypeError. */
function u64Of(what, value) {
  const big = typeof value === 'bigint' ? value : Number.isSafeInteger(value) ? BigInt(value) : null;
  if (big === null || big < 0n || big > U64_MAX) throw new TypeError(`${what} must be an integer from 0 to 2^64 - 1`);
  return big;
}

/** A proof: an array of 32-byte hashes, else a TypeError. */
function proofOf(what, proof) {
  if (!Array.isArray(proof)) throw new TypeError(`${what} must be an array of 32-byte hashes`);
  return proof.map((hash, at) => hashOf(`${what}[${at}]`, hash));
}

/**
 * Whether `proof` (an RFC 9162 audit path) shows the leaf hash `leaf` at `index` in the tree of
 * `size` leaves with root `root` (RFC 9162 §2.1.3.2).
 */
function checkInclusion(proof, size, root, index, leaf) {
  const path = proofOf('checkInclusion(proof)', proof);
  const n = u64Of('checkInclusion(size)', size);
  const m = u64Of('checkInclusion(index)', index);
  hashOf('checkInclusion(root)', root);
  let r = hashOf('checkInclusion(leaf)', leaf);
  if (m >= n) return false;
  let fn = m;
  let sn = n - 1n;
  for (const p of path) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      r = nodeHash(p, r);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && Buffer.from(r).equals(root);
}

/**
 * Whether `proof` shows the tree of `oldSize` leaves with root `oldRoot` is a prefix of the tree
 * of `newSize` leaves with root `newRoot` (tree::check_consistency: equal sizes need an empty
 * proof and equal roots; otherwise RFC 9162 §2.1.4.2, with 1 <= oldSize < newSize).
 */
function checkConsistency(proof, oldSize, oldRoot, newSize, newRoot) {
  const path = proofOf('checkConsistency(proof)', proof);
  const first = u64Of('checkConsistency(oldSize)', oldSize);
  const second = u64Of('checkConsistency(newSize)', newSize);
  const firstHash = hashOf('checkConsistency(oldRoot)', oldRoot);
  const secondHash = hashOf('checkConsistency(newRoot)', newRoot);
  if (first === second) return path.length === 0 && Buffer.from(firstHash).equals(secondHash);
  if (first < 1n || first > second || path.length === 0) return false;
  const hashes = (first & (first - 1n)) === 0n ? [firstHash, ...path] : path;
  let fn = first - 1n;
  let sn = second - 1n;
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = hashes[0];
  let sr = hashes[0];
  for (const c of hashes.slice(1)) {
    if (sn === 0n) return false;
    if ((fn & 1n) === 1n || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  return sn === 0n && Buffer.from(fr).equals(firstHash) && Buffer.from(sr).equals(secondHash);
}

/** A tree built one leaf at a time in constant memory: its complete subtrees, largest first. */
class Frontier {
  /** @param {bigint} size @param {{level: number, hash: Buffer}[]} subtrees */
  constructor(size = 0n, subtrees = []) {
    this.size = size;
    this.stack = subtrees;
  }

  /** Append one leaf hash. */
  push(leaf) {
    let hash = leaf;
    let level = 0;
    while (this.stack.length > 0 && this.stack[this.stack.length - 1].level === level) {
      hash = nodeHash(this.stack.pop().hash, hash);
      level++;
    }
    this.stack.push({ level, hash });
    this.size = inc(this.size);
  }

  /** The root of the leaves so far (the empty tree's is SHA-256 of nothing). */
  root() {
    if (this.stack.length === 0) return EMPTY_ROOT;
    let hash = this.stack[this.stack.length - 1].hash;
    for (let at = this.stack.length - 2; at >= 0; at--) hash = nodeHash(this.stack[at].hash, hash);
    return hash;
  }
}

module.exports = {
  sha256,
  leafHash,
  nodeHash,
  checkInclusion,
  checkConsistency,
  Frontier,
};
