#!/usr/bin/env python3
"""Regenerate ctrlrun-0.12.2/policies_v6_v8.json: ctrlrun.policy/v6-v8 documents run through ctrlrun.

    python3 -m venv target/ctrlrun-venv
    target/ctrlrun-venv/bin/pip install ctrlrun==0.12.2
    target/ctrlrun-venv/bin/python tests/vectors/generate_policies_v6_v8.py

Each row is a document written here (`policy_yaml`) and what ctrlrun 0.12.2 made of it: its
`policy_hash`, the decision and reason for each case, and every action's `mcp`/`upstream`
options (`pins`), or its `error` when ctrlrun refuses it. ctrlrun reads the documents with
`tests/fixtures/ctrlrun-v8/` as its working directory, where the certificate files they name
live. `warden_refuses` is not ctrlrun's output: it is this project's statement that Warden
refuses a document ctrlrun loads (a v6/v7 feature Warden does not implement), or, on a row
ctrlrun refuses too, where Warden's refusal must point (`path`, and words the message must
contain). `tests/policy_vectors.rs` replays the file without ctrlrun installed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import ssl
from pathlib import Path

from ctrlrun.action import Action, Principal
from ctrlrun.errors import PolicyError
from ctrlrun.policy import Policy

VERSION = importlib.metadata.version("ctrlrun")
assert VERSION == "0.12.2", VERSION

logging.getLogger("ctrlrun").setLevel(logging.ERROR)

HERE = Path(__file__).resolve().parent
OUT = HERE / "ctrlrun-0.12.2" / "policies_v6_v8.json"
FIXTURES = HERE.parent / "fixtures" / "ctrlrun-v8"


def digest(name: str) -> str:
    der = ssl.PEM_cert_to_DER_cert((FIXTURES / name).read_text())
    return "sha256:" + hashlib.sha256(der).hexdigest()


CERT = digest("upstream.pem")
OTHER = digest("other.pem")
SCHEMA_PIN = "sha256:" + "ab" * 32

# The body shared by the documents that differ only in their schema line.
GATEWAY_BODY = f"""actions:
  mcp.acme.create_refund:
    effect: "refund:{{payment_id}}"
    max_attempts: 3
    mcp: {{not_executed_on_error: true}}
    upstream:
      tls_cert_sha256: ["{CERT}", "{OTHER}"]
      tls_cert_file: [upstream.pem]
      tool_schema_sha256: "{SCHEMA_PIN}"
    rules:
      - when: {{amount_lte: 5000}}
        decision: allow
      - when: {{amount_lte: 50000}}
        decision: approve
      - decision: deny
  mcp.acme.lookup:
    upstream: {{tool_schema_sha256: "{SCHEMA_PIN}"}}
    decision: allow
  customer.read:
    decision: allow
"""

GATEWAY_CASES = [
    ("mcp.acme.create_refund", {"payment_id": "p1", "amount": 100}),
    ("mcp.acme.create_refund", {"payment_id": "p1", "amount": 20000}),
    ("mcp.acme.create_refund", {"payment_id": "p1", "amount": 90000}),
    ("mcp.acme.create_refund", {"payment_id": "p1"}),
    ("mcp.acme.lookup", {"id": "c1"}),
    ("customer.read", {}),
    ("mcp.acme.delete", {}),
]

PLAIN_BODY = """environment: staging
mode: observe
version: "2026-12 r1"
controls: {}
authority: ~
actions:
  mcp.files.write:
    effect: "file:{path}"
    mcp: {not_executed_on_error: false}
    data: {}
    controls: []
    rules:
      - when: {path_in: [a.txt, b.txt]}
        decision: allow
      - decision: approve
  mcp.files.read:
    decision: allow
"""

PLAIN_CASES = [
    ("mcp.files.write", {"path": "a.txt"}),
    ("mcp.files.write", {"path": "c.txt"}),
    ("mcp.files.read", {"path": "a.txt"}),
]


def refuses(path: str, *words: str) -> dict:
    return {"path": path, "names": list(words)}


ROWS: list[dict] = [
    # --- loaded by both: only the gateway keys added -----------------------------------
    {"name": "v6, the v5 keys and mcp", "yaml": "schema: ctrlrun.policy/v6\n" + PLAIN_BODY, "cases": PLAIN_CASES},
    {"name": "v7, the v5 keys and mcp", "yaml": "schema: ctrlrun.policy/v7\n" + PLAIN_BODY, "cases": PLAIN_CASES},
    {"name": "v8, the v5 keys and mcp", "yaml": "schema: ctrlrun.policy/v8\n" + PLAIN_BODY, "cases": PLAIN_CASES},
    {"name": "v8 with upstream pins", "yaml": "schema: ctrlrun.policy/v8\n" + GATEWAY_BODY, "cases": GATEWAY_CASES},
    {
        "name": "v8 pins in ctrlrun's other spellings",
        "yaml": f"""schema: ctrlrun.policy/v8
