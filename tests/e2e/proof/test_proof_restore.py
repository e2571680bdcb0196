"""The delivery identity at an operator's edges, on the real stack (`coop serve`, `chief serve`,
the Telegram emulator, `coop` processes): a coop.db restored by `coop restore` from a backup
`coop backup` took while the engine ran (a restore refused while it runs), a fresh coop.db
beside a chief.db that has served another, and a coop.db written by the previous schema with a
row in flight. Each new row reaches the Chief and Telegram exactly once, and a row the door had
already taken is not taken again.

Rows are told apart by their text (each unique); the Chief's lines are counted by content and
Telegram's by the texts each message carries (a digest carries several).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from tests.e2e.proof.proof_checks import carried_texts
from tests.e2e.proof.proof_stack import MakeStack, ProofStack
from tests.support.stack import NOTIFY_PATH, SERVICE_KEY, SERVICE_KEY_HEADER
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

LANDED_WITHIN_S = 30.0
SQLITE_TIMEOUT_S = 10.0
# The schema version a coop.db had before the delivery key (`engine.store.schema.MIGRATIONS`).
SCHEMA_BEFORE_KEYS = 2


def _notify(stack: ProofStack, *texts: str) -> None:
    for text in texts:
        done = stack.coop("notify", text)
        assert done.returncode == 0, done.stderr


def _chief_lines(stack: ProofStack) -> Counter[str]:
    """The Chief's coop lines, counted by their text."""
    rows = stack._query(stack.chief_db, "SELECT content FROM messages WHERE turn_kind = 'coop'")
    return Counter(str(r[0]) for r in rows)


def _rings(stack: ProofStack, texts: list[str]) -> Counter[str]:
    """How many Telegram messages carried each text."""
    known = set(texts)
    return Counter(
        t for m in stack.telegram_messages() for t in carried_texts(m["text"], known) if t in known
    )


def _once_everywhere(stack: ProofStack, texts: list[str]) -> None:
    """Wait (bounded) until every text has a Chief line and a ring, and the door's Telegram
    queue is empty; then each has exactly one of each."""

    def arrived() -> bool:
        lines, rings = _chief_lines(stack), _rings(stack, texts)
        return all(lines[t] and rings[t] for t in texts) and stack.telegram_queue_depth() == 0

    try:
        wait_until_sync(arrived, timeout_s=LANDED_WITHIN_S, what=f"{texts} at the Chief and rung")
    finally:
        lines, rings = _chief_lines(stack), _rings(stack, texts)
        print({t: (lines[t], rings[t]) for t in texts}, "(Chief lines, Telegram rings) per row")
    assert {t: lines[t] for t in texts} == dict.fromkeys(texts, 1)
    assert {t: rings[t] for t in texts} == dict.fromkeys(texts, 1)


def _all_delivered(stack: ProofStack) -> None:
    wait_until_sync(
        lambda: stack.pending_count() == 0,
        timeout_s=LANDED_WITHIN_S,
        what="every outbox row delivered",
    )


def _door_answer(stack: ProofStack, text: str) -> dict[str, object]:
    """The door's answer the engine recorded for the row of this text."""
    rows = stack._query(stack.coop_db, "SELECT door_answer FROM coop_outbox WHERE text = ?", text)
    assert len(rows) == 1, rows
    answer: dict[str, object] = json.loads(str(rows[0][0]))
    return answer


def _backup(stack: ProofStack) -> Path:
    """`coop backup` into the stack's folder, while the services run: the backup folder."""
    done = stack.coop("backup", str(stack.folder / "backups"))
    assert done.returncode == 0, done.stderr
    (folder,) = (stack.folder / "backups").iterdir()
    assert f"wrote {folder / 'coop.db'}" in done.stdout
    return folder


