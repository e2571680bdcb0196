"""The engine service guards every route on the headers, before it reads a byte of the body
(issue 26, item 4), closing the class rather than the one route the flood hit:

- every route the app has, and any path it has not, answers a keyless caller with a 64 MB
  `Content-Length` without the app asking for the body (the ASGI `receive` is never called);
- with the service key, JSON of any shape, depth and size up to the bound is answered, never
  with a 5xx; nesting past `MAX_JSON_DEPTH` is a 400 and a body past the bound a 413;
- `json_too_deep` agrees with the depth of the value that was serialised.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.metrics import METRICS_PATH, mount_metrics
from engine.owner import phone
from engine.owner.app import MAX_BODY_BYTES, Owner, create_app
from plumbing.http.body import MAX_JSON_DEPTH, json_too_deep

KEY = "guard-before-body-key"
FLOOD_BYTES = 64 * 1024 * 1024
REFUSED_UNREAD = {401, 403, 409, 413}


def _app(db: Path) -> Any:
    app = create_app(Owner(db), service_key=phone.ServiceKey(hashlib.sha256(KEY.encode()).digest()))
    mount_metrics(app, db)
    return app


async def _call_unread(app: Any, method: str, path: str) -> int:
    """`method path` with a declared 64 MB body that is never sent: the answer's status."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8764"), (b"content-length", str(FLOOD_BYTES).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8764),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError(f"{method} {path}: the body was read before the guard refused")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return int(sent[0]["status"])


async def test_every_route_refuses_a_keyless_flood_without_reading_it(tmp_path: Path) -> None:
    app = _app(tmp_path / "coop.db")
    # Every route in the schema (a new one is covered without a line here), and /metrics.
    paths = app.openapi()["paths"]
    routes = [(m.upper(), path) for path, ops in paths.items() for m in ops]
    routes.append(("GET", METRICS_PATH))
    assert len(routes) >= 6  # the compat, phone, status and metrics routes at least
    answers = {(m, p): await _call_unread(app, m, p) for m, p in [*routes, ("POST", "/nowhere")]}
    assert {k: v for k, v in answers.items() if v not in REFUSED_UNREAD} == {}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=40,
)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


def _nest(value: object, depth: int) -> object:
    for _ in range(depth):
        value = [value] if depth % 2 else {"k": value}
    return value


@given(value=json_values, extra=st.integers(0, 3 * MAX_JSON_DEPTH))
def test_the_depth_scan_agrees_with_the_value(value: object, extra: int) -> None:
    nested = _nest(value, extra)
    raw = json.dumps(nested).encode()
    assert json_too_deep(raw, MAX_JSON_DEPTH) == (_depth(nested) > MAX_JSON_DEPTH)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return httpx.ASGITransport(app=_app(tmp_path_factory.mktemp("bodies") / "coop.db"))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    value=json_values,
    extra=st.integers(0, 2 * MAX_JSON_DEPTH),
    padding=st.sampled_from([0, MAX_BODY_BYTES // 2, MAX_BODY_BYTES + 1]),
)
async def test_no_body_shape_gets_a_5xx(
    client: Any, value: object, extra: int, padding: int
) -> None:
    body = {"answer_key": "a-" + "0" * 32, "request_id": 1, "ask_key": "q-" + "0" * 32}
    body["text"] = _nest(value, extra) if padding == 0 else "x" * padding
    raw = json.dumps(body).encode()
    async with httpx.AsyncClient(transport=client, base_url="http://127.0.0.1") as http:
        answer = await http.post(
            phone.ANSWER_PATH,
            content=raw,
            headers={phone.SERVICE_KEY_HEADER: KEY, "Content-Type": "application/json"},
        )
    assert answer.status_code < 500, answer.text
    if len(raw) > MAX_BODY_BYTES:
        assert answer.status_code == 413
    elif json_too_deep(raw, MAX_JSON_DEPTH):
        assert answer.status_code == 400
