// The official TypeScript SDK (@modelcontextprotocol/sdk, pinned in package.json) as the client,
// through `warden gateway` (issue 31, items 7 and 11):
//
//   node client.mjs http URL STORE CONFIG                  the SDK server behind an HTTP gateway
//   node client.mjs stdio-sdk SERVER_PY STORE CONFIG       warden gateway --stdio -- python SERVER_PY stdio
//   node client.mjs stdio-everything SERVER_BIN STORE CONFIG  warden gateway --stdio -- server-everything
//
// For each: a permitted call whose receipt summary the SDK's typed CallToolResult carries in
// `_meta`, a refusal whose McpError `data._meta` carries the receipt, and a call the tool's
// schema rejects (refused -41017 with its receipt, never run); each receipt is then found in the
// store with the same id and result. Prints one line per check; exits 1 at the first failure.
// run.sh copies this file beside its node_modules (ESM resolves packages from the file's folder).

import { execFileSync } from "node:child_process";
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
  },
};

function transport() {
  if (mode === "http") return [PROFILES.http, new StreamableHTTPClientTransport(new URL(target))];
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

const [profile, channel] = transport();
const client = new Client({ name: "warden-interop-ts", version: "1.0.0" });
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
await client.close();

const receipts = JSON.parse(warden("receipts", "--json", "--last", "1000"));
for (const [id, result] of seen) {
  const stored = receipts.find((receipt) => receipt.receipt_id === id);
  check(`the store holds ${id} as ${result}`, stored?.result === result, stored);
}
const rejectedStored = receipts.find((receipt) => receipt.receipt_id === rejectedMeta.receipt_id);
check("the schema-rejected call's receipt says why", rejectedStored?.decision_reason === "schema_rejected", rejectedStored);
const chain = JSON.parse(warden("receipts", "--verify-chain", "--json"));
check("and the chain verifies", chain.ok === true, chain);
