"""A property-based fuzz of `POST /compat/call` with the credential, over one real uvicorn and one
keep-alive connection: random method names, argument lists and keyword values of every JSON type
(huge, odd and invalid-Unicode strings, integers past 64 bits, nested lists and objects), mixed
with well-formed calls that reach deep into the verbs. No answer is a 5xx other than 503, the
connection is never reset, and the database stays whole."""

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

CASES = 1000

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
def well_formed_calls(draw: st.DrawFn) -> tuple[str, list[Any], dict[str, Any]]:
    method = draw(st.sampled_from(sorted(PARAMETERS)))
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


def test_fuzzed_compat_calls_never_answer_a_server_error_and_keep_the_database_whole(
    running: RunningOwner,
) -> None:
    statuses: Counter[int] = Counter()
    outcomes: Counter[str] = Counter()
    headers = {
        compat.CREDENTIAL_HEADER: running.credential(),
        "Content-Type": "application/json",
    }
    with running.client(headers=headers, timeout=30) as client:

        @given(call=st.one_of(well_formed_calls(), random_calls))
        @settings(
            max_examples=CASES,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(call: tuple[str, list[Any], dict[str, Any]]) -> None:
            method, args, kwargs = call
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

        run()

    assert sum(statuses.values()) >= CASES, statuses
    # Both kinds reached the owner: calls that ran (committed or refused by the domain) and
    # calls refused before running.
    assert statuses[200] > 100, statuses
    assert statuses[400] > 100, statuses
    assert outcomes["committed"] > 0, outcomes
    assert outcomes["rejected"] > 0, outcomes
    conn = sqlite3.connect(running.db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
