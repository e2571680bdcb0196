"""`coop backup` finds chief.db where the Chief keeps it, without importing the Chief: the rule
is written twice (`engine.backup.chief_db_path` ~ `chief.config.ChiefConfig.db_path`), and
these cases hold the two equal (the data folder's rule itself is pinned by
tests/contract/test_shared_facts.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chief.config import ChiefConfig
from engine.backup import chief_db_path

CASES = [
    {"CHIEF_DB": "/srv/chief/chief.db", "COOP_HOME": "/var/lib/coop"},
    {"COOP_HOME": "/var/lib/coop"},
    {"COOP_HOME": "/var/lib//coop/"},
    {"COOP_HOME": "   ", "XDG_DATA_HOME": "/data", "HOME": "/home/o"},
    {"XDG_DATA_HOME": "relative", "HOME": "/home/o"},
    {"HOME": "/home/o"},
    {"CHIEF_DB": "~/chief.db", "HOME": "/home/o"},
]


@pytest.mark.parametrize(
    "environ", CASES, ids=lambda env: ",".join(f"{k}={v}" for k, v in env.items())
)
def test_backup_and_the_chief_agree_on_where_chief_db_is(
    environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", environ.get("HOME", "/home/o"))  # `~` is read from the process
    assert Path(chief_db_path(environ)) == ChiefConfig.from_env(environ).db_path
