"""A property-based fuzz of `POST /compat/call` with the credential, over one real uvicorn and one
keep-alive connection: random method names, argument lists and keyword values of every JSON type
(huge, odd and invalid-Unicode strings, integers past 64 bits, nested lists and objects), mixed
with well-formed calls that reach deep into the verbs. No answer is a 5xx other than 503, the
connection is never reset, and the database stays whole.

Sized to what it proves, not to a round count: `CALLS_PER_VERB` well-formed calls of each verb
(drawn per verb, so every verb is met, not only the ones a shared draw happens to favour) and
`RANDOM_CALLS` calls of anything; the test fails unless every verb ran at least once (answered
200), both outcomes (committed, rejected) and refusals (400) came back. One shared draw of 1,000
calls met every verb too; 400 or 500 of it left one out."""

from __future__ import annotations

import inspect
import json
import sqlite3
import types
import typing
import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import verbs
from engine.owner import compat
from tests.integration.owner.conftest import RunningOwner

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

CALLS_PER_VERB = 12
RANDOM_CALLS = 160

ODD_TEXT = [
    "",
    " ",
    "\x00",
    "\ud800",
    "lone \udfff low",
    "\u202eright to left",
    "😀" * 3,
    "a" * 65,
    "../../etc/passwd",
    "'; DROP TABLE todos; --",
    "NaN",
    "1",
    "null",
]
WORDS = ["agent", "owner", "chief", "todo", "request", "note", "pending", "delivered", "cancelled"]

texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(ODD_TEXT + WORDS),
    st.builds(
        lambda char, n: char * n,
        st.sampled_from(["x", "é", "😀", "\u202e", "\ud800"]),
        st.sampled_from([499, 500, 501, 3999, 4000, 4001, 30_000]),
    ),
)
integers = st.one_of(
    st.integers(-3, 8),
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**40]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    integers,
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _parameters() -> dict[str, list[tuple[str, inspect.Parameter, Any]]]:
    found = {}
    for name, fn in sorted(verbs.VERBS.items()):
        hints = typing.get_type_hints(fn)
        found[name] = [
            (p.name, p, hints.get(p.name, Any))
            for p in inspect.signature(fn).parameters.values()
            if p.name not in ("unit", "db")
        ]
    return found


PARAMETERS = _parameters()
PARAMETER_NAMES = sorted({p for params in PARAMETERS.values() for p, _, _ in params} | {"db"})


def _plausible(hint: Any) -> st.SearchStrategy[Any]:
    """A value of the parameter's own type, most of the time; anything, sometimes."""
    words = st.one_of(st.sampled_from(WORDS), texts)
    base: st.SearchStrategy[Any] = json_values
    if hint is int:
        base = st.one_of(st.integers(0, 6), integers)
    elif hint is bool:
        base = st.booleans()
    elif hint is str:
        base = words
    elif typing.get_origin(hint) in (typing.Union, types.UnionType):
        base = st.one_of(st.none(), words)
    return st.one_of(base, base, base, json_values)


@st.composite
def well_formed_calls(draw: st.DrawFn, method: str) -> tuple[str, list[Any], dict[str, Any]]:
    """A call of `method` with arguments of its own types, most of the time."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for name, parameter, hint in PARAMETERS[method]:
        optional = parameter.default is not inspect.Parameter.empty
        if optional and draw(st.booleans()):
            continue
        value = draw(_plausible(hint))
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY or draw(st.integers(0, 9)) == 0:
            kwargs[name] = value
        else:
            args.append(value)
    return method, args, kwargs


random_calls = st.tuples(
    st.one_of(
        st.sampled_from(sorted(verbs.VERBS)),
        st.sampled_from(["connect", "_take", "write", "run", "__init__", "remote", "x" * 100]),
        st.text(min_size=1, max_size=30),
    ),
    st.lists(json_values, max_size=4),
    st.dictionaries(
        st.one_of(st.sampled_from(PARAMETER_NAMES), st.text(max_size=10)), json_values, max_size=5
    ),
)


FUZZ_SETTINGS = settings(
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def test_fuzzed_compat_calls_never_answer_a_server_error_and_keep_the_database_whole(
    running: RunningOwner,
) -> None:
    statuses: Counter[int] = Counter()
    outcomes: Counter[str] = Counter()
    ran: Counter[str] = Counter()  # answered 200 (committed or rejected), by verb
    tried: Counter[str] = Counter()  # the well-formed calls, by verb
    headers = {
        compat.CREDENTIAL_HEADER: running.credential(),
        "Content-Type": "application/json",
    }
    with running.client(headers=headers, timeout=30) as client:

        def call(drawn: tuple[str, list[Any], dict[str, Any]]) -> None:
            method, args, kwargs = drawn
            body = {"method": method, "args": args, "kwargs": kwargs, "key": uuid.uuid4().hex}
            # json.dumps escapes lone surrogates as JSON allows; the owner must cope with them.
            answer = client.post(compat.CALL_PATH, content=json.dumps(body))
            statuses[answer.status_code] += 1
            assert answer.status_code < 500 or answer.status_code == 503, (
                answer.status_code,
                answer.text[:300],
                method,
                repr(args)[:300],
                repr(kwargs)[:300],
            )
            if answer.status_code == 200:
                outcomes[answer.json()["outcome"]] += 1
                ran[method] += 1

        def well_formed(drawn: tuple[str, list[Any], dict[str, Any]]) -> None:
            tried[drawn[0]] += 1
            call(drawn)

        for method in sorted(PARAMETERS):
            settings(FUZZ_SETTINGS, max_examples=CALLS_PER_VERB)(
                given(drawn=well_formed_calls(method))(well_formed)
            )()
        settings(FUZZ_SETTINGS, max_examples=RANDOM_CALLS)(given(drawn=random_calls)(call))()

    # Hypothesis ran the random calls in full (a verb's own may run out of new calls sooner:
    # `status_snapshot` takes no argument, so it has one).
    assert sum(statuses.values()) - sum(tried.values()) >= RANDOM_CALLS, statuses
    # Every kind reached the owner: each verb ran, calls committed and calls refused by the
    # domain, and calls refused before running.
    assert sorted(ran) == sorted(verbs.VERBS), sorted(set(verbs.VERBS) - set(ran))
    assert statuses[400] > RANDOM_CALLS // 2, statuses
    assert outcomes["committed"] > 0, outcomes
    assert outcomes["rejected"] > 0, outcomes
    conn = sqlite3.connect(running.db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