actions:
  mcp.acme.one:
    upstream: {{tls_cert_sha256: "{CERT}", tls_cert_file: upstream.pem}}
    decision: allow
  mcp.acme.empty_list:
    upstream: {{tls_cert_sha256: [], tool_schema_sha256: ~}}
    decision: allow
  mcp.acme.null:
    upstream: ~
    decision: deny
  mcp.acme.empty:
    upstream: {{}}
    mcp: {{}}
    decision: approve
""",
        "cases": [("mcp.acme.one", {}), ("mcp.acme.null", {}), ("mcp.acme.empty", {"x": 1})],
    },
    {
        "name": "v6 with one approval spelled out",
        "yaml": """schema: ctrlrun.policy/v6
actions:
  mcp.acme.pay:
    approvals_required: 1
    effect: "pay:{id}"
    decision: approve
""",
        "cases": [("mcp.acme.pay", {"id": "x"})],
    },
    # --- refused by both ---------------------------------------------------------------
    {
        "name": "a certificate file holding two certificates",
        "yaml": f"schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    upstream: {{tls_cert_sha256: [\"{CERT}\", \"{OTHER}\"], tls_cert_file: [bundle.pem]}}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream.tls_cert_file", "holds 2 certificates", "a file of its own"),
    },
    {
        "name": "upstream in a v7 document",
        "yaml": f"schema: ctrlrun.policy/v7\nactions:\n  mcp.a.b:\n    upstream: {{tls_cert_sha256: [\"{CERT}\"]}}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream", "needs 'schema: ctrlrun.policy/v8'"),
    },
    {
        "name": "upstream in a v5 document",
        "yaml": "schema: ctrlrun.policy/v5\nactions:\n  mcp.a.b:\n    upstream: {}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream", "needs 'schema: ctrlrun.policy/v8'"),
    },
    {
        "name": "approvals_required in a v5 document",
        "yaml": "schema: ctrlrun.policy/v5\nactions:\n  a:\n    approvals_required: 1\n    decision: approve\n",
        "warden_refuses": refuses("actions.a.approvals_required", "needs 'schema: ctrlrun.policy/v6'"),
    },
    {
        "name": "an unknown upstream key",
        "yaml": f"schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    upstream: {{tls_cert_sha: [\"{CERT}\"]}}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream.tls_cert_sha", "unknown key 'tls_cert_sha'"),
    },
    {
        "name": "an unknown mcp key in v8",
        "yaml": "schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    mcp: {retry: true}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.mcp.retry", "unknown key 'retry'"),
    },
    {
        "name": "not_executed_on_error not a boolean",
        "yaml": "schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    mcp: {not_executed_on_error: 1}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.mcp.not_executed_on_error", "true or false"),
    },
    {
        "name": "a digest in capitals",
        "yaml": f"schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    upstream: {{tls_cert_sha256: [\"{CERT.upper()}\"]}}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream.tls_cert_sha256", "64 lowercase hex"),
    },
    {
        "name": "a short tool schema digest",
        "yaml": "schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    upstream: {tool_schema_sha256: 'sha256:abc'}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream.tool_schema_sha256", "64 lowercase hex"),
    },
    {
        "name": "upstream a list",
        "yaml": "schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    upstream: [x]\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream", "must be a mapping"),
    },
    {
        "name": "a certificate file the digests do not list",
        "yaml": f"schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    upstream: {{tls_cert_sha256: [\"{CERT}\"], tls_cert_file: [other.pem]}}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream.tls_cert_file", "does not list"),
    },
    {
        "name": "a missing certificate file",
        "yaml": f"schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    upstream: {{tls_cert_sha256: [\"{CERT}\"], tls_cert_file: [absent.pem]}}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream.tls_cert_file", "cannot read"),
    },
    {
        "name": "approvals_required zero",
        "yaml": "schema: ctrlrun.policy/v6\nactions:\n  a:\n    approvals_required: 0\n    decision: approve\n",
        "warden_refuses": refuses("actions.a.approvals_required", "M-of-N"),
    },
    {
        "name": "the policy-change action in a v5 document",
        "yaml": "schema: ctrlrun.policy/v5\nactions:\n  ctrlrun.policy.change: {decision: approve}\n",
        "warden_refuses": refuses("actions.ctrlrun.policy.change", "needs 'schema: ctrlrun.policy/v6'"),
    },
    {
        "name": "tasks on a grant in a v6 document",
        "yaml": "schema: ctrlrun.policy/v6\nauthority:\n  grants:\n    - {id: g1, subject: {agent: agent-a}, actions: [a], tasks: ['t:*']}\nactions:\n  a: {decision: allow}\n",
        "warden_refuses": refuses("authority", "'authority' section in a ctrlrun document"),
    },
    {
        "name": "a later schema",
        "yaml": "schema: ctrlrun.policy/v9\nactions: {}\n",
        "warden_refuses": refuses("schema", "unknown schema"),
    },
    # --- loaded by ctrlrun, refused by Warden: v6/v7 features it does not implement ---
    {
        "name": "M-of-N approvals",
        "yaml": "schema: ctrlrun.policy/v6\nactions:\n  mcp.acme.pay:\n    approvals_required: 2\n    decision: approve\n",
        "warden_refuses": refuses("actions.mcp.acme.pay.approvals_required", "M-of-N approvals", "approval: {required: N}"),
    },
    {
        "name": "the policy-change action",
        "yaml": "schema: ctrlrun.policy/v6\nactions:\n  ctrlrun.policy.change: {decision: approve}\n",
        "warden_refuses": refuses("actions.ctrlrun.policy.change", "policy-change flow", "remove the entry"),
    },
    {
        "name": "a control registry with an approver role",
        "yaml": "schema: ctrlrun.policy/v6\ncontrols:\n  pci: {title: Card data, approver_role: finance}\nactions:\n  a: {decision: approve, controls: [pci]}\n",
        "warden_refuses": refuses("controls", "control registry"),
    },
    {
        "name": "tasks and budgets on a grant",
        "yaml": "schema: ctrlrun.policy/v7\nauthority:\n  grants:\n    - {id: g1, subject: {agent: agent-a}, actions: [a], tasks: ['t:*'], budgets: [{metric: amount, limit: 100, window: P1D}]}\nactions:\n  a: {decision: allow}\n",
        "warden_refuses": refuses("authority", "'tasks' and 'budgets' included"),
    },
    {
        # Python's `$` matches before a final newline, so ctrlrun keeps a pin no digest can equal.
        "name": "a digest ending in a newline",
        "yaml": f"schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    upstream: {{tool_schema_sha256: \"{SCHEMA_PIN}\\n\"}}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream.tool_schema_sha256", "64 lowercase hex"),
    },
    {
        "name": "a certificate file with no digest",
        "yaml": "schema: ctrlrun.policy/v8\nactions:\n  mcp.a.b:\n    upstream: {tls_cert_file: [upstream.pem]}\n    decision: allow\n",
        "warden_refuses": refuses("actions.mcp.a.b.upstream.tls_cert_file", "does not list"),
    },
]


def pins(policy: Policy) -> dict:
    out = {}
    for name in sorted(policy.actions):
        pin = policy.upstream_pin(name)
        out[name] = {
            "not_executed_on_error": policy.mcp_options(name).not_executed_on_error,
            "tls_cert_sha256": list(pin.cert_sha256),
            "tls_cert_file": list(pin.certs),
            "tls_cert_count": sum((FIXTURES / path).read_text().count("BEGIN CERTIFICATE") for path in pin.certs),
            "tool_schema_sha256": pin.tool_schema_sha256,
        }
    return out


def run(row: dict) -> dict:
    out = {"name": row["name"], "policy_yaml": row["yaml"]}
    if "warden_refuses" in row:
        out["warden_refuses"] = row["warden_refuses"]
    try:
        policy = Policy.from_yaml(row["yaml"], source="<vector>")
    except PolicyError as refused:
        out["error"] = "PolicyError"
        out["ctrlrun_message"] = str(refused)
        return out
    out["policy_hash"] = policy.policy_hash
    out["pins"] = pins(policy)
    out["cases"] = []
    for name, arguments in row.get("cases", []):
        action = Action(name=name, arguments=arguments, principal=Principal(agent="agent-a"))
        evaluation = policy.evaluate(action)
        out["cases"].append(
            {
                "action": name,
                "arguments_json": json.dumps(arguments, sort_keys=True),
                "decision": str(evaluation.decision.value),
                "reason": evaluation.reason,
            }
        )
    return out


def main() -> None:
    os.chdir(FIXTURES)
    rows = [run(row) for row in ROWS]
    OUT.write_text(json.dumps(rows, indent=1, ensure_ascii=True) + "\n")
    loaded = sum("error" not in row for row in rows)
    print(f"{OUT}: {len(rows)} rows, {loaded} loaded by ctrlrun")


if __name__ == "__main__":
    main()
