#!/usr/bin/env python3
"""Regenerate warden/floats.json: float arguments under a warden/v1 document, computed without Warden.

    python3 -m venv target/jcs-venv
    target/jcs-venv/bin/pip install rfc8785==0.1.4
    target/jcs-venv/bin/python tests/vectors/generate_floats.py

Every expected value is computed here from the case's input: numbers by `rfc8785` (Trail of Bits'
pure-Python RFC 8785 implementation, which formats floats from Python's own shortest `repr`),
cross-checked for every double with Node's `JSON.stringify` (`node` must be on PATH); integers
exactly as written (Python's `int`); keys sorted by code point; the action hash as SHA-256 over
the canonical `ctrlrun.action/v1` document; the effect key by percent-encoding each value's text
outside RFC 3986's unreserved set; the decision by Python's own comparisons against the rules of
`policy_yaml`, which hold no number where Python's exact int/float comparison and a comparison
of canonical texts could differ (none at or beyond 2^53 next to a float). `tests/vectors.rs` and
`tests/policy_vectors.rs`, `bindings/python/tests/test_float_vectors.py` and
`bindings/node/test/float_vectors.test.js` replay the file.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import struct
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import rfc8785

VERSION = importlib.metadata.version("rfc8785")
assert VERSION == "0.1.4", VERSION

HERE = Path(__file__).resolve().parent
OUT = HERE / "warden" / "floats.json"

ACTION = "get-sum"
PRINCIPAL = {"agent": "vector-agent", "user": None}
ENVIRONMENT = "production"
EFFECT = "sum:{case}:{a}"
POLICY_YAML = f"""schema: warden/v1
environment: {ENVIRONMENT}
actions:
  {ACTION}:
    effect: "{EFFECT}"
    rules:
      - when: {{a_lte: 10.5}}
        decision: allow
      - when: {{a_in: [20.25, 1.0e+21]}}
        decision: allow