def test_a_restored_coop_db_delivers_every_new_row_once(make_stack: MakeStack) -> None:
    stack = make_stack()
    stack.start()
    before = ["before backup 1", "before backup 2"]
    _notify(stack, *before)
    _once_everywhere(stack, before)
    # A row still pending when the backup is taken (the door is down, the engine defers it):
    # delivered after the backup, it is pending again in the restored file, and the door must
    # not take it twice. The backup is taken as the README says, while the engine runs.
    assert stack.door.terminate() == 0
    _notify(stack, "pending at backup")
    wait_until_sync(
        lambda: [r["attempts"] for r in stack.outbox().values() if r["state"] == "pending"] > [0],
        timeout_s=LANDED_WITHIN_S,
        what="the row deferred while the door is down",
    )
    backup = _backup(stack)
    stack.door.start()
    after = ["after backup 1", "after backup 2", "after backup 3"]
    _notify(stack, *after)
    _once_everywhere(stack, ["pending at backup", *after])

    refused = stack.coop("restore", str(backup))  # `coop serve` holds the ledger
    assert refused.returncode == 1, refused
    assert f"`coop serve` (pid {stack.engine.pid}) holds {stack.coop_db}" in refused.stderr
    assert stack.engine.terminate() == 0
    restored = stack.coop("restore", str(backup))
    assert restored.returncode == 0, restored.stderr
    assert "sent again: 1 outbox row pending in the backup" in restored.stdout
    assert "gone: 3 outbox rows written after the backup" in restored.stdout
    stack.start_engine()
    _all_delivered(stack)  # the row pending in the backup: the door answers it already sent
    assert _door_answer(stack, "pending at backup")["already_sent"] is True
    restored = [f"after restore {n}" for n in range(1, 5)]
    _notify(stack, *restored)
    _once_everywhere(stack, [*before, "pending at backup", *after, *restored])
    assert stack.stop() == {"engine": 0, "door": 0, "emulator": 0}


def test_a_fresh_coop_db_beside_an_old_chief_db_delivers_every_row(
    make_stack: MakeStack,
) -> None:
    stack = make_stack()
    stack.start()
    old = ["old ledger 1", "old ledger 2", "old ledger 3"]
    _notify(stack, *old)
    _once_everywhere(stack, old)
    assert stack.engine.terminate() == 0
    for leftover in stack.folder.glob("coop.db*"):
        leftover.unlink()  # the ledger and its WAL; chief.db keeps what it was sent
    stack.start_engine()
    fresh = ["fresh ledger 1", "fresh ledger 2", "fresh ledger 3"]
    _notify(stack, *fresh)
    _once_everywhere(stack, [*old, *fresh])
    assert stack.stop() == {"engine": 0, "door": 0, "emulator": 0}


def _old_ledger(path: Path, text: str) -> None:
    """A coop.db as the previous schema wrote it: one pending row, never attempted."""
    from engine.store.schema import MIGRATIONS, statements

    with closing(sqlite3.connect(path, timeout=SQLITE_TIMEOUT_S, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        for number, script in enumerate(MIGRATIONS[:SCHEMA_BEFORE_KEYS], start=1):
            for statement in statements(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
        conn.execute(
            "INSERT INTO coop_outbox (kind, text, state, created_at, next_attempt_at)"
            " VALUES ('note', ?, 'pending', '2026-01-01T00:00:00.000Z', 0)",
            (text,),
        )


def test_an_upgrade_delivers_a_row_in_flight_once(make_stack: MakeStack) -> None:
    stack = make_stack()
    stack.start_door()
    in_flight = "in flight across the upgrade"
    _old_ledger(stack.coop_db, in_flight)
    # The previous notifier sent row 1 under its id, and the door took it; its answer was lost
    # (the engine stopped for the upgrade before it marked the row).
    answer = stack.door_request(
        "POST",
        NOTIFY_PATH,
        json={"text": in_flight, "kind": "note", "outbox_id": "1"},
        headers={SERVICE_KEY_HEADER: SERVICE_KEY},
    )
    assert answer.status_code == 200, answer.text
    _once_everywhere(stack, [in_flight])

    stack.start_engine()  # the upgraded engine migrates coop.db and drains it
    _all_delivered(stack)
    assert _door_answer(stack, in_flight)["already_sent"] is True
    _notify(stack, "written after the upgrade")
    _once_everywhere(stack, [in_flight, "written after the upgrade"])
    keys = dict(stack._query(stack.coop_db, "SELECT id, delivery_key FROM coop_outbox"))
    assert keys[1] == "1"  # the key the door has already seen
    assert keys[2] != "2"
    assert stack.stop() == {"engine": 0, "door": 0, "emulator": 0}
