"""The ledger service's phone routes fuzzed (issue 21): a real `coop serve` (its owner endpoint on
uvicorn, loopback) takes any body on `POST /api/coop/phone/answer` (wrong types, extra fields,
huge or blank text, any unicode, negative and huge ids, 2^63, floats, answer keys of every
shape, JSON that is not an object, bytes that are not JSON or not UTF-8) and any service-key
header on both routes (none, wrong, with a NUL, non-ASCII bytes, very long), sent as raw bytes
over a socket, since an HTTP client refuses to send most of them.

Whatever arrives: never a 5xx; a refusal is a 4xx, with a JSON `detail` whenever the route
answered (a header the HTTP parser itself refuses is answered by uvicorn, before the app); and a
refusal writes nothing to the ledger (its requests, events and answer keys). A body the route
accepts answers 200 with one of the five outcomes.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.phone import LEDGER_TABLES, digest
from tests.support.procs import coop
from tests.support.stack import SERVICE_KEY, SERVICE_KEY_HEADER, Stack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ANSWER = "/api/coop/phone/answer"
SUMMARY = "/api/coop/phone/summary"
OUTCOMES = {"closed", "noted", "already_closed", "not_a_choice", "unknown_request"}
TABLES = (*LEDGER_TABLES, "coop_answers")
SOCKET_TIMEOUT_S = 10.0
FUZZ_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Service:
    stack: Stack
    socket_path: str  # `coop serve`'s socket: every route of its app is there

    def send(self, method: str, path: str, body: bytes = b"", key: bytes | None = None) -> Answer:
        """One HTTP/1.1 request written as bytes (any header value an HTTP client would refuse);
        the status and body of the answer."""
        head = [
            f"{method} {path} HTTP/1.1".encode(),
            b"Host: localhost",
            b"Content-Type: application/json",
            b"Content-Length: " + str(len(body)).encode(),
            b"Connection: close",
        ]
        if key is not None:
            head.append(SERVICE_KEY_HEADER.encode() + b": " + key)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(SOCKET_TIMEOUT_S)
            sock.connect(self.socket_path)
            sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        status_line, _, rest = received.partition(b"\r\n")
        headers, _, payload = rest.partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in headers.lower():
            payload = dechunk(payload)
        return Answer(int(status_line.split()[1]), payload)

    def ledger(self) -> dict[str, str]:
        return digest(self.stack.coop_db, TABLES)


def dechunk(payload: bytes) -> bytes:
    found = b""
    while payload:
        size_line, _, payload = payload.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        found, payload = found + payload[:size], payload[size + 2 :]
    return found


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`coop serve` over a ledger with request #1 (approve / decline), #2 (no choices) and #3
    (closed), all to the owner; its notifier's door refuses (nothing here needs it)."""
    folder = tmp_path_factory.mktemp("phone-routes")
    stack = Stack(folder)
    try:
        for args in (("--choices", "approve,decline"), (), ("--choices", "yes,no")):
            done = coop("request", "add", "order?", "--to", "owner", *args, env=stack.env())
            assert done.returncode == 0, done.stderr
        done = coop("request", "close", "3", "--as", "owner", "--summary", "no", env=stack.env())
        assert done.returncode == 0, done.stderr
        # No door at <folder>/door.sock: the notifier's rows wait, which is not under test.
        stack.engine.start()
        stack.started.append(stack.engine)
        assert stack.engine.socket_path
        yield Service(stack, stack.engine.socket_path)
        assert set(stack.stop().values()) == {0}
    finally:
        stack.close()


def no_trace(service: Service) -> None:
    log = service.stack.engine.log()
    assert "Traceback" not in log, service.stack.engine.log_tail(40)
    assert "Exception in ASGI application" not in log


def refused_in_words(answer: Answer) -> None:
    """A 4xx whose body is JSON with a `detail`."""
    assert 400 <= answer.status < 500, (answer.status, answer.body[:300])
    detail = answer.json()["detail"]
    assert detail, answer.body[:300]


# ---- the bodies ------------------------------------------------------------------------------

