'use strict';
// Part of the pure-JavaScript bundle verifier (lib/evidence.js says what it checks and how):
// reading the bundle's files: paths, I/O errors in Rust's words, JSON files, receipt lines.

const fs = require('node:fs');
const util = require('node:util');

const { CHUNK, fail, utf8OrNull, quoted, decodeHash } = require('./common');
const { JsonRefusal, parseTyped } = require('./json');

// ---- reading the bundle's files ---------------------------------------------------------------------

/** `dir` joined with `name` as Rust's Path::join joins them (an absolute `name` replaces `dir`). */
function joinPath(dir, name) {
  if (name.startsWith('/') || dir === '') return name;
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

/** An I/O error in the words Rust's io::Error uses ("No such file or directory (os error 2)"). */
function ioMessage(error) {
  if (typeof error.errno === 'number' && error.errno < 0) {
    const known = util.getSystemErrorMap().get(error.errno);
    if (known) return `${known[1].charAt(0).toUpperCase()}${known[1].slice(1)} (os error ${-error.errno})`;
  }
  return error.message;
}

/** A file of the bundle as text (read_text): a missing or non-UTF-8 file is bundle_malformed. */
function readText(dir, name) {
  let bytes;
  try {
    bytes = fs.readFileSync(joinPath(dir, name));
  } catch (error) {
    return fail('bundle_malformed', `cannot read ${name}: ${ioMessage(error)}`);
  }
  const text = utf8OrNull(bytes);
  if (text === null) fail('bundle_malformed', `cannot read ${name}: stream did not contain valid UTF-8`);
  return text;
}

/** A JSON file of the bundle read as `type` (parse_file): else bundle_malformed. */
function parseFile(dir, name, type) {
  const text = readText(dir, name);
  try {
    return parseTyped(text, type);
  } catch (error) {
    if (error instanceof JsonRefusal) fail('bundle_malformed', `${name} is not what it should be: ${error.message}`);
    throw error;
  }
}

/** Base64 hashes of a bundle file, decoded: else bundle_malformed. */
function hashes(list, name) {
  return list.map((text) => decodeHash(text) ?? fail('bundle_malformed', `${name} holds ${quoted(text)}, not a base64 SHA-256`));
}

/** The lines of receipts.jsonl as Buffers, each with its "\n" when it has one, read in chunks. */
function* fileLines(fd) {
  const chunk = Buffer.alloc(CHUNK);
  let pending = [];
  for (;;) {
    let read;
    try {
      read = fs.readSync(fd, chunk, 0, CHUNK, null);
    } catch (error) {
      fail('bundle_malformed', `cannot read receipts.jsonl: ${ioMessage(error)}`);
    }
    if (read === 0) break;
    let start = 0;
    for (;;) {
      const end = chunk.indexOf(0x0a, start);
      if (end < 0 || end >= read) break;
      pending.push(chunk.subarray(start, end + 1));
      yield Buffer.concat(pending);
      pending = [];
      start = end + 1;
    }
    if (start < read) pending.push(Buffer.from(chunk.subarray(start, read)));
  }
  if (pending.length > 0) yield Buffer.concat(pending);
}

module.exports = {
  joinPath,
  ioMessage,
  readText,
  parseFile,
  hashes,
  fileLines,
};
