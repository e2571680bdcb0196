"""The owner file fuzzed (issue 19): any bytes, any JSON, and a valid file with one field made
hostile (a NUL or a lone surrogate in a path, a number, a list, nesting past the parser's depth).
Whatever the file holds, reading it answers a valid config or raises exactly
`Invalid Coop owner configuration` with a detail, and a config it answers is one the callers can
use: its URL and credential checks answer in the same words, never a traceback. `coop list`
says it in two lines, exit 1, and opens no database."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.cli
from engine import owner_file
from engine.errors import OwnerUnavailable
from engine.owner import compat
from tests.fuzz.argv import run_in_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

EXAMPLES = 150
FIELDS = ["mode", "database", "socket", "credential_file", "transferred_at", "backup"]
ODD_TEXT = ["", "\x00", "/a\x00b", "\ud800", "\udcff", "x" * 5000, "http://127.0.0.1:99999"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 10**40]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(ODD_TEXT),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


def _valid(folder: Path) -> dict[str, Any]:
    credential = folder / "coop.db.owner.key"
    return {
        "mode": "service",
        "database": str(folder / "coop.db"),
        "socket": str(folder / "service.sock"),
        "credential_file": str(credential),
        "transferred_at": "2026-01-01T00:00:00+00:00",
        "backup": str(folder / "coop.db.bak"),
    }


class Nested(NamedTuple):
    """A valid file with `field` nested `depth` lists deep: drawn small, written large."""

    field: str
    depth: int

    def body(self, folder: Path) -> bytes:
        config: dict[str, Any] = {**_valid(folder), self.field: "NESTED"}
        text = json.dumps(config).replace('"NESTED"', "[" * self.depth + "]" * self.depth)
        return text.encode()


@st.composite
def owner_files(draw: st.DrawFn, folder: Path) -> bytes | Nested:
    kind = draw(st.sampled_from(["bytes", "json", "one field", "no field", "nested"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    field = draw(st.sampled_from(FIELDS))
    if kind == "nested":
        return Nested(field, draw(st.sampled_from([10, 1000, 100_000])))
    config = _valid(folder)
    if kind == "no field":
        del config[field]
    else:
        config[field] = draw(json_values)
    return json.dumps(config).encode()


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("COOP_", "CHIEF_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_ACTOR", "builder")
    return tmp_path


def test_any_owner_file_is_the_exact_words_or_a_usable_config(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = folder / "coop.db"
    credential = folder / "coop.db.owner.key"
    credential.write_text("credential-0123456789\n")
    credential.chmod(0o600)
    monkeypatch.setenv("COOP_HOME", str(folder))
    monkeypatch.setenv("COOP_DB", str(db))

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(body=owner_files(folder))
    def fuzz(body: bytes | Nested) -> None:
        written = body.body(folder) if isinstance(body, Nested) else body
        (folder / "coop.db.owner.json").write_bytes(written)
        (folder / "coop.db.owner.json").chmod(0o600)  # private: only what it holds is fuzzed
        try:
            config = owner_file.owner_config(db)
        except OwnerUnavailable as exc:
            refused: OwnerUnavailable | None = exc
        else:
            refused = None
        if refused is not None:
            assert str(refused) == owner_file.INVALID_OWNER
            assert refused.detail
            outcome = run_in_process(engine.cli.main, ["list"])
            assert outcome.code == 1, outcome.err
            assert outcome.err.splitlines()[0] == f"coop: {owner_file.INVALID_OWNER}"
            assert len(outcome.err.splitlines()) == 2, outcome.err
            assert not db.exists(), "a database was opened for a broken owner file"
            return
        assert config is not None
        # What the callers do next with a config, short of sending: each answers in words.
        for step in (
            lambda: compat.owner_socket(config),
            lambda: compat.read_credential(config),
        ):
            words = None
            try:
                step()
            except OwnerUnavailable as exc:
                words = str(exc)
            assert words in (None, owner_file.INVALID_OWNER, compat.CREDENTIAL_PRIVATE)

    fuzz()
