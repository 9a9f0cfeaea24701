// The official TypeScript SDK (@modelcontextprotocol/sdk, pinned in package.json) as the client,
// through `warden gateway` (issue 31, items 7 and 11):
//
//   node client.mjs http URL STORE CONFIG                  the SDK server behind an HTTP gateway
//   node client.mjs stdio-sdk SERVER_PY STORE CONFIG       warden gateway --stdio -- python SERVER_PY stdio
//   node client.mjs stdio-everything SERVER_BIN STORE CONFIG  warden gateway --stdio -- server-everything
//   node client.mjs http-everything URL STORE CONFIG       server-everything (Streamable HTTP) behind an HTTP gateway
//
// For each: a permitted call whose receipt summary the SDK's typed CallToolResult carries in
// `_meta`, a refusal whose McpError `data._meta` carries the receipt, and a call the tool's
// schema rejects (refused -41017 with its receipt, never run); each receipt is then found in the
// store with the same id and result. Against server-everything also a task-returning tool
// (issue 31, item 1): the client declares the tasks capability and calls
// `simulate-research-query` as a task with the SDK's own task API (it polls `tasks/get` and
// asks `tasks/result` through the gateway); the result carries the receipt, the store holds the
// effect committed with one receipt whose `result_sha256` is the digest of that result, and the
// same call again is refused -41004 without reaching the server (its `tasks/list` still shows
// one task). Prints one line per check; exits 1 at the first failure.
// run.sh copies this file beside its node_modules (ESM resolves packages from the file's folder).

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import process from "node:process";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

const [mode, target, store, config] = process.argv.slice(2);
const KEY = "dev.warden/receipt";

function check(label, condition, detail) {
  console.log((condition ? "ok   " : "FAIL ") + label + (condition || detail === undefined ? "" : `: ${JSON.stringify(detail)}`));
  if (!condition) process.exit(1);
}

function warden(...args) {
  const env = { ...process.env, WARDEN_STORE: store, WARDEN_CONFIG: config };
  return execFileSync("warden", args, { env, encoding: "utf8" });
}

// What each upstream offers: a tool the document allows, one it denies, and arguments its
// schema rejects.
const PROFILES = {
  http: {
    alias: "acme",
    listed: ["create_refund", "read_only"],
    allowed: ["create_refund", { payment_id: "ts-1", amount: 100 }],
    denied: ["create_refund", { payment_id: "ts-2", amount: 5000000 }],
    rejected: ["create_refund", { payment_id: "ts-3", amount: "a hundred" }],
  },
  everything: {
    alias: "everything",
    listed: ["echo", "get-sum"],
    allowed: ["echo", { message: "hello from typescript" }],
    denied: ["get-sum", { a: 5000, b: 1 }],
    rejected: ["get-sum", { a: "five", b: 1 }],
    task: ["simulate-research-query", { topic: "warden-interop", ambiguous: false }],
    effect: "research:warden-interop",
  },
};

function transport() {
  if (mode === "http") return [PROFILES.http, new StreamableHTTPClientTransport(new URL(target))];
  if (mode === "http-everything") return [PROFILES.everything, new StreamableHTTPClientTransport(new URL(target))];
  const everything = mode === "stdio-everything";
  const profile = everything ? PROFILES.everything : PROFILES.http;
  const server = everything ? [target, "stdio"] : ["python3", target, "stdio"];
  if (!everything && process.env.INTEROP_PYTHON) server[0] = process.env.INTEROP_PYTHON;
  const args = ["gateway", "--stdio", "--alias", profile.alias, "--principal", "ts-agent/ada",
    "--config", config, "--store", store, "--", ...server];
  return [profile, new StdioClientTransport({ command: "warden", args, stderr: "ignore" })];
}

async function call(client, [name, args]) {
  try {
    return { result: await client.callTool({ name, arguments: args }, CallToolResultSchema) };
  } catch (error) {
    return { error };
  }
}

// The canonical form the gateway hashes a result in: compact JSON, keys sorted.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

