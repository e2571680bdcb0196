"""The harness of the phone fuzz (tests/fuzz/test_phone_updates_fuzz.py): one whole stack as real
processes (the Bot API emulator playing the owner and anyone else, the door long-polling it,
`coop serve`), and what one example checks once the door has handled its update.

    fuzz = PhoneFuzz(stack, EmulatorOwner(url))
    before = fuzz.look()                   # coop.db and chief.db, the bot's messages, toasts
    update_id = fuzz.raw({...})            # or owner.text / owner.press
    after = fuzz.handled(update_id)        # waits (bounded) until the door recorded it handled
    fuzz.no_trace()                        # no traceback, no failed update in the door's log

"Handled" is the door's own record: the phone loop records an update's key in chief.db after its
handler returned (its answer sent, its toast answered), so what the update caused is visible
then, apart from a ledger's answer still on its way (`settled` waits for the door's answer
rows to leave `pending`).
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.phone import EmulatorOwner
from tests.support.procs import coop
from tests.support.stack import CHAT_ID, Stack

OWNER_ID = int(CHAT_ID)  # a private chat: its id is its user's
STRANGER_ID = 777
WAIT_S = 15.0
#: the ledger's tables: a refused update changes none of them (`coop_answers` is the ledger's
#: record of each answer key it was asked, an answer that changed nothing included; an update
#: refused at the door reaches no ledger, which chief.db's `telegram_answers` shows)
LEDGER_TABLES = ("requests", "todos", "coop_events")
#: chief.db's tables an update may change without being obeyed: the last id, the updates
#: handled, the strangers
PHONE_BOOKKEEPING = frozenset({"telegram_inbox", "telegram_updates_seen", "telegram_strangers"})
#: what the door's log must never hold, whatever arrives
TROUBLE_EVENTS = ("door.phone_failed", "door.phone_update_failed", "door.phone_update_skipped")


def digest(db: Path, tables: tuple[str, ...] | None = None) -> dict[str, str]:
    """A digest of every row of each table (all of the file's tables when None)."""
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        if tables is None:
            names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            tables = tuple(sorted(str(name) for (name,) in names))
        found = {}
        for table in tables:
            rows = conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
            found[table] = hashlib.sha256(repr(rows).encode("utf-8", "surrogatepass")).hexdigest()
    return found


@dataclass(frozen=True)
class Look:
    """What the door and the ledger hold at one moment."""

    ledger: dict[str, str]
    chief: dict[str, str]
    quiet_until: float | None
    messages: list[dict[str, Any]]
    toasts: list[dict[str, Any]]

    def chief_beside_bookkeeping(self) -> dict[str, str]:
        return {k: v for k, v in self.chief.items() if k not in PHONE_BOOKKEEPING}


@dataclass
class PhoneFuzz:
    stack: Stack
    owner: EmulatorOwner
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.owner.base_url, timeout=WAIT_S, trust_env=False)

    def close(self) -> None:
        self.client.close()
        self.owner.close()

    # -- doing -----------------------------------------------------------------------------

    def raw(self, update: dict[str, Any]) -> int:
        """Deliver `update` as is (`POST /emulator/owner/raw`); its update id."""
        answer = self.client.post("/emulator/owner/raw", json={"update": update})
        assert answer.status_code == 200, answer.text
        return int(answer.json()["update_id"])

    def ask(self, title: str, choices: str | None = "approve,decline") -> int:
        """`coop request add TITLE --to owner [--choices ...]`, its ask message waited for."""
        extra = () if choices is None else ("--choices", choices)
        done = coop(
            "request", "add", title, "--to", "owner", *extra, env=self.stack.env(), inherit=False
        )
        assert done.returncode == 0, done.stderr
        found = re.search(r"#(\d+)", done.stdout)
        assert found, done.stdout
        request_id = int(found.group(1))
        self.owner.wait_for(
            lambda _: self.ask_message(request_id), WAIT_S, f"request #{request_id}'s ask"
        )
        return request_id

    def close_at_terminal(self, request_id: int) -> None:
        done = coop(
            "request", "close", str(request_id), "--as", "owner", "--summary", "decline",
            env=self.stack.env(), inherit=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    # -- reading ---------------------------------------------------------------------------

    def ask_message(self, request_id: int) -> dict[str, Any] | None:
        prefix = f"request #{request_id} "
        return next((m for m in self.owner.messages() if str(m["text"]).startswith(prefix)), None)

    def is_open(self, request_id: int) -> bool:
        return bool(
            self.count(
                self.stack.coop_db,
                f"SELECT COUNT(*) FROM requests WHERE id = {int(request_id)} "
                "AND status IN ('open', 'taken')",
            )
        )

    def tokens(self, request_id: int) -> list[str]:
        with closing(sqlite3.connect(self.stack.chief_db)) as conn:
            rows = conn.execute(
                "SELECT b.token FROM ask_buttons b JOIN asks a ON a.ask_key = b.ask_key"
                " WHERE a.request_id = ? ORDER BY b.position",
                (request_id,),
            ).fetchall()
        return [str(token) for (token,) in rows]

    def was_handled(self, update_id: int) -> bool:
        """Whether the door recorded an update with this id as handled (ids do not repeat in
        the fuzz's emulator run)."""
        with closing(sqlite3.connect(self.stack.chief_db)) as conn:
            row = conn.execute(
                "SELECT 1 FROM telegram_updates_seen WHERE update_id = ?", (update_id,)
            ).fetchone()
        return row is not None

    def quiet_until(self) -> float | None:
        with closing(sqlite3.connect(self.stack.chief_db)) as conn:
            row = conn.execute("SELECT quiet_until FROM telegram_inbox WHERE id = 1").fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def pending_answers(self) -> int:
        with closing(sqlite3.connect(self.stack.chief_db)) as conn:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM telegram_answers WHERE state = 'pending'"
            ).fetchone()
        return int(count)

    def count(self, db: Path, query: str) -> int:
        with closing(sqlite3.connect(db)) as conn:
            (found,) = conn.execute(query).fetchone()
        return int(found)

    def quiescent(self) -> None:
        """Wait (bounded) until nothing is on its way: the engine's outbox delivered, the door's
        Telegram queue sent, its answers settled and its ask edits made."""
        chief = self.stack.chief_db
        self.stack.door.wait_for(
            lambda: self.count(self.stack.coop_db, "SELECT COUNT(*) FROM coop_outbox "
                               "WHERE state = 'pending'") == 0
            and self.count(chief, "SELECT COUNT(*) FROM telegram_queue") == 0
            and self.count(chief, "SELECT COUNT(*) FROM ask_edits") == 0
            and self.pending_answers() == 0,
            "the stack to be quiescent",
            WAIT_S,
        )  # fmt: skip

    def look(self) -> Look:
        return Look(
            ledger=digest(self.stack.coop_db, LEDGER_TABLES),
            chief=digest(self.stack.chief_db),
            quiet_until=self.quiet_until(),
            messages=self.owner.messages(),
            toasts=self.owner.callback_answers(),
        )

    def handled(self, update_id: int) -> Look:
        """Wait (bounded) until the door has recorded update `update_id` as handled, then
        until every answer it recorded has the ledger's reply; what then holds."""
        self.stack.door.wait_for(
            lambda: self.was_handled(update_id), f"the door to handle update {update_id}", WAIT_S
        )
        self.stack.door.wait_for(
            lambda: self.pending_answers() == 0, "the door's answers to settle", WAIT_S
        )
        return self.look()

    def no_trace(self) -> None:
        """Nothing in the door's log says it failed on an update or raised."""
        log = self.stack.door.log()
        assert "Traceback" not in log, self.stack.door.log_tail(60)
        for event in TROUBLE_EVENTS:
            assert not self.stack.door.events(event), (event, self.stack.door.log_tail(60))
