#!/usr/bin/env python3
"""Regenerate the authority vectors in ctrlrun-0.12.2/ from the public ctrlrun package.

    python3 -m venv target/ctrlrun-venv
    target/ctrlrun-venv/bin/pip install ctrlrun==0.12.2
    target/ctrlrun-venv/bin/python tests/vectors/generate_authority.py

Inputs are drawn from a seeded generator over small pools (so matches, refusals and boundary
instants come up often); every expected value is what ctrlrun 0.12.2 computed for that input.
The Rust suite (`tests/authority_vectors.rs`) replays the files without ctrlrun installed.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import random
import sys
from datetime import datetime
from pathlib import Path


import ctrlrun.authority
from ctrlrun.action import Action, Principal
from ctrlrun.authority import Authority, contains, grant_from_yaml, matches, validate_pattern
from ctrlrun.errors import AuthorityEscalation, IdentityError, InvalidArgument
from ctrlrun.state import InMemoryStateStore

VERSION = importlib.metadata.version("ctrlrun")
assert VERSION == "0.12.2", VERSION

# ctrlrun logs every constraint it could not evaluate; the vectors record the outcome instead.
logging.getLogger("ctrlrun").setLevel(logging.ERROR)

OUT = Path(__file__).resolve().parent / "ctrlrun-0.12.2"
SEED = 20261101
SEPARATORS = {"subject": None, "action": ".", "resource": ":", "task": ":"}

# --- patterns -------------------------------------------------------------------------------

SEGMENTS = ["a", "ab", "b", "abc", "a*", "ab*", "*", "**", "", "a?", "[a]", "*a", "a**", "A"]
VALUE_SEGMENTS = ["a", "ab", "abc", "b", "", "A", "ba"]


def joined(rng: random.Random, pool: list[str], separator: str | None) -> str:
    count = rng.randint(1, 4)
    parts = [rng.choice(pool) for _ in range(count)]
    glue = separator if separator is not None else rng.choice(["", ".", ":"])
    return glue.join(parts)


def pattern_vectors() -> dict:
    rng = random.Random(SEED)
    validity, matching, containment = [], [], []
    for kind, separator in SEPARATORS.items():
        patterns = {joined(rng, SEGMENTS, separator) for _ in range(600)}
        valid = []
        for pattern in sorted(patterns):
            try:
                validate_pattern(pattern, separator=separator, where="v")
                ok = True
                valid.append(pattern)
            except InvalidArgument:
                ok = False
            validity.append({"kind": kind, "pattern": pattern, "valid": ok})
        values = sorted({joined(rng, VALUE_SEGMENTS, separator) for _ in range(60)})
        for pattern in valid:
            for value in rng.sample(values, min(8, len(values))):
                matching.append({"kind": kind, "pattern": pattern, "value": value,
                                 "matches": matches(pattern, value, separator=separator)})
        for _ in range(700):
            parent, child = rng.choice(valid), rng.choice(valid)
            containment.append({"kind": kind, "parent": parent, "child": child,
                                "contains": contains(parent, child, separator=separator)})
    return {"validity": validity, "matches": matching, "contains": containment}


# --- grants, delegations, evaluations ------------------------------------------------------

AGENT_PATTERNS = ["finance-*", "finance-1", "support-*", "*", "ops"]
USER_PATTERNS = ["alice", "a*", "bob"]
CONCRETE_AGENTS = ["finance-1", "finance-2", "support-1", "support-2", "ops"]
USERS = [None, "alice", "bob", "amy"]
ACTION_PATTERNS = ["stripe.refund", "stripe.*", "stripe.**", "stripe.re*", "**", "mail.send", "*.send",
                   "customer.*", "stripe.refund.partial"]
ACTIONS = ["stripe.refund", "stripe.charge", "stripe.refund.partial", "mail.send", "customer.read", "sms.send"]
RESOURCE_PATTERNS = ["customer:*", "customer:acme", "customer:acme:**", "vendor:*", "cust*:acme", "customer:a*"]
RESOURCES = [None, "customer:acme", "customer:beta", "customer:acme:eu", "vendor:x"]
TASK_PATTERNS = ["close:*", "close:q4", "payroll:**", "close:q*"]
TASKS = [None, "close:q4", "close:q1", "payroll:run:1"]
ENVIRONMENTS = ["production", "staging", "dev"]
INSTANTS = ["2026-11-15T00:00:00Z", "2026-12-01T00:00:00Z", "2026-11-15T01:00:00+01:00", "2027-01-01T00:00:00Z"]
NOWS = ["2026-10-31T00:00:00Z", "2026-11-15T00:00:00Z", "2026-11-15T00:00:00.000001Z",
        "2026-12-01T00:00:00Z", "2026-12-01T00:00:00.000001Z"]
CONSTRAINTS = [("amount_lte", [1000, 5000, 100000]), ("amount_lt", [5000, 100001]), ("amount_gte", [0, 10]),
               ("amount_gt", [-1, 999]), ("currency_in", [["eur"], ["eur", "usd"], ["usd", "gbp"]]),
               ("region_eq", ["eu", "us"]), ("region_neq", ["us"])]
BUDGETS = [{"metric": "count", "limit": 10, "window": "PT1H"}, {"metric": "count", "limit": 100, "window": "P1D"},
           {"metric": "amount", "limit": 50000, "window": "P1D"}, {"metric": "amount", "limit": 5000, "window": "PT1H"}]


def maybe(rng: random.Random, p: float) -> bool:
    return rng.random() < p


def subset(rng: random.Random, pool: list, low: int = 1, high: int = 2) -> list:
    return rng.sample(pool, rng.randint(low, min(high, len(pool))))


def random_grant(rng: random.Random, ident: str | None) -> dict:
    grant: dict = {}
    if ident is not None:
        grant["id"] = ident
    subject = {}
    if maybe(rng, 0.85):
        subject["agent"] = rng.choice(AGENT_PATTERNS)
    if maybe(rng, 0.35) or not subject:
        subject["user"] = rng.choice(USER_PATTERNS)
    grant["subject"] = subject
    grant["actions"] = subset(rng, ACTION_PATTERNS)
    if maybe(rng, 0.4):
        grant["resources"] = subset(rng, RESOURCE_PATTERNS)
    if maybe(rng, 0.4):
        grant["constraints"] = {key: rng.choice(values) for key, values in rng.sample(CONSTRAINTS, rng.randint(1, 2))}
    if maybe(rng, 0.3):
        grant["environments"] = subset(rng, ENVIRONMENTS)
    if maybe(rng, 0.3):
        grant["tasks"] = subset(rng, TASK_PATTERNS)
    if maybe(rng, 0.3):
        grant["budgets"] = subset(rng, BUDGETS)
    if maybe(rng, 0.7):
        grant["expires_at"] = rng.choice(INSTANTS)
        grant["delegable"] = maybe(rng, 0.75)
    return grant


def child_of(rng: random.Random, parent: dict) -> dict:
    """Mostly the parent, narrowed or widened or dropped dimension by dimension."""
    child: dict = {}
    user = parent["subject"].get("user")
    subject = {"agent": rng.choice(CONCRETE_AGENTS) if maybe(rng, 0.9) else rng.choice(AGENT_PATTERNS)}
    if user is not None and maybe(rng, 0.85):
        subject["user"] = rng.choice(["alice", "amy", "bob", "a*"]) if maybe(rng, 0.3) else (
            "alice" if user in ("alice", "a*") else user)
    elif maybe(rng, 0.15):
        subject["user"] = rng.choice(["alice", "a*"])
    child["subject"] = subject
    child["actions"] = list(parent["actions"]) if maybe(rng, 0.6) else subset(rng, ACTION_PATTERNS)
    for key, pool in (("resources", RESOURCE_PATTERNS), ("environments", ENVIRONMENTS), ("tasks", TASK_PATTERNS)):
        roll = rng.random()
        if key in parent and roll < 0.6:
            child[key] = list(parent[key]) if maybe(rng, 0.5) else parent[key][:1]
        elif roll < 0.85:
            if maybe(rng, 0.5):
                child[key] = subset(rng, pool)
        # else omitted
    if "constraints" in parent and maybe(rng, 0.75):
        constraints = dict(parent["constraints"])
        if maybe(rng, 0.4):
            key = rng.choice(list(constraints))
            pool = dict(CONSTRAINTS)[key]
            constraints[key] = rng.choice(pool)
        if maybe(rng, 0.2):
            key, values = rng.choice(CONSTRAINTS)
            constraints[key] = rng.choice(values)
        child["constraints"] = constraints
    elif maybe(rng, 0.2):
        key, values = rng.choice(CONSTRAINTS)
        child["constraints"] = {key: rng.choice(values)}
    if "budgets" in parent and maybe(rng, 0.75):
        child["budgets"] = list(parent["budgets"]) if maybe(rng, 0.6) else subset(rng, BUDGETS)
    elif maybe(rng, 0.2):
        child["budgets"] = subset(rng, BUDGETS)
    if "expires_at" in parent and maybe(rng, 0.8):
        child["expires_at"] = parent["expires_at"] if maybe(rng, 0.5) else rng.choice(INSTANTS)
    elif maybe(rng, 0.3):
        child["expires_at"] = rng.choice(INSTANTS)
    if "expires_at" in child and maybe(rng, 0.7):
        child["delegable"] = True
    return child


def principal_for(rng: random.Random, grants: list[dict]) -> dict:
    grant = rng.choice(grants)
    agent = grant["subject"].get("agent", "*")
    if "*" in agent:
        agent = rng.choice([a for a in CONCRETE_AGENTS if a.startswith(agent.rstrip("*"))] or CONCRETE_AGENTS)
    user = grant["subject"].get("user")
    if user is None or maybe(rng, 0.2):
        user = rng.choice(USERS)
    elif "*" in user:
        user = rng.choice(["alice", "amy"])
    return {"agent": agent, "user": user}


def when(text: str) -> datetime:
    return datetime.fromisoformat(text)


def load(section: dict) -> Authority:
    text = "schema: ctrlrun.policy/v7\nauthority: " + json.dumps(section) + "\n"
    return Authority.from_yaml(text, source="vector", standalone=True)


def refer(value: str | None, ids: list[str]) -> str | None:
    if value is not None and value in ids:
        return f"@{ids.index(value)}"
    return value


#: Delegation ids from a seeded sequence instead of `secrets`, recorded in the vectors, so the
#: replay mints the same ids and ties between delegations break on the same code points.
_IDS = random.Random(SEED + 2)
ctrlrun.authority.new_delegation_id = lambda: f"dlg_{_IDS.getrandbits(128):032x}"


def create(authority: Authority, store: InMemoryStateStore, parent: str, child: dict, by: dict,
           by_expires_at: str | None, now: str) -> dict:
    grant = grant_from_yaml(json.dumps(child), source="child")
    principal = Principal(agent=by["agent"], user=by["user"],
                          expires_at=None if by_expires_at is None else when(by_expires_at))
    try:
        planned = authority.plan_delegation(parent, grant, by=principal, store=store, now=when(now))
    except IdentityError:
        return {"refused": "principal_expired", "dimension": None}
    except AuthorityEscalation as refused:
        return {"refused": refused.reason, "dimension": refused.dimension}
    store.put_delegation(planned.to_record())
    return {"created": planned.delegation_id, "depth": planned.depth}


def peek_next_id() -> str:
    state = _IDS.getstate()
    value = f"dlg_{_IDS.getrandbits(128):032x}"
    _IDS.setstate(state)
    return value


def scenario(rng: random.Random, index: int) -> tuple[dict, int]:
    roots = [random_grant(rng, f"g{index}-{n}") for n in range(rng.randint(2, 5))]
    # At least one delegable root, so chains form.
    roots[0]["expires_at"] = rng.choice(INSTANTS[1:])
    roots[0]["delegable"] = True
    section = {"grants": roots}
    if maybe(rng, 0.3):
        section["max_delegation_depth"] = rng.choice([0, 1, 2, 3])
    authority = load(section)
    store = InMemoryStateStore()
    ids: list[str] = []
    grants_by_ref: dict[str, dict] = {g["id"]: g for g in roots}
    creations = []
    setup_now = "2026-11-01T00:00:00Z"
    for _ in range(rng.randint(3, 9)):
        delegable = [ref for ref, g in grants_by_ref.items() if g.get("delegable")]
        deeper = [ref for ref in delegable if ref.startswith("@")]
        if deeper and maybe(rng, 0.6):
            parent_ref = rng.choice(deeper)
        else:
            parent_ref = rng.choice(delegable if delegable and maybe(rng, 0.85) else list(grants_by_ref))
        parent = grants_by_ref[parent_ref]
        child = child_of(rng, parent)
        by = principal_for(rng, [parent]) if maybe(rng, 0.85) else {"agent": rng.choice(CONCRETE_AGENTS), "user": rng.choice(USERS)}
        by_expires_at = None
        if maybe(rng, 0.1):
            by_expires_at = rng.choice(["2026-10-31T23:59:59.999999Z", "2026-11-01T00:00:00Z"])
        parent_id = parent_ref if not parent_ref.startswith("@") else ids[int(parent_ref[1:])]
        row = {"parent": parent_ref, "grant": child, "by": by, "by_expires_at": by_expires_at, "now": setup_now,
               "id": peek_next_id()}
        outcome = create(authority, store, parent_id, child, by, by_expires_at, setup_now)
        if "created" in outcome:
            ids.append(outcome["created"])
            ref = f"@{len(ids) - 1}"
            grants_by_ref[ref] = child
            row["expected"] = {"created": ref, "depth": outcome["depth"]}
        else:
            row["expected"] = {"refused": outcome["refused"], "dimension": outcome["dimension"]}
        creations.append(row)
    revoked = [f"@{i}" for i in range(len(ids)) if maybe(rng, 0.2)]
    for ref in revoked:
        store.revoke_delegation(ids[int(ref[1:])], by="ops", at=when(setup_now))
    # Creations after the revocations: under a revoked parent, or a chain that no longer holds.
    late_creations = []
    for _ in range(2 if revoked else 0):
        parent_ref = rng.choice(list(grants_by_ref))
        child = child_of(rng, grants_by_ref[parent_ref])
        by = principal_for(rng, [grants_by_ref[parent_ref]])
        parent_id = parent_ref if not parent_ref.startswith("@") else ids[int(parent_ref[1:])]
        now = rng.choice(NOWS)
        row = {"parent": parent_ref, "grant": child, "by": by, "by_expires_at": None, "now": now, "id": peek_next_id()}
        outcome = create(authority, store, parent_id, child, by, None, now)
        if "created" in outcome:
            ids.append(outcome["created"])
            grants_by_ref[f"@{len(ids) - 1}"] = child
            row["expected"] = {"created": f"@{len(ids) - 1}", "depth": outcome["depth"]}
        else:
            row["expected"] = {"refused": outcome["refused"], "dimension": outcome["dimension"]}
        late_creations.append(row)
    every_grant = list(grants_by_ref.values())
    delegated = [g for ref, g in grants_by_ref.items() if ref.startswith("@")]
    evaluations = []
    for _ in range(14):
        principal = principal_for(rng, delegated if delegated and maybe(rng, 0.6) else every_grant)
        arguments = {}
        if maybe(rng, 0.85):
            arguments["amount"] = rng.choice([0, 10, 999, 1000, 5000, 100000, 100001])
        if maybe(rng, 0.6):
            arguments["currency"] = rng.choice(["eur", "usd"])
        if maybe(rng, 0.5):
            arguments["region"] = rng.choice(["eu", "us"])
        case = {
            "name": rng.choice(ACTIONS),
            "arguments": arguments,
            "principal": principal,
            "resource": rng.choice(RESOURCES),
            "environment": rng.choice(["production", "production", "staging", "dev"]),
            "task": rng.choice(TASKS),
            "now": rng.choice(NOWS),
            "hop": None,
        }
        if ids and maybe(rng, 0.15):
            case["hop"] = rng.choice([f"@{i}" for i in range(len(ids))] + ["dlg_0123456789abcdef0123456789abcdef"])
        action = Action(name=case["name"], arguments=arguments,
                        principal=Principal(agent=principal["agent"], user=principal["user"]),
                        resource=case["resource"], environment=case["environment"])
        hop = case["hop"]
        if hop is not None and hop.startswith("@"):
            hop = ids[int(hop[1:])]
        result = authority.evaluate(action, now=when(case["now"]), store=store, task=case["task"], hop=hop)
        case["expected"] = {
            "passed": result.passed,
            "reason": result.reason,
            "grant_id": refer(result.grant_id, ids),
            "delegation_id": refer(result.delegation_id, ids),
            "depth": result.depth,
            "dimension": result.dimension,
            "expired_parent_id": refer(result.expired_parent_id, ids),
            "depth_exceeded": result.depth_exceeded,
        }
        evaluations.append(case)
    passes = sum(1 for case in evaluations if case["expected"]["passed"])
    return {"authority": section, "creations": creations, "revoked": revoked,
            "late_creations": late_creations, "evaluations": evaluations}, passes


def authority_vectors() -> list:
    rng = random.Random(SEED + 1)
    scenarios, passes = [], 0
    for index in range(120):
        built, passed = scenario(rng, index)
        scenarios.append(built)
        passes += passed
    print(f"{len(scenarios)} scenarios, {passes} passing evaluations", file=sys.stderr)
    return scenarios


def compact(value) -> str:
    return json.dumps(value, ensure_ascii=True, sort_keys=True, separators=(",", ":"))


def write(name: str, value) -> None:
    """One row per line: small files and readable diffs."""
    if isinstance(value, list):
        text = "[\n" + ",\n".join(compact(row) for row in value) + "\n]\n"
    else:
        parts = [f" {json.dumps(key)}: [\n" + ",\n".join(compact(row) for row in rows) + "\n ]" for key, rows in sorted(value.items())]
        text = "{\n" + ",\n".join(parts) + "\n}\n"
    (OUT / name).write_text(text, encoding="ascii")


if __name__ == "__main__":
    write("authority_patterns.json", pattern_vectors())
    write("authority_scenarios.json", authority_vectors())