// The result as the upstream sent it: the gateway's receipt summary is the one member it adds.
function upstreamDigest(result) {
  const meta = { ...result._meta };
  delete meta[KEY];
  const sent = { ...result, _meta: meta };
  if (Object.keys(meta).length === 0) delete sent._meta;
  return "sha256:" + createHash("sha256").update(canonical(sent)).digest("hex");
}

// One task-augmented call through the SDK's task API: every message it yields, in order.
async function callAsTask(client, [name, args]) {
  const messages = [];
  const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema,
    { task: { ttl: 60000 } });
  for await (const message of stream) messages.push(message);
  return messages;
}

// Linux only (/proc): the pids whose parent is `pid`; none elsewhere.
function childrenOf(pid) {
  let entries;
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const found = [];
  for (const entry of entries.filter((name) => /^[0-9]+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(ppid) === pid) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const [profile, channel] = transport();
// The tasks capability: server-everything lists its task tool, and the SDK sends task requests,
// only for a client that declares it.
const capabilities = profile.task ? { tasks: { list: {}, cancel: {}, requests: {} } } : {};
const client = new Client({ name: "warden-interop-ts", version: "1.0.0" }, { capabilities });
await client.connect(channel);
const { tools } = await client.listTools();
const names = tools.map((tool) => tool.name);
check(`tools/list is relayed (${mode})`, profile.listed.every((name) => names.includes(name)), names);

const seen = [];
const allowed = await call(client, profile.allowed);
const meta = allowed.result?._meta?.[KEY];
check("a permitted call: the typed CallToolResult carries the receipt in _meta",
  allowed.result && !allowed.result.isError && meta?.result === "committed" && /^rct_/.test(meta?.receipt_id ?? ""),
  allowed.result ?? String(allowed.error));
seen.push([meta.receipt_id, "committed"]);

const denied = await call(client, profile.denied);
const refusal = denied.error instanceof McpError ? denied.error : undefined;
const deniedMeta = refusal?.data?._meta?.[KEY];
check("a refusal: McpError -41001 whose data._meta carries the receipt",
  refusal?.code === -41001 && deniedMeta?.result === "denied" && deniedMeta?.action_id === refusal.data.action_id
    && /^rct_/.test(deniedMeta?.receipt_id ?? ""),
  refusal ? { code: refusal.code, data: refusal.data } : String(denied.error ?? JSON.stringify(denied.result)));
seen.push([deniedMeta.receipt_id, "denied"]);

const rejected = await call(client, profile.rejected);
const schema = rejected.error instanceof McpError ? rejected.error : undefined;
const rejectedMeta = schema?.data?._meta?.[KEY];
check("a schema-rejected call: McpError -41017 with its pointer and receipt, nothing run",
  schema?.code === -41017 && schema.data.reason === "schema_rejected" && typeof schema.data.pointer === "string"
    && rejectedMeta?.result === "denied" && /^rct_/.test(rejectedMeta?.receipt_id ?? ""),
  schema ? { code: schema.code, data: schema.data } : String(rejected.error ?? JSON.stringify(rejected.result)));
seen.push([rejectedMeta.receipt_id, "denied"]);

let task;
if (profile.task) {
  check(`the task tool ${profile.task[0]} is listed`, names.includes(profile.task[0]), names);
  const messages = await callAsTask(client, profile.task);
  const kinds = messages.map((message) => message.type);
  const created = messages.find((message) => message.type === "taskCreated")?.task;
  const statuses = messages.filter((message) => message.type === "taskStatus").map((message) => message.task.status);
  const final = messages.at(-1);
  check("a task: the SDK got a handle, polled tasks/get through the gateway until completed, then the result",
    typeof created?.taskId === "string" && statuses.at(-1) === "completed" && final?.type === "result",
    messages.map((message) => ({ type: message.type, status: message.task?.status, error: message.error?.message })));
  const taskMeta = final.result._meta?.[KEY];
  check("its tasks/result, a typed CallToolResult, carries the committed receipt with the result's digest",
    !final.result.isError && taskMeta?.result === "committed" && /^rct_/.test(taskMeta?.receipt_id ?? "")
      && taskMeta?.task_id === created.taskId && taskMeta?.effect_key === profile.effect
      && /^sha256:[0-9a-f]{64}$/.test(taskMeta?.result_sha256 ?? ""),
    final.result._meta);
  const digest = upstreamDigest(final.result);
  check("that digest is sha256 over the upstream's result (compact JSON, keys sorted)", taskMeta.result_sha256 === digest,
    { receipt: taskMeta.result_sha256, computed: digest });
  task = { id: created.taskId, meta: taskMeta, kinds };

  const again = await callAsTask(client, profile.task);
  const duplicate = again.length === 1 && again[0].type === "error" ? again[0].error : undefined;
  check("the same task call again: McpError -41004 duplicate_effect, no handle",
    duplicate instanceof McpError && duplicate.code === -41004 && duplicate.data?.error === "warden.duplicate_effect"
      && duplicate.data?.state === "committed" && duplicate.data?.effect_key === profile.effect,
    again.map((message) => ({ type: message.type, code: message.error?.code, data: message.error?.data })));
  const listed = await client.experimental.tasks.listTasks();
  check("and it never reached the server: its tasks/list (relayed) holds the one task",
    listed.tasks.length === 1 && listed.tasks[0].taskId === task.id && listed.tasks[0].status === "completed",
    listed.tasks);
}
// The SDK's close() ends the gateway's stdin, then SIGTERMs it at 2 s and SIGKILLs it at 4 s; a
// gateway killed so never stops its child (docs/GATEWAY.md, "Not done yet (issue 31)"), which
// server-everything holding a task outlives. Said, not failed on, and that child is stopped here.
const upstream = channel.pid ? childrenOf(channel.pid) : [];
await client.close();
for (const pid of upstream.filter(alive)) {
  console.log(`note the gateway's child ${pid} outlived the SDK's close (a known gap, docs/GATEWAY.md); stopping it`);
  process.kill(pid, "SIGTERM");
}

const receipts = JSON.parse(warden("receipts", "--json", "--last", "1000"));
for (const [id, result] of seen) {
  const stored = receipts.find((receipt) => receipt.receipt_id === id);
  check(`the store holds ${id} as ${result}`, stored?.result === result, stored);
}
const rejectedStored = receipts.find((receipt) => receipt.receipt_id === rejectedMeta.receipt_id);
check("the schema-rejected call's receipt says why", rejectedStored?.decision_reason === "schema_rejected", rejectedStored);
if (task) {
  const record = JSON.parse(warden("inspect", profile.effect, "--json"));
  const mine = record.receipts.filter((receipt) => receipt.action_id === task.meta.action_id);
  check(`the store holds ${profile.effect} committed, attempt 1`,
    record.effect?.state === "committed" && record.effect?.attempt === 1 && record.effect?.action_id === task.meta.action_id,
    record.effect);
  check("with exactly one receipt for the task's action, committed, with the digest the client saw",
    mine.length === 1 && mine[0].receipt_id === task.meta.receipt_id && mine[0].result === "committed"
      && mine[0].result_sha256 === task.meta.result_sha256,
    mine);
  const suspended = record.events.filter((event) => event.type === "EXECUTION_SUSPENDED");
  const started = record.events.filter((event) => event.type === "EXECUTION_STARTED");
  check("held under the task id while it ran, started once",
    suspended.length === 1 && suspended[0].data.reason === "task" && suspended[0].data.task_id === task.id
      && started.length === 1,
    record.events.map((event) => ({ type: event.type, data: event.data })));
  const others = record.receipts.filter((receipt) => receipt.action_id !== task.meta.action_id);
  check("the refused second call has its own receipt: blocked as a duplicate, no digest",
    others.length === 1 && others[0].result === "blocked" && others[0].decision_reason === "duplicate"
      && others[0].result_sha256 == null,
    others);
}
const chain = JSON.parse(warden("receipts", "--verify-chain", "--json"));
check("and the chain verifies", chain.ok === true, chain);
