"""The compatibility client carries the owner credential straight to the owner on loopback,
whatever proxy the environment names."""

from __future__ import annotations

import pytest

from engine import ledger
from tests.integration.owner.conftest import RunningOwner
from tests.support.proxy import proxy_trap


def test_routed_calls_never_go_through_an_environment_proxy(
    running: RunningOwner, monkeypatch: pytest.MonkeyPatch
) -> None:
    with proxy_trap() as trap:
        for name, value in trap.environ().items():
            monkeypatch.setenv(name, value)

        added = ledger.add_todo("write the report", actor="agent")
        listed = ledger.list_items()

        assert not trap.knocked(), "the owner credential went to the proxy"
    assert added["todo"]["title"] == "write the report"
    assert [item["title"] for item in listed] == ["write the report"]