VALID_KEY = "a-" + "0" * 32
odd_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
huge = st.sampled_from([2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 10**40, 2**64])
ids = st.one_of(
    st.integers(-5, 5), huge, st.integers(), st.floats(), st.sampled_from([True, False, None]),
    st.sampled_from(["1", "", "1.0", "0x1", "1e3"]), st.just([1]), st.just({"id": 1}),
)  # fmt: skip
ODD_KEYS = [
    "", "a-", "A-" + "0" * 32, "a-" + "0" * 31, "a-" + "0" * 33, "a-" + "g" * 32,
    "a-" + "0" * 32 + "\n", "a-" + "0" * 32 + "\x00", " a-" + "0" * 32, "a-" + "F" * 32,
    "a-" + "0" * 32 * 1000, "a-" + "\uff10" * 32,
]  # fmt: skip
answer_keys = st.one_of(
    st.just(VALID_KEY),
    st.from_regex(r"a-[0-9a-f]{32}", fullmatch=True),
    st.sampled_from(ODD_KEYS),
    odd_text,
    st.integers(),
    st.none(),
    st.just(["a-" + "0" * 32]),
)
labels = st.one_of(
    st.sampled_from(["approve", "APPROVE", " approve ", "decline", "maybe", "", " ", "\x00"]),
    odd_text,
    st.sampled_from(["x" * 256, "x" * 257, "x" * 4000, "x" * 4001, "x" * 100_000]),
    st.integers(),
    st.floats(),
    st.none(),
    st.just(["approve"]),
    st.just({"label": "approve"}),
)
bodies = st.fixed_dictionaries(
    {"answer_key": answer_keys, "request_id": ids},
    optional={
        "choice": labels,
        "text": labels,
        "via": st.just("cli"),
        "actor": st.just("owner"),
        "request": st.just({"id": 1}),
    },
)
# In shape, hostile within it: the route reads these and answers one of its outcomes.
near_valid = st.builds(
    lambda key, request_id, field, value: {
        "answer_key": key,
        "request_id": request_id,
        field: value,
    },
    st.from_regex(r"a-[0-9a-f]{32}", fullmatch=True),
    st.one_of(st.integers(1, 4), st.sampled_from([2**63 - 1, 2**31, 10**12])),
    st.sampled_from(["choice", "text"]),
    st.one_of(
        st.sampled_from(["approve", "APPROVE", " decline ", "yes", "x" * 256, "x" * 4000, "\x00"]),
        st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60),
    ),
)
raw_bodies = st.one_of(
    st.sampled_from([b"", b"{", b"null", b"[]", b'"x"', b"1", b"\xff\xfe", b"{}" * 1000]),
    st.binary(max_size=64),
    st.sampled_from(
        [b'{"answer_key": "\xff"}', b'{"request_id": 1e999}', b"[" * 5000 + b"]" * 5000]
    ),
)  # fmt: skip


def encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body, allow_nan=True).encode()


def test_any_answer_body_is_refused_in_words_or_answered_and_a_refusal_writes_nothing(
    service: Service,
) -> None:
    @FUZZ_SETTINGS
    @given(body=st.one_of(bodies.map(encoded), near_valid.map(encoded), raw_bodies))
    def run(body: bytes) -> None:
        before = service.ledger()
        answer = service.send("POST", ANSWER, body, key=SERVICE_KEY.encode())
        if answer.status == 200:
            assert answer.json()["outcome"] in OUTCOMES, answer.body[:300]
        else:
            refused_in_words(answer)
            assert service.ledger() == before, body[:300]

    run()
    no_trace(service)


@pytest.mark.parametrize(
    "body",
    [
        b'{"answer_key": "a-00000000000000000000000000000000", "request_id": 1e999, '
        b'"choice": "approve"}',
        b'{"answer_key": "a-00000000000000000000000000000000", "request_id": NaN, '
        b'"choice": "approve"}',
        b'{"answer_key": "a-00000000000000000000000000000000", "request_id": 1, '
        b'"choice": -Infinity}',
    ],
)
def test_a_number_json_reads_as_infinity_or_nan_is_refused_in_words(
    service: Service, body: bytes
) -> None:
    """Found by the fuzz: FastAPI's own 422 echoed the refused input, and a float JSON cannot
    encode (1e999 reads as infinity) turned the refusal into a 500 and a traceback."""
    before = service.ledger()
    refused_in_words(service.send("POST", ANSWER, body, key=SERVICE_KEY.encode()))
    assert service.ledger() == before
    no_trace(service)


# ---- the service key's header ------------------------------------------------------------------

RIGHT = SERVICE_KEY.encode()
# Not a line break (a second header line would be another request's business) and not the
# white space HTTP strips around a value (` KEY ` is the key, as HTTP says).
header_bytes = st.binary(min_size=1, max_size=80).filter(
    lambda key: b"\r" not in key and b"\n" not in key and key.strip(b" \t") == key
)
keys = st.one_of(
    st.none(),
    header_bytes,
    st.sampled_from(
        [
            RIGHT + b"\x00",
            b"\x00" + RIGHT,
            RIGHT[:-1],
            RIGHT + b"x",
            RIGHT.upper(),
            RIGHT * 2,
            RIGHT[:8] + b"\x00" + RIGHT[9:],
            b"x" * 8_000,
            b"x" * 100_000,
            RIGHT + b"\xff",
            "schl\u00fcssel".encode(),
            "\u00e9".encode("latin-1"),
        ]
    ),
)


def test_any_service_key_but_the_right_one_is_refused_and_writes_nothing(
    service: Service,
) -> None:
    """A body that would close request #1 were the key right: with any other header value it
    is refused (401 or 403 in words from the route, or a 4xx from the HTTP parser for a value
    it cannot read), and the ledger is as it was. The summary is refused the same way."""
    body = encoded({"answer_key": VALID_KEY, "request_id": 1, "choice": "approve"})

    @FUZZ_SETTINGS
    @given(key=keys, summary=st.booleans())
    def run(key: bytes | None, summary: bool) -> None:
        before = service.ledger()
        if summary:
            answer = service.send("GET", SUMMARY, key=key)
        else:
            answer = service.send("POST", ANSWER, body, key=key)
        assert 400 <= answer.status < 500, (answer.status, answer.body[:200])
        if answer.status in (401, 403):
            refused_in_words(answer)
        assert service.ledger() == before

    run()
    no_trace(service)
    assert service.send("GET", SUMMARY, key=RIGHT).status == 200
