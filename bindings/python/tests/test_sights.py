"""Sights (confined reads) through the binding, against a real local HTTP server.

The upstream here is a raw-socket server that records, per request, the method, target,
headers and body it received, and counts every connection (including ones that never sent a
request). Nothing about Warden is mocked: every query goes through the library's HTTP client.
Synchronisation is by `threading.Event` handshakes, never by sleeping.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import gc
import json
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import warden

#: The credential every test hands to Warden; it must never come back out.
TOKEN = "tok_" + secrets.token_hex(16)
REFERENCE = "STATUS_TOKEN"
SNAPSHOT_UNKNOWN = "snp_" + "0" * 32

CONFIG = """\
schema: warden/v1
actions: {{}}
sources:
  - id: status
    base_url: http://127.0.0.1:{port}/v2
    auth: {{ mode: bearer, credential: STATUS_TOKEN }}
    timeout_ms: {timeout_ms}
    endpoints:
      - id: summary
        path: /summary
        params:
          - {{ name: region, type: enum, values: [eu, us], default: eu }}
          - {{ name: limit, type: integer, min: 1, max: 50 }}
          - {{ name: q, type: string, max_length: 40 }}
        fields:
          state: /status/indicator
          count: /count
          secrets: /debug
"""

#: What an agent must never be able to name.
FORBIDDEN_KEYS = ("url", "host", "port", "protocol", "path", "method", "headers", "credentials", "base_url")


# ---- the recording upstream -----------------------------------------------------------------


@dataclass
class Seen:
    """One request as the upstream received it."""

    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes
    #: The upstream's own port (what the Host header must name).
    port: int = 0

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name.lower()]


Responder = Callable[["Upstream", Seen, socket.socket], None]


def json_response(conn: socket.socket, payload: Any, status: str = "200 OK", extra: str = "") -> None:
    body = json.dumps(payload).encode("utf-8")
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"{extra}Connection: close\r\n\r\n"
    )
    conn.sendall(head.encode("ascii") + body)


def status_page(upstream: Upstream, seen: Seen, conn: socket.socket) -> None:
    """The status JSON, echoing the Authorization header it received (Warden must redact it)."""
    auth = seen.header("authorization")
    json_response(
        conn,
        {
            "status": {"indicator": upstream.state},
            "count": upstream.count,
            "debug": {"auth": auth[0] if auth else None, "note": "echo"},
        },
    )


@dataclass
class Upstream:
    respond: Responder = status_page
    state: str = "ok"
    count: int = 1
    requests: list[Seen] = field(default_factory=list)
    connections: int = 0
    #: Set by a stalling responder once a request has arrived.
    received: threading.Event = field(default_factory=threading.Event)
    #: Set by the test to let a stalling responder go on.
    proceed: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name=f"upstream-{self.port}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                seen = _read_request(conn)
                if seen is None:
                    return
                seen.port = self.port
                with self._lock:
                    self.requests.append(seen)
                self.respond(self, seen, conn)
            except OSError:
                return

    def close(self) -> None:
        self.proceed.set()  # a stalled responder ends
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._thread.join(5)


def _read_request(conn: socket.socket) -> Seen | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None if not data else _parse(data, b"")
        data += chunk
        if len(data) > 1 << 20:
            break
    head, _, rest = data.partition(b"\r\n\r\n")
    seen = _parse(head, rest)
    length = seen.header("content-length")
    if length:
        want = int(length[0])
        body = rest
        while len(body) < want:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        seen.body = body
    elif seen.header("transfer-encoding"):
        body = rest
        while not body.endswith(b"0\r\n\r\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        seen.body = body
    return seen


def _parse(head: bytes, rest: bytes) -> Seen:
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = (lines[0].split(" ", 2) + ["", ""])[:3]
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    return Seen(method, target, version, headers, rest)


# ---- fixtures --------------------------------------------------------------------------------


@pytest.fixture()
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    try:
        yield server
    finally:
        server.close()


def write_config(tmp_path: Path, port: int, timeout_ms: int = 2000) -> Path:
    path = tmp_path / "sights.yaml"
    path.write_text(CONFIG.format(port=port, timeout_ms=timeout_ms), encoding="utf-8")
    return path


@pytest.fixture()
def sight_store(tmp_path: Path) -> Path:
    return tmp_path / "sights.redb"


@pytest.fixture()
def sw(tmp_path: Path, upstream: Upstream, sight_store: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[warden.Warden]:
    """A Warden over the test config; no credential in the environment, no provider set."""
    monkeypatch.delenv(REFERENCE, raising=False)
    with warden.Warden(store=sight_store, config=write_config(tmp_path, upstream.port)) as handle:
        yield handle


def token_provider(reference: str) -> str | None:
    return TOKEN if reference == REFERENCE else None


def assert_conforming(seen: Seen) -> None:
    """A request Warden built from the configuration, and nothing an agent controlled."""
    assert seen.method == "GET"
    path = urlsplit(seen.target).path
    assert path == "/v2/summary", seen.target
    assert seen.body == b""
    assert seen.header("content-length") in ([], ["0"])
    assert seen.header("transfer-encoding") == []
    assert seen.header("authorization") == [f"Bearer {TOKEN}"]
    names = {name.lower() for name, _ in seen.headers}
    assert names <= {"host", "authorization", "content-length", "connection"}, names
    assert seen.header("host") == [f"127.0.0.1:{seen.port}"]


def no_secret(value: Any) -> None:
    text = value if isinstance(value, str) else json.dumps(value)
    assert TOKEN not in text
    assert base64.b64encode(TOKEN.encode()).decode() not in text


# ---- 1. the happy path ---------------------------------------------------------------------


def test_query_reads_the_window_with_the_provider_credential_and_redacts_its_echo(
    sw: warden.Warden, upstream: Upstream
) -> None:
    asked: list[tuple[str, int]] = []

    def provider(reference: str) -> str | None:
        asked.append((reference, threading.get_ident()))
        return token_provider(reference)

    sw.set_credential_provider(provider)
    result = sw.query("status", "summary", params={"region": "us"})

    assert asked == [(REFERENCE, threading.get_ident())]  # on the thread running the query
    assert result["source"] == "status" and result["endpoint"] == "summary"
    assert result["status"] == 200
    assert result["values"]["state"] == "ok"
    assert result["values"]["count"] == 1
    assert "[REDACTED]" in json.dumps(result["values"]["secrets"])
    assert result["redactions"].get("secrets", 0) >= 1
    assert "snapshotId" not in result
    no_secret(result)

    (seen,) = upstream.requests
    assert seen.target == "/v2/summary?region=us"
    assert_conforming(seen)


def test_query_fields_select_aliases(sw: warden.Warden, upstream: Upstream) -> None:
    sw.set_credential_provider(token_provider)
    result = sw.query("status", "summary", fields=["state"])
    assert set(result["values"]) == {"state"}
    (seen,) = upstream.requests
    assert seen.target == "/v2/summary?region=eu"  # the default applied by Warden
    assert_conforming(seen)


def test_without_a_provider_the_environment_variable_is_used(
    sw: warden.Warden, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REFERENCE, TOKEN)
    result = sw.query("status", "summary", params={"region": "us", "limit": 5})
    assert result["values"]["state"] == "ok"
    (seen,) = upstream.requests
    assert parse_qs(urlsplit(seen.target).query) == {"region": ["us"], "limit": ["5"]}
    assert_conforming(seen)

    # A provider replaces the environment; None restores it.
    sw.set_credential_provider(lambda reference: None)
    with pytest.raises(warden.FetchFault) as refused:
        sw.query("status", "summary")
    assert refused.value.reason == "credential_unavailable"
    sw.set_credential_provider(None)
    sw.query("status", "summary")
    assert len(upstream.requests) == 2
    assert_conforming(upstream.requests[1])


def test_credentials_dir_is_an_open_option(tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REFERENCE, raising=False)
    secrets_dir = tmp_path / "credentials"
    secrets_dir.mkdir()
    (secrets_dir / REFERENCE).write_text(TOKEN + "\n", encoding="utf-8")
    config = write_config(tmp_path, upstream.port)
    with warden.Warden(store=tmp_path / "dir.redb", config=config, credentials_dir=secrets_dir) as w:
        result = w.query("status", "summary")
    assert result["values"]["state"] == "ok"
    (seen,) = upstream.requests
    assert_conforming(seen)


def test_a_string_param_is_encoded_into_the_query_and_cannot_leave_the_path(
    sw: warden.Warden, upstream: Upstream
) -> None:
    sw.set_credential_provider(token_provider)
    hostile = "../../x?y=1&z=2#frag @evil"
    sw.query("status", "summary", params={"q": hostile})
    (seen,) = upstream.requests
    assert_conforming(seen)
    assert parse_qs(urlsplit(seen.target).query) == {"region": ["eu"], "q": [hostile]}


def test_sources_name_windows_but_no_origin_path_or_credential(sw: warden.Warden, upstream: Upstream) -> None:
    catalog = sw.sources()
    (source,) = catalog["sources"]
    assert source["id"] == "status"
    (endpoint,) = source["endpoints"]
    assert endpoint["id"] == "summary"
    assert [p["name"] for p in endpoint["params"]] == ["region", "limit", "q"]
    assert sorted(endpoint["fields"]) == ["count", "secrets", "state"]
    text = json.dumps(catalog)
    for leak in (str(upstream.port), "127.0.0.1", "/v2", "/summary", REFERENCE, "/status/indicator"):
        assert leak not in text
    assert upstream.connections == 0


def test_query_async_runs_in_a_worker_thread(sw: warden.Warden, upstream: Upstream) -> None:
    threads: list[int] = []

    def provider(reference: str) -> str | None:
        threads.append(threading.get_ident())
        return token_provider(reference)

    sw.set_credential_provider(provider)

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        result = await sw.query_async("status", "summary", params={"region": "us"}, snapshot=True)
        page = await sw.history_async("status", "summary")
        return result, page

    result, page = asyncio.run(main())
    assert result["values"]["state"] == "ok"
    assert threads and threads[0] != threading.get_ident()
    assert [s["snapshotId"] for s in page["snapshots"]] == [result["snapshotId"]]
    assert_conforming(upstream.requests[0])


# ---- 2. the escape test ----------------------------------------------------------------------

LONG = "x" * 10_000
HOSTILE_NAMES = ["https://evil.com", "//evil.com", "../../etc/passwd", LONG, "nope", "", "status/../x", "status\r\n"]
BASE = {"source": "status", "endpoint": "summary"}


def _escape_cases() -> list[tuple[str, str, Any, type[warden.WardenError], str]]:
    """(id, tool, arguments, exception, reason): every one must be refused before any I/O."""
    cases: list[tuple[str, str, Any, type[warden.WardenError], str]] = []
    oow = warden.OutOfWindow
    for key in FORBIDDEN_KEYS:
        value: Any = {"X-Evil": "1"} if key == "headers" else "http://127.0.0.1:1/evil"
        cases.append((f"query+{key}", "warden_query", {**BASE, key: value}, oow, "invalid_params"))
        cases.append((f"history+{key}", "warden_history", {**BASE, key: value}, oow, "invalid_params"))
        cases.append(
            (f"diff+{key}", "warden_diff", {"a": SNAPSHOT_UNKNOWN, "b": SNAPSHOT_UNKNOWN, key: value}, oow, "invalid_params")
        )
        cases.append((f"sources+{key}", "warden_sources", {key: value}, oow, "invalid_params"))
    for index, name in enumerate(HOSTILE_NAMES):
        cases.append((f"query-source-{index}", "warden_query", {**BASE, "source": name}, oow, "unknown_source"))
        cases.append((f"query-endpoint-{index}", "warden_query", {**BASE, "endpoint": name}, oow, "unknown_endpoint"))
        cases.append((f"history-source-{index}", "warden_history", {**BASE, "source": name}, oow, "unknown_source"))
        cases.append(
            (f"history-endpoint-{index}", "warden_history", {**BASE, "endpoint": name}, oow, "unknown_endpoint")
        )
    bad_params: list[Any] = [
        {"region": "eu\r\nX-Evil: 1"},
        {"region": "us\n"},
        {"region": "../"},
        {"region": "../../etc/passwd"},
        {"region": LONG},
        {"region": 1},
        {"region": None},
        {"region": ["us"]},
        {"q": "a\r\nHost: evil.com"},
        {"q": "a\nb"},
        {"q": "\u0000"},
        {"q": "y" * 41},
        {"q": LONG},
        {"q": 5},
        {"limit": "5"},
        {"limit": 5.5},
        {"limit": 0},
        {"limit": 51},
        {"limit": 2**70},
        {"limit": True},
        {"evil": "1"},
        {"url": "https://evil.com"},
        {"path": "/admin"},
        {"../region": "us"},
        {"region\r\n": "us"},
        "region=us",
        ["us"],
    ]
    for index, params in enumerate(bad_params):
        cases.append((f"query-params-{index}", "warden_query", {**BASE, "params": params}, oow, "invalid_params"))
        cases.append((f"history-params-{index}", "warden_history", {**BASE, "params": params}, oow, "invalid_params"))
    bad_fields: list[Any] = [["/debug"], ["#/x"], ["../x"], ["nope"], ["secrets/../x"], ["/status/indicator"], [LONG]]
    for index, fields in enumerate(bad_fields):
        cases.append((f"query-fields-{index}", "warden_query", {**BASE, "fields": fields}, oow, "unknown_field"))
    for index, fields in enumerate(["state", {"state": 1}, [1]]):
        cases.append((f"query-fields-type-{index}", "warden_query", {**BASE, "fields": fields}, oow, "invalid_params"))
    cases.append(("query-snapshot-type", "warden_query", {**BASE, "snapshot": "yes"}, oow, "invalid_params"))
    cases.append(("query-not-an-object", "warden_query", ["status", "summary"], oow, "invalid_params"))
    pages: list[dict[str, Any]] = [
        {"limit": 0},
        {"limit": 101},
        {"limit": "5"},
        {"limit": -1},
        {"cursor": "../../x"},
        {"cursor": LONG},
        {"cursor": 5},
    ]
    for index, page in enumerate(pages):
        cases.append((f"history-page-{index}", "warden_history", {**BASE, **page}, oow, "invalid_page"))
    for index, ident in enumerate(["../../etc/passwd", "https://evil.com", LONG, "snp_" + "g" * 32, ""]):
        cases.append((f"diff-id-{index}", "warden_diff", {"a": ident, "b": SNAPSHOT_UNKNOWN}, oow, "invalid_params"))
    return cases


ESCAPE_CASES = _escape_cases()


@pytest.mark.parametrize(
    "tool,arguments,error,reason", [case[1:] for case in ESCAPE_CASES], ids=[case[0] for case in ESCAPE_CASES]
)
def test_escape_attempts_are_refused_before_any_io(
    sw: warden.Warden, upstream: Upstream, tool: str, arguments: Any, error: type[warden.WardenError], reason: str
) -> None:
    sw.set_credential_provider(token_provider)
    with pytest.raises(error) as refused:
        sw.call_tool(tool, arguments)
    assert refused.value.reason == reason, refused.value
    assert refused.value.code == error.default_code
    no_secret(str(refused.value))
    no_secret(refused.value.details)
    assert upstream.connections == 0


def test_the_typed_api_refuses_hostile_values_too(sw: warden.Warden, upstream: Upstream) -> None:
    sw.set_credential_provider(token_provider)
    attempts: list[tuple[Callable[[], Any], str]] = []
    for name in HOSTILE_NAMES:
        attempts.append((functools.partial(sw.query, name, "summary"), "unknown_source"))
        attempts.append((functools.partial(sw.query, "status", name), "unknown_endpoint"))
        attempts.append((functools.partial(sw.history, name, "summary"), "unknown_source"))
        attempts.append((functools.partial(sw.history, "status", name), "unknown_endpoint"))
    attempts += [
        (lambda: sw.query("status", "summary", params={"region": "eu\r\nX: 1"}), "invalid_params"),
        (lambda: sw.query("status", "summary", params={"url": "https://evil.com"}), "invalid_params"),
        (lambda: sw.query("status", "summary", params={"limit": "5"}), "invalid_params"),
        (lambda: sw.query("status", "summary", fields=["/debug"]), "unknown_field"),
        (lambda: sw.query("status", "summary", fields=("../x",)), "unknown_field"),
        (lambda: sw.history("status", "summary", limit=0), "invalid_page"),
        (lambda: sw.history("status", "summary", limit=101), "invalid_page"),
        (lambda: sw.history("status", "summary", cursor="../../x"), "invalid_page"),
        (lambda: sw.diff("../../etc/passwd", SNAPSHOT_UNKNOWN), "invalid_params"),
    ]
    for attempt, reason in attempts:
        with pytest.raises(warden.OutOfWindow) as refused:
            attempt()
        assert refused.value.reason == reason
        assert isinstance(refused.value, warden.Refused)
    assert upstream.connections == 0

    # Then one legitimate read: the only request the upstream ever saw.
    sw.query("status", "summary", params={"region": "us"})
    assert upstream.connections == 1
    (seen,) = upstream.requests
    assert seen.target == "/v2/summary?region=us"
    assert_conforming(seen)


def test_a_redirect_is_refused_and_never_followed(sw: warden.Warden, upstream: Upstream) -> None:
    elsewhere = Upstream()
    try:

        def redirect(server: Upstream, seen: Seen, conn: socket.socket) -> None:
            json_response(
                conn, {}, status="302 Found", extra=f"Location: http://127.0.0.1:{elsewhere.port}/steal?x=1\r\n"
            )

        upstream.respond = redirect
        sw.set_credential_provider(token_provider)
        with pytest.raises(warden.FetchFault) as refused:
            sw.query("status", "summary", snapshot=True)
        assert refused.value.reason == "redirect_refused"
        assert refused.value.code == "WARDEN_RESULT_FETCH"
        assert str(elsewhere.port) not in refused.value.message
        (seen,) = upstream.requests
        assert_conforming(seen)
        assert elsewhere.connections == 0
        assert sw.history("status", "summary")["snapshots"] == []
    finally:
        elsewhere.close()


# ---- 3. snapshots, history, diff ------------------------------------------------------------


def test_snapshots_history_paging_and_diff(sw: warden.Warden, upstream: Upstream) -> None:
    sw.set_credential_provider(token_provider)
    first = sw.query("status", "summary", params={"region": "us"}, snapshot=True)
    upstream.state, upstream.count = "degraded", 7
    second = sw.query("status", "summary", params={"region": "us"}, snapshot=True)
    third = sw.query("status", "summary", params={"region": "us"}, snapshot=True)
    ids = [first["snapshotId"], second["snapshotId"], third["snapshotId"]]
    assert all(isinstance(i, str) and i.startswith("snp_") for i in ids) and len(set(ids)) == 3

    page = sw.history("status", "summary", params={"region": "us"}, limit=2)
    assert [s["snapshotId"] for s in page["snapshots"]] == [ids[2], ids[1]]  # newest first
    assert page["hasMore"] is True and page["nextCursor"]
    rest = sw.history("status", "summary", params={"region": "us"}, cursor=page["nextCursor"], limit=2)
    assert [s["snapshotId"] for s in rest["snapshots"]] == [ids[0]]
    assert rest["hasMore"] is False and "nextCursor" not in rest
    assert rest["snapshots"][0]["values"]["state"] == "ok"
    assert sw.history("status", "summary", params={"region": "eu"})["snapshots"] == []
    no_secret(page)

    diff = sw.diff(ids[0], ids[1])
    assert (diff["a"], diff["b"]) == (ids[0], ids[1])
    assert diff["total"] >= 2 and diff["omitted"] == 0
    changed = {entry["path"]: entry for entry in diff["entries"]}
    assert all(entry["change"] == "changed" for entry in diff["entries"])
    assert any("state" in path for path in changed) and any("count" in path for path in changed)
    state = next(entry for path, entry in changed.items() if "state" in path)
    assert (state["before"], state["after"]) == ("ok", "degraded")
    assert sw.diff(ids[1], ids[2])["entries"] == []
    no_secret(diff)

    with pytest.raises(warden.NotFound) as missing:
        sw.diff(ids[0], SNAPSHOT_UNKNOWN)
    assert missing.value.reason == "snapshot_not_found"
    assert missing.value.code == "WARDEN_RESULT_NOT_FOUND"

    other = sw.query("status", "summary", params={"region": "eu"}, snapshot=True)
    with pytest.raises(warden.OutOfWindow) as different:
        sw.diff(ids[0], other["snapshotId"])
    assert different.value.reason == "invalid_params"

    async def diff_async() -> dict[str, Any]:
        return await sw.diff_async(ids[0], ids[1])

    assert asyncio.run(diff_async()) == diff
    assert len(upstream.requests) == 4


# ---- 4. the credential provider -------------------------------------------------------------


@pytest.mark.parametrize(
    "provider",
    [
        pytest.param(lambda reference: None, id="returns-None"),
        pytest.param(lambda reference: 1 / 0, id="raises"),
        pytest.param(lambda reference: (_ for _ in ()).throw(KeyboardInterrupt()), id="raises-BaseException"),
        pytest.param(lambda reference: TOKEN.encode(), id="returns-bytes"),
        pytest.param(lambda reference: 12345, id="returns-int"),
        pytest.param(lambda reference: "\ud800", id="returns-unencodable-str"),
        pytest.param(lambda: TOKEN, id="wrong-arity"),
    ],
)
def test_a_provider_without_a_value_fails_the_query_without_connecting(
    sw: warden.Warden, upstream: Upstream, provider: Callable[..., Any]
) -> None:
    sw.set_credential_provider(provider)
    with pytest.raises(warden.FetchFault) as failed:
        sw.query("status", "summary")
    assert failed.value.reason == "credential_unavailable"
    assert failed.value.code == "WARDEN_RESULT_FETCH"
    assert upstream.connections == 0
    # The handle is still usable.
    sw.set_credential_provider(token_provider)
    sw.query("status", "summary")
    assert_conforming(upstream.requests[0])


def test_a_provider_exception_is_logged_without_its_message(
    sw: warden.Warden, upstream: Upstream, caplog: pytest.LogCaptureFixture
) -> None:
    def leaky(reference: str) -> str:
        raise RuntimeError(f"vault said {TOKEN}")

    sw.set_credential_provider(leaky)
    with caplog.at_level("WARNING", logger="warden"), pytest.raises(warden.FetchFault) as failed:
        sw.query("status", "summary")
    assert failed.value.reason == "credential_unavailable"
    assert "RuntimeError" in caplog.text and REFERENCE in caplog.text
    assert TOKEN not in caplog.text
    no_secret(failed.value.details)
    assert upstream.connections == 0


def test_the_callback_is_kept_alive_by_the_warden(sw: warden.Warden, upstream: Upstream) -> None:
    def make() -> Callable[[str], str | None]:
        return lambda reference: TOKEN

    sw.set_credential_provider(make())
    gc.collect()
    sw.query("status", "summary")
    assert_conforming(upstream.requests[0])
    with pytest.raises(warden.InvalidInput):
        sw.set_credential_provider("not callable")  # type: ignore[arg-type]


def stall_mid_body(server: Upstream, seen: Seen, conn: socket.socket) -> None:
    """Headers and part of the body, then wait for the test (`proceed`), then the rest."""
    auth = seen.header("authorization")
    body = json.dumps({"status": {"indicator": server.state}, "count": server.count, "debug": auth}).encode()
    conn.sendall(
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode("ascii")
        + body[:5]
    )
    server.received.set()
    server.proceed.wait(10)
    try:
        conn.sendall(body[5:])
    except OSError:
        pass


def test_replacing_the_provider_during_a_query_keeps_the_old_callback_alive(
    sw: warden.Warden, upstream: Upstream
) -> None:
    upstream.respond = stall_mid_body
    sw.set_credential_provider(lambda reference: TOKEN)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = sw.query("status", "summary")
        except BaseException as exc:  # pragma: no cover - reported below
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    assert upstream.received.wait(10)
    sw.set_credential_provider(token_provider)
    gc.collect()
    assert len(sw._callbacks) == 2  # the running query's callback is still referenced
    upstream.proceed.set()
    worker.join(10)
    assert outcome.get("result", {}).get("values", {}).get("state") == "ok", outcome
    assert len(sw._callbacks) == 1


# ---- 5. cancellation -------------------------------------------------------------------------


def test_cancelling_from_another_thread_aborts_a_stalled_query(sw: warden.Warden, upstream: Upstream) -> None:
    upstream.respond = stall_mid_body
    sw.set_credential_provider(token_provider)

    with warden.CancelToken() as token:

        def cancel_when_the_server_has_the_request() -> None:
            if upstream.received.wait(10):
                token.cancel()
                upstream.proceed.set()  # the next read returns, and the query sees the cancel

        threading.Thread(target=cancel_when_the_server_has_the_request, daemon=True).start()
        with pytest.raises(warden.FetchFault) as aborted:
            sw.query("status", "summary", snapshot=True, cancel=token)
        assert token.cancelled
    assert aborted.value.reason == "aborted"
    assert aborted.value.code == "WARDEN_RESULT_FETCH"
    assert token.closed
    assert sw.history("status", "summary")["snapshots"] == []  # nothing was stored


def test_a_cancelled_token_stops_a_query_before_it_connects(sw: warden.Warden, upstream: Upstream) -> None:
    sw.set_credential_provider(token_provider)
    token = warden.CancelToken()
    token.cancel()
    with pytest.raises(warden.FetchFault) as aborted:
        sw.call_tool("warden_query", dict(BASE), cancel=token)
    assert aborted.value.reason == "aborted"
    assert upstream.connections == 0
    token.close()
    token.close()
    token.cancel()  # after close: a no-op, never a use of freed memory
    with pytest.raises(warden.InvalidInput):
        sw.query("status", "summary", cancel=token)
    with pytest.raises(warden.InvalidInput):
        sw.query("status", "summary", cancel="token")  # type: ignore[arg-type]


def test_closing_a_token_while_a_query_uses_it_defers_the_free(sw: warden.Warden, upstream: Upstream) -> None:
    upstream.respond = stall_mid_body
    sw.set_credential_provider(token_provider)
    token = warden.CancelToken()
    outcome: dict[str, Any] = {}

    def run() -> None:
        outcome["result"] = sw.query("status", "summary", cancel=token)

    worker = threading.Thread(target=run)
    worker.start()
    assert upstream.received.wait(10)
    token.close()
    assert token._pointer is not None  # still in use by the running query
    del token
    gc.collect()
    upstream.proceed.set()
    worker.join(10)
    assert outcome["result"]["values"]["state"] == "ok"


def test_cancelling_before_the_server_answers_reports_aborted(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wait for the response head is not interrupted (timeout_ms bounds it), but a query
    # whose token was triggered reports `aborted`, not `timeout`.
    def never_answer(server: Upstream, seen: Seen, conn: socket.socket) -> None:
        server.received.set()
        server.proceed.wait(10)

    upstream.respond = never_answer
    monkeypatch.delenv(REFERENCE, raising=False)
    config = write_config(tmp_path, upstream.port, timeout_ms=500)
    with warden.Warden(store=tmp_path / "stall.redb", config=config) as w, warden.CancelToken() as token:
        w.set_credential_provider(token_provider)

        def cancel_when_the_server_has_the_request() -> None:
            if upstream.received.wait(10):
                token.cancel()

        threading.Thread(target=cancel_when_the_server_has_the_request, daemon=True).start()
        with pytest.raises(warden.FetchFault) as failed:
            w.query("status", "summary", cancel=token)
    assert failed.value.reason == "aborted"


@pytest.mark.parametrize("own_token", [True, False], ids=["caller-token", "private-token"])
def test_cancelling_the_awaiting_task_aborts_query_async(
    sw: warden.Warden, upstream: Upstream, own_token: bool
) -> None:
    upstream.respond = stall_mid_body
    sw.set_credential_provider(token_provider)
    token = warden.CancelToken() if own_token else None

    async def main() -> None:
        task = asyncio.ensure_future(sw.query_async("status", "summary", snapshot=True, cancel=token))
        assert await asyncio.to_thread(upstream.received.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        upstream.proceed.set()  # the worker's next read returns, and its query sees the cancel

    asyncio.run(main())  # returns once the worker thread has finished
    if token is not None:
        assert token.cancelled
        token.close()
    # The query in the worker thread was aborted: nothing was stored.
    assert sw.history("status", "summary")["snapshots"] == []
    assert len(upstream.requests) == 1


# ---- 6. the tool schema ----------------------------------------------------------------------


def _property_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict):
            yield from properties
        for value in node.values():
            yield from _property_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _property_names(value)


def test_tool_schema_offers_four_tools_and_no_way_out(sw: warden.Warden, upstream: Upstream) -> None:
    tools = sw.tool_schema()
    assert [tool["name"] for tool in tools] == ["warden_sources", "warden_query", "warden_history", "warden_diff"]
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        assert tool["input_schema"]["additionalProperties"] is False
        names = set(_property_names(tool["input_schema"]))
        assert names.isdisjoint(FORBIDDEN_KEYS), (tool["name"], names & set(FORBIDDEN_KEYS))
    query = tools[1]["input_schema"]["properties"]
    assert query["source"]["enum"] == ["status"]
    assert query["endpoint"]["enum"] == ["summary"]
    text = json.dumps(tools)
    for leak in (str(upstream.port), "127.0.0.1", REFERENCE, "/status/indicator"):
        assert leak not in text
    with pytest.raises(warden.InvalidInput):
        sw.call_tool("warden_fetch", {"url": "https://evil.com"})
    assert sw.call_tool("warden_sources") == sw.sources()
    assert upstream.connections == 0


def test_sights_need_a_configuration(store: Path) -> None:
    with warden.Warden(store=store) as bare:
        for call in (bare.sources, bare.tool_schema, lambda: bare.query("status", "summary")):
            with pytest.raises(warden.ConfigError):
                call()


# ---- 7. the store never holds the credential -------------------------------------------------


def test_the_store_file_never_holds_the_credential(
    tmp_path: Path, upstream: Upstream, sight_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REFERENCE, raising=False)
    config = write_config(tmp_path, upstream.port)
    with warden.Warden(store=sight_store, config=config) as w:
        w.set_credential_provider(token_provider)
        ids = []
        for state in ("ok", "degraded", "ok"):
            upstream.state = state
            ids.append(w.query("status", "summary", params={"region": "us"}, snapshot=True)["snapshotId"])
        w.history("status", "summary")
        w.diff(ids[0], ids[1])
        for arguments in ({**BASE, "url": TOKEN}, {**BASE, "headers": {"Authorization": TOKEN}}):
            with pytest.raises(warden.OutOfWindow):
                w.call_tool("warden_query", arguments)
    assert len(upstream.requests) == 3
    data = sight_store.read_bytes()
    forms = [
        TOKEN,
        f"Bearer {TOKEN}",
        base64.b64encode(TOKEN.encode()).decode(),
        base64.urlsafe_b64encode(TOKEN.encode()).decode(),
        base64.b64encode(f"Bearer {TOKEN}".encode()).decode(),
    ]
    for form in forms:
        assert form.encode() not in data, form
        assert form.encode("utf-16-le") not in data, form
