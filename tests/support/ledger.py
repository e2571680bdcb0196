"""The ledger's test support: the verbs on a real SQLite file, with their settings handed in.

`ledger` and `outbox` here answer to the same names and arguments as `engine.ledger` and
`engine.outbox` (`ledger.take_todo(1, actor="builder", db=db)`), but run the verb
(`engine.verbs`) here and now, in one transaction of its own on the file `db` names, with the
settings given: no environment read, no owner file consulted, no notifier woken. So a test of
the ledger alone needs no environment at all; the routing and the kick are the API's, tested
with the owner service and the notifier.

`e2e_env` is for the folders that run the real `coop` CLI, whose settings are its environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import store, verbs
from engine.config import EngineConfig

SETTINGS = EngineConfig(
    db_path=Path("coop.db"), owner="owner", chief_actor="chief", stale_after_s=3600.0
)


class LocalLedger:
    """The public functions by name, run locally on `db=` with `settings`."""

    def __init__(self, settings: EngineConfig = SETTINGS) -> None:
        self.settings = settings

    def with_settings(self, **changes: Any) -> LocalLedger:
        return LocalLedger(self.settings._replace(**changes))

    def __getattr__(self, name: str) -> Any:
        verb = verbs.VERBS.get(name)
        if verb is None:
            raise AttributeError(name)

        def call(*args: Any, db: str, **kwargs: Any) -> Any:
            path = Path(db)
            config = self.settings._replace(db_path=path)
            with store.unit_of_work(path, writing=name not in verbs.READS) as tx:
                return verb(verbs.Unit(tx=tx, config=lambda: config), *args, **kwargs)

        return call


ledger = outbox = LocalLedger()


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A fresh ledger file."""
    return str(tmp_path / "coop.db")


@pytest.fixture
def e2e_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `coop` processes' settings: kicks off (these tests are about the ledger alone), the
    default deciders, no owner file and no fault points inherited from the caller."""
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_OWNER", "owner")
    monkeypatch.setenv("COOP_CHIEF_ACTOR", "chief")
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    monkeypatch.delenv("COOP_TEST_FAULTS", raising=False)


def made_ledger(home: Path) -> Path:
    """The empty ledger a first write makes in `home` (`coop status`, a read, refuses a folder
    without one and creates none)."""
    path = home / "coop.db"
    store.open_connection(path).close()
    return path
