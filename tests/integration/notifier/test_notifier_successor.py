"""Who takes over a stopping daemon's due rows: a spawned drainer in local mode, the owner
service's next start in service mode (a spawned drainer would be fenced out there)."""

from __future__ import annotations

import json
from pathlib import Path

from notifier.daemon import may_spawn_drainer


def test_local_mode_hands_work_to_a_spawned_drainer(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    assert may_spawn_drainer(tmp_path / "coop.db") is True


def test_service_mode_leaves_work_to_the_owner(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    db = tmp_path / "coop.db"
    owner_file = Path(str(db) + ".owner.json")
    owner_file.write_text(json.dumps({"mode": "service", "database": str(db)}))
    owner_file.chmod(0o600)  # as `coop cutover` writes it
    assert may_spawn_drainer(db) is False


def test_a_broken_owner_file_spawns_nobody(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    db = tmp_path / "coop.db"
    Path(str(db) + ".owner.json").write_text("{not json")
    assert may_spawn_drainer(db) is False
