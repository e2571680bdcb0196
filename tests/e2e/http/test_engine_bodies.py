"""`coop serve` refuses before it reads (issue 26, item 4), on a real process.

- A keyless 64 MB body, sized by `Content-Length` or chunked, to every route of the engine
  service is answered 401, 403 or 413 without being read: the engine's peak resident set
  (VmHWM, from /proc) grows by less than 10 MB over all of them. In local mode and after a
  cutover alike (the compat routes answer 409 to every caller in local mode, before the body).
- With the service key, 100k-deep JSON, arrays or objects, is answered 4xx, never 500.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.procs import coop, memory_kb
from tests.support.raw_http import send_body
from tests.support.stack import SERVICE_KEY, SERVICE_KEY_HEADER, Stack

pytestmark = pytest.mark.timeout(180)

BODY_BYTES = 64 * 1024 * 1024
GROWTH_LIMIT_KB = 10 * 1024
DEPTH = 100_000
ROUTES = [
    ("POST", "/compat/call"),
    ("POST", "/compat/reconcile"),
    ("GET", "/status"),
    ("POST", "/api/coop/phone/answer"),
    ("GET", "/api/coop/phone/summary"),
    ("POST", "/no/such/route"),
]
REFUSED = {401, 403, 413}
LOCAL_COMPAT = {("/compat/call", 409), ("/compat/reconcile", 409)}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("bodies"))
    try:
        stack.start_test_door()
        stack.start_engine()
        yield stack
    finally:
        stack.close()


def _port(stack: Stack) -> str:
    """The engine's socket: every route of its app is there."""
    assert stack.engine.socket_path
    return stack.engine.socket_path


def _flood(stack: Stack) -> tuple[dict[tuple[str, str, bool], int], int]:
    """A keyless 64 MB body, sized and chunked, to every route: the answers, and how much the
    engine's peak resident set grew meanwhile (kB)."""
    port = _port(stack)
    for method, path in ROUTES[:2]:  # warm the routes: their first answer allocates a little
        send_body(port, method, path, size=16, chunked=False)
    before = memory_kb(stack.engine.pid)["VmHWM"]
    answers = {
        (method, path, chunked): send_body(port, method, path, size=BODY_BYTES, chunked=chunked)
        for method, path in ROUTES
        for chunked in (False, True)
    }
    return answers, memory_kb(stack.engine.pid)["VmHWM"] - before


def test_a_keyless_64_mb_body_to_every_route_is_refused_before_it_is_read(stack: Stack) -> None:
    answers, grown_kb = _flood(stack)
    # In local mode the compat routes answer 409 to everyone (no owner here), before the body.
    refused = {k: v for k, v in answers.items() if v in REFUSED or (k[1], v) in LOCAL_COMPAT}
    assert (answers, grown_kb < GROWTH_LIMIT_KB) == (refused, True), f"peak RSS grew {grown_kb} kB"


def test_after_a_cutover_a_keyless_64_mb_body_is_refused_before_it_is_read(stack: Stack) -> None:
    done = coop("cutover", env=stack.env(), inherit=False)
    assert done.returncode == 0, done.stderr
    answers, grown_kb = _flood(stack)
    refused = {k: v for k, v in answers.items() if v in REFUSED}
    assert (answers, grown_kb < GROWTH_LIMIT_KB) == (refused, True), f"peak RSS grew {grown_kb} kB"


@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_deep_json_with_the_key_gets_a_4xx_not_a_500(stack: Stack, opening: str) -> None:
    closing = "]" if opening == "[" else "}"
    body = opening * DEPTH + ("1" if opening != "[" else "") + closing * DEPTH
    answer = stack.engine.post(
        "/api/coop/phone/answer",
        content=body,
        headers={SERVICE_KEY_HEADER: SERVICE_KEY, "Content-Type": "application/json"},
        timeout=30.0,
    )
    assert 400 <= answer.status_code < 500, answer.text
