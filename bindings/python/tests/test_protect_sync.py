"""@w.protect on a plain function: propose, run with the canonical arguments, report one outcome."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
import threading
from typing import Any

import pytest

import warden

from conftest import VECTORS


def test_a_committed_call_runs_once_and_its_retry_is_a_duplicate(w: warden.Warden, agent: Any) -> None:
    calls: list[tuple[str, int]] = []

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> dict[str, Any]:
        calls.append((payment_id, amount))
        return {"refund": "re_1", "amount": amount}

    assert refund("pay_1", 1200) == {"refund": "re_1", "amount": 1200}
    with pytest.raises(warden.Duplicate) as refused:
        refund("pay_1", 1200)
    assert refused.value.state == "committed"
    assert refused.value.code == "WARDEN_RESULT_DUPLICATE"
    assert refused.value.effect_key == "refund:pay_1"
    assert calls == [("pay_1", 1200)]
    record = w.effect("refund:pay_1")
    assert record is not None
    assert record["state"] == "committed"
    assert record["result"] == {"refund": "re_1", "amount": 1200}


def test_the_function_receives_the_canonical_arguments_with_defaults_bound(w: warden.Warden, agent: Any) -> None:
    seen: list[dict[str, Any]] = []

    @w.protect("email.send")
    def send(message_id: str, /, to: str, tags: tuple[str, ...] = ("a", "b"), *, body: str = "hi") -> None:
        seen.append({"message_id": message_id, "to": to, "tags": tags, "body": body})

    send("msg_1", to="ada@example.com")
    # The tuple crossed as JSON and came back as the kernel's canonical reading: a list.
    assert seen == [{"message_id": "msg_1", "to": "ada@example.com", "tags": ["a", "b"], "body": "hi"}]
    receipt = w.receipts()[-1]
    assert receipt["arguments"] == {"message_id": "msg_1", "to": "ada@example.com", "tags": ["a", "b"], "body": "hi"}
    assert receipt["result"] == "committed"


def test_not_executed_records_failed_and_the_retry_runs_as_attempt_two(w: warden.Warden, agent: Any) -> None:
    attempts: list[int] = []

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int, fail: bool) -> str:
        attempts.append(w.effect(f"refund:{payment_id}")["attempt"])  # type: ignore[index]
        if fail:
            raise warden.NotExecuted("card declined before anything moved")
        return "ok"

    with pytest.raises(warden.NotExecuted, match="card declined"):
        refund("pay_1", 1200, True)
    failed = w.effect("refund:pay_1")
    assert failed is not None and failed["state"] == "failed"
    assert "card declined" in failed["error"]
    # `fail` is an argument, so the retry is another action on the same effect key.
    assert refund("pay_1", 1200, False) == "ok"
    assert attempts == [1, 2]
    assert w.effect("refund:pay_1")["state"] == "committed"  # type: ignore[index]


def test_any_other_exception_records_ambiguous_and_is_reraised_unchanged(w: warden.Warden, agent: Any) -> None:
    boom = ValueError("the reply was lost")

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise boom

    with pytest.raises(ValueError) as raised:
        refund("pay_1", 1200)
    assert raised.value is boom
    assert not isinstance(raised.value, warden.WardenError)
    record = w.effect("refund:pay_1")
    assert record is not None and record["state"] == "ambiguous"
    assert "ValueError: the reply was lost" in record["error"]
    with pytest.raises(warden.Ambiguous) as refused:
        refund("pay_1", 1200)
    assert refused.value.code == "WARDEN_RESULT_AMBIGUOUS"
    assert refused.value.reason == "ambiguous"
    assert refused.value.effect_key == "refund:pay_1"


@pytest.mark.parametrize("exception", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_a_base_exception_also_records_ambiguous(w: warden.Warden, agent: Any, exception: type) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        raise exception()

    with pytest.raises(exception):
        refund("pay_1", 1200)
    assert w.effect("refund:pay_1")["state"] == "ambiguous"  # type: ignore[index]


def test_a_second_call_while_the_first_runs_is_a_duplicate_in_progress(w: warden.Warden, agent: Any) -> None:
    refused: list[warden.Duplicate] = []

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int, nested: bool = False) -> str:
        if not nested:
            try:
                refund(payment_id, amount, nested=True)
            except warden.Duplicate as exc:
                refused.append(exc)
        return "ok"

    assert refund("pay_1", 1200) == "ok"
    (exc,) = refused
    assert exc.state == "in_progress"
    assert exc.code == "WARDEN_RESULT_IN_PROGRESS"
    assert exc.reason == "in_progress"
    assert isinstance(exc, warden.Refused)


def test_a_result_that_is_not_json_is_committed_as_its_repr_marked_as_text(w: warden.Warden, agent: Any) -> None:
    class Receipt:
        def __repr__(self) -> str:
            return "<Receipt re_9>"

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> Receipt:
        return Receipt()

    result = refund("pay_1", 1200)
    assert isinstance(result, Receipt)
    stored = w.effect("refund:pay_1")["result"]  # type: ignore[index]
    assert (stored["warden_result"], stored["excerpt"], stored["bytes"]) == ("text", "<Receipt re_9>", 14)


def test_idempotency_token_and_extend_lease_inside_a_protected_call(w: warden.Warden, agent: Any) -> None:
    seen: dict[str, Any] = {}

    @w.protect("stripe.refund", lease=60)
    def refund(payment_id: str, amount: int) -> None:
        seen["token"] = warden.idempotency_token()
        seen["lease_before"] = w.effect("refund:pay_1")["lease_expires_at"]  # type: ignore[index]
        seen["extended_to"] = warden.extend_lease(3600)
        seen["lease_after"] = w.effect("refund:pay_1")["lease_expires_at"]  # type: ignore[index]

    started = datetime.now(timezone.utc)
    refund("pay_1", 1200)
    assert isinstance(seen["token"], str) and len(seen["token"]) == 36  # a UUID
    # lease=60 overrides the document's PT5M for this call.
    lease = datetime.fromisoformat(seen["lease_before"].replace("Z", "+00:00")) - started
    assert timedelta(seconds=50) < lease < timedelta(seconds=120)
    assert seen["lease_after"] == seen["extended_to"]
    assert seen["lease_after"] > seen["lease_before"]
    with pytest.raises(warden.InvalidInput):
        warden.idempotency_token()
    with pytest.raises(warden.InvalidInput):
        warden.extend_lease(10)


def test_extend_lease_sets_the_lease_to_now_plus_seconds_never_shorter_as_documented(
    w: warden.Warden, agent: Any
) -> None:
    """`extend_lease(seconds)` moves the lease to now + `seconds` (not the current expiry +
    `seconds`), and refuses to shorten it: under the document's 5-minute lease, 30 s is
    refused. The docstrings say exactly that."""
    seen: dict[str, Any] = {}

    def moment(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        seen["before"] = moment(w.effect("refund:pay_1")["lease_expires_at"])  # type: ignore[index]
        with pytest.raises(warden.InvalidInput):
            warden.extend_lease(30)
        seen["unchanged"] = moment(w.effect("refund:pay_1")["lease_expires_at"])  # type: ignore[index]
        seen["asked_at"] = datetime.now(timezone.utc)
        seen["after"] = moment(warden.extend_lease(600))  # type: ignore[arg-type]

    refund("pay_1", 1200)
    assert seen["unchanged"] == seen["before"]
    assert seen["after"] >= seen["asked_at"] + timedelta(seconds=599)
    assert seen["after"] < seen["before"] + timedelta(seconds=600)  # "to now +", not "by"
    for documented in (warden.Permit.extend_lease, warden.extend_lease, warden.extend_lease_async):
        doc = " ".join((documented.__doc__ or "").split())
        assert "never shorter" in doc and "now + `seconds`" in doc, documented
        assert "by `seconds`" not in doc, documented


def test_the_token_is_the_one_ctrlrun_derives_for_each_attempt(w: warden.Warden, agent: Any) -> None:
    rows = json.loads((VECTORS / "idempotency.json").read_text(encoding="utf-8"))
    expected = {row["attempt"]: row["token"] for row in rows if row["effect_key"] == "refund:txn_1"}
    tokens: list[str] = []

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int, fail: bool) -> None:
        tokens.append(warden.idempotency_token())
        if fail:
            raise warden.NotExecuted("declined")

    with pytest.raises(warden.NotExecuted):
        refund("txn_1", 1200, True)
    refund("txn_1", 1200, False)
    assert tokens == [expected[1], expected[2]]


def test_an_action_without_an_effect_key_has_no_token(w: warden.Warden, agent: Any) -> None:
    @w.protect("customer.read")
    def read(customer_id: str) -> dict[str, str]:
        with pytest.raises(warden.InvalidInput):
            warden.idempotency_token()
        return {"id": customer_id}

    assert read("cus_1") == {"id": "cus_1"}
    assert read("cus_1") == {"id": "cus_1"}  # no effect key: nothing to duplicate


def test_refusals_before_anything_runs(w: warden.Warden) -> None:
    calls: list[int] = []

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        calls.append(amount)

    @w.protect("wire.transfer")
    def transfer(account: str) -> None:
        calls.append(0)

    with pytest.raises(warden.InvalidInput) as nobody:
        refund("pay_1", 1200)
    assert nobody.value.reason == "no_principal" and nobody.value.code == "WARDEN_RESULT_INVALID_INPUT"
    assert "warden.context(" in nobody.value.message
    assert w.receipts() == [], "no receipt names a stranger"
    with warden.context(agent="support-agent", user="ada"):
        with pytest.raises(warden.Denied) as too_much:
            refund("pay_1", 9_000_000)
        with pytest.raises(warden.Denied) as unknown:
            transfer("acct_1")
    assert too_much.value.code == "WARDEN_RESULT_DENIED"
    assert unknown.value.reason == "unknown_action"
    assert calls == []


def test_arguments_that_are_not_json_are_invalid_input(w: warden.Warden, agent: Any) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: Any) -> None:
        raise AssertionError("must not run")

    with pytest.raises(warden.InvalidInput):
        refund("pay_1", object())
    # A non-finite float has no JSON form: refused before anything is proposed. (A finite float
    # is a number a warden/v1 document takes; see test_float_vectors.py.)
    with pytest.raises(warden.InvalidInput) as floats:
        refund("pay_1", float("inf"))
    assert "float" in floats.value.message
    assert floats.value.code == "WARDEN_RESULT_INVALID_INPUT"


def test_variadic_and_generator_functions_are_refused_at_decoration(w: warden.Warden) -> None:
    with pytest.raises(warden.InvalidInput):

        @w.protect("stripe.refund")
        def refund(*args: Any) -> None: ...

    with pytest.raises(warden.InvalidInput):

        @w.protect("stripe.refund")
        def refund_gen(payment_id: str) -> Any:
            yield payment_id

    with pytest.raises(warden.InvalidInput):
        w.protect("stripe.refund", lease=0)


def test_protect_keeps_the_function_metadata(w: warden.Warden) -> None:
    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        """Refund a payment."""

    assert refund.__name__ == "refund"
    assert refund.__doc__ == "Refund a payment."


def test_concurrent_threads_racing_on_one_key_have_exactly_one_winner(w: warden.Warden) -> None:
    barrier = threading.Barrier(8)
    ran: list[int] = []
    outcomes: list[str] = []
    lock = threading.Lock()

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int) -> None:
        with lock:
            ran.append(amount)

    def racer(n: int) -> None:
        with warden.context(agent=f"agent-{n}"):
            barrier.wait()
            try:
                refund("pay_race", 1000)
                outcome = "ran"
            except warden.Duplicate as exc:
                outcome = exc.state or "?"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ran) == 1
    assert outcomes.count("ran") == 1
    assert set(outcomes) <= {"ran", "committed", "in_progress"}
    assert w.verify_chain()["ok"] is True


def test_unencodable_text_never_loses_the_outcome_or_the_exception(w: warden.Warden, agent: Any) -> None:
    odd = RuntimeError("half a surrogate: \udc80")

    @w.protect("stripe.refund")
    def refund(payment_id: str, amount: int, fail: bool) -> str:
        if fail:
            raise odd
        return "lone \udc80 surrogate"

    with pytest.raises(RuntimeError) as raised:
        refund("pay_1", 1, True)
    assert raised.value is odd
    assert w.effect("refund:pay_1")["state"] == "ambiguous"  # type: ignore[index]
    assert refund("pay_2", 1, False) == "lone \udc80 surrogate"
    stored = w.effect("refund:pay_2")["result"]  # type: ignore[index]
    assert (stored["warden_result"], stored["excerpt"]) == ("text", "'lone \\udc80 surrogate'")