"""
LTE_BOUND = 10.5
IN_LIST = [20.25, 1.0e21]

# (name, arguments as JSON text): spellings an agent may send.
TEXT_CASES = [
    ("plain", '{"a": 1.5}'),
    ("trailing_zero", '{"a": 1.50}'),
    ("exponent_spelling", '{"a": 15e-1}'),
    ("whole_float", '{"a": 1.0}'),
    ("whole_exponent", '{"a": 1e3}'),
    ("negative_zero", '{"a": -0.0}'),
    ("tenth", '{"a": 0.1}'),
    ("tenth_plus_fifth", '{"a": 0.30000000000000004}'),
    ("long_tenth", '{"a": 0.1000000000000000055511151231257827}'),
    ("bound", '{"a": 10.5}'),
    ("next_double_past_bound", '{"a": 10.500000000000002}'),
    ("integer_under_bound", '{"a": 10}'),
    ("integer_over_bound", '{"a": 11}'),
    ("negative", '{"a": -2.75}'),
    ("in_list", '{"a": 20.250}'),
    ("not_in_list", '{"a": 20.26}'),
    ("e20", '{"a": 1e20}'),
    ("e21", '{"a": 1e21}'),
    ("e21_as_integer", '{"a": 1000000000000000000000}'),
    ("e_minus_6", '{"a": 0.000001}'),
    ("e_minus_7", '{"a": 1e-7}'),
    ("smallest_subnormal", '{"a": 5e-324}'),
    ("largest_double", '{"a": 1.7976931348623157e308}'),
    ("integer_past_2_53", '{"a": 9007199254740993}'),
    ("float_past_2_53", '{"a": 9007199254740993.0}'),
    ("nested", '{"a": 2, "b": [0.5, {"c": 1e-10, "d": -1E+2}], "s": "1.5"}'),
]

# (name, IEEE-754 bits): doubles each language builds from its bits and sends as its own float.
# The first rows are RFC 8785's Appendix B; the rest sit where the formats switch.
BIT_CASES = [
    ("b_zero", "0000000000000000"),
    ("b_minus_zero", "8000000000000000"),
    ("b_min_subnormal", "0000000000000001"),
    ("b_minus_min_subnormal", "8000000000000001"),
    ("b_max", "7fefffffffffffff"),
    ("b_minus_max", "ffefffffffffffff"),
    ("b_2_53", "4340000000000000"),
    ("b_minus_2_53", "c340000000000000"),
    ("b_2_68", "4430000000000000"),
    ("b_below_1e23", "44b52d02c7e14af5"),
    ("b_1e23", "44b52d02c7e14af6"),
    ("b_above_1e23", "44b52d02c7e14af7"),
    ("b_below_1e21_a", "444b1ae4d6e2ef4e"),
    ("b_below_1e21_b", "444b1ae4d6e2ef4f"),
    ("b_1e21", "444b1ae4d6e2ef50"),
    ("b_below_1e_6", "3eb0c6f7a0b5ed8c"),
    ("b_1e_6", "3eb0c6f7a0b5ed8d"),
    ("b_third_a", "41b3de4355555553"),
    ("b_third_b", "41b3de4355555554"),
    ("b_third_c", "41b3de4355555555"),
    ("b_third_d", "41b3de4355555556"),
    ("b_third_e", "41b3de4355555557"),
    ("b_minus_small_third", "becbf647612f3696"),
    ("b_fraction_of_2_50", "43143ff3c1cb0959"),
]

# Numbers no canonical form holds: refused whoever sends them (the text by the library's parser
# or encoder, a binding's non-finite float by the binding or the library).
REFUSED_CASES = [
    ("beyond_double", '{"a": 1e400}'),
    ("beyond_double_negative", '{"a": -1e400}'),
]


def parse_int(text: str) -> int:
    return int(text)


def canonical(value: Any) -> str:
    """Warden's warden/v1 canonical form: ctrlrun's (code-point key order, exact integers,
    Python's `ensure_ascii=False` strings) with floats as RFC 8785 prints them."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return rfc8785.dumps(value).decode("ascii")
    if isinstance(value, list):
        return "[" + ",".join(canonical(item) for item in value) + "]"
    if isinstance(value, dict):
        members = (json.dumps(key, ensure_ascii=False) + ":" + canonical(value[key]) for key in sorted(value))
        return "{" + ",".join(members) + "}"
    raise TypeError(type(value))


def canonical_reading(value: Any) -> Any:
    """The arguments as the library keeps them: each float read back from its canonical text
    (`1.0` becomes the integer 1)."""
    return json.loads(canonical(value), parse_int=parse_int)


def floats_in(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, list):
        return [f for item in value for f in floats_in(item)]
    if isinstance(value, dict):
        return [f for item in value.values() for f in floats_in(item)]
    return []


def action_hash(arguments: Any) -> str:
    document = {
        "arguments": arguments,
        "environment": ENVIRONMENT,
        "name": ACTION,
        "principal": PRINCIPAL,
        "resource": None,
        "schema": "ctrlrun.action/v1",
    }
    return "sha256:" + hashlib.sha256(canonical(document).encode("utf-8")).hexdigest()


def effect_key(arguments: dict[str, Any]) -> str:
    """`sum:{case}:{a}` in escaped mode: each value's canonical text, percent-encoded outside
    A-Z a-z 0-9 - . _ ~."""
    def text(value: Any) -> str:
        return value if isinstance(value, str) else canonical(value)

    return f"sum:{quote(text(arguments['case']), safe='')}:{quote(text(arguments['a']), safe='')}"


def decision(a: Any) -> tuple[str, str]:
    # The rules hold small numbers only: Python's exact comparison is the canonical one here.
    if a <= LTE_BOUND:
        return "allow", "rule[0]"
    if a in IN_LIST:
        return "allow", "rule[1]"
    return "deny", "no_matching_rule"


def row(name: str, sent: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    arguments = canonical_reading(sent)
    decided, reason = decision(arguments["a"])
    return {
        "name": name,
        **source,
        "canonical_arguments": canonical(arguments),
        "action_hash": action_hash(arguments),
        "effect_key": effect_key(arguments),
        "decision": decided,
        "reason": reason,
    }


def node_texts(doubles: list[float]) -> list[str]:
    """`JSON.stringify` of each double, built in Node from its bits."""
    bits = [struct.pack(">d", d).hex() for d in doubles]
    script = (
        "const bits = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "const view = new DataView(new ArrayBuffer(8));"
        "console.log(JSON.stringify(bits.map((hex) => {"
        " view.setBigUint64(0, BigInt('0x' + hex)); return JSON.stringify(view.getFloat64(0)); })));"
    )
    done = subprocess.run(["node", "-e", script], input=json.dumps(bits), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    cases = []
    for name, text in TEXT_CASES:
        sent = json.loads(text, parse_int=parse_int)
        sent["case"] = name
        cases.append(row(name, sent, {"arguments_json": text.replace("{", '{"case": "' + name + '", ', 1)}))
    for name, bits in BIT_CASES:
        value = struct.unpack(">d", bytes.fromhex(bits))[0]
        cases.append(row(name, {"case": name, "a": value}, {"ieee": bits}))
    refused = []
    for name, text in REFUSED_CASES:
        value = json.loads(text)["a"]
        assert math.isinf(value), name
        refused.append({"name": name, "arguments_json": text.replace("{", '{"case": "' + name + '", ', 1)})

    doubles = [f for case in cases for f in floats_in(json.loads(case.get("arguments_json", "null") or "null"))]
    doubles += [struct.unpack(">d", bytes.fromhex(case["ieee"]))[0] for case in cases if "ieee" in case]
    for double, from_node in zip(doubles, node_texts(doubles), strict=True):
        assert rfc8785.dumps(double).decode("ascii") == from_node, (double, from_node)

    document = {
        "about": (
            "Float arguments of one action under a warden/v1 document, computed by "
            "tests/vectors/generate_floats.py with the rfc8785 package (" + VERSION + ") and checked "
            "against Node's JSON.stringify. Each case is sent as `arguments_json` (JSON text, parsed "
            "in the test's language) or as `ieee` (the arguments {\"case\": name, \"a\": the double "
            "with these IEEE-754 bits, as that language's own float}). Expected: "
            "`canonical_arguments` (the arguments as the library keeps them, canonical JSON), "
            "`action_hash`, `effect_key` (the `effect` template rendered in escaped mode) and the "
            "policy's `decision` and `reason`. `refused` cases have no canonical form in any "
            "language. Read by tests/vectors.rs, tests/policy_vectors.rs, "
            "bindings/python/tests/test_float_vectors.py and bindings/node/test/float_vectors.test.js."
        ),
        "policy_yaml": POLICY_YAML,
        "action": ACTION,
        "principal": PRINCIPAL,
        "environment": ENVIRONMENT,
        "effect": EFFECT,
        "cases": cases,
        "refused": refused,
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(cases)} cases, {len(refused)} refused, {len(doubles)} doubles checked against node")


if __name__ == "__main__":
    main()
