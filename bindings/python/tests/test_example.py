"""examples/refund.py runs the refund story end to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "refund.py"


def test_the_refund_example_tells_the_whole_story(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RUST_BACKTRACE": "0"},
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    expected_lines = [
        "   refund(pay_1001, 1200)          -> refunded re_1",
        "   retry refund(pay_1001, 1200)    -> refused: WARDEN_RESULT_DUPLICATE (state committed)",
        "   provider calls for pay_1001: 1",
        "   refund(pay_2002, 120000)        -> refused: WARDEN_RESULT_APPROVAL_REQUIRED",
        "   ada approves her own request    -> refused: WARDEN_RESULT_APPROVAL_MISMATCH (approver_is_requester)",
        "   ops:bob approves                -> granted",
        "   refund with the approval        -> refunded re_2",
        "   effect refund:pay_3003 is AMBIGUOUS",
        "   retry refund(pay_3003, 4500)    -> refused: WARDEN_RESULT_AMBIGUOUS",
        "   provider calls for pay_3003: 1 (the customer was refunded once)",
        "   ops:carol resolves it           -> COMMITTED",
        "provider refunds: 3; receipts: 5; chain verified (5 receipts)",
        f"store: {tmp_path / 'state.redb'}",
    ]
    lines = out.splitlines()
    for line in expected_lines:
        assert line in lines, f"missing {line!r} in:\n{out}"
    assert re.search(r"approval request apr_[0-9a-f]{32}, pending until \S+Z", out)
    assert (tmp_path / "state.redb").is_file()
