"""The emulator's update queue, as `getUpdates` sees it.

An update waits until it is confirmed: a getUpdates whose `offset` is above its `update_id`
(Telegram forgets every update below the offset, delivered or not: "An update is considered
confirmed as soon as getUpdates is called with an offset higher than its update_id"; a replayed
update, delivered again under its old id, is kept until it has been delivered again). Ids count
from 1 in each process (a restart starts them again, as `ops/run` does) and `restart_ids` sets
the next one, lower or higher: Telegram's ids are no clock either (after a week without updates
the next one is chosen at random). A long
poll waits on an anyio event set by each new update, bounded by its timeout; `polling` says one
is waiting, so a second concurrent getUpdates can be refused as Telegram refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio

#: the kinds of update the emulator makes (`allowed_updates` filters on them)
UPDATE_KINDS = ("message", "callback_query", "my_chat_member")


@dataclass
class _Pending:
    update: dict[str, Any]
    delivered: bool = False
    #: queued as is by `/emulator/owner/raw`: delivered whatever `allowed_updates` says
    raw: bool = False
    #: queued again by `replay` under its old id: kept below an offset until delivered
    replayed: bool = False

    @property
    def kind(self) -> str:
        return next((key for key in self.update if key != "update_id"), "")


class UpdateQueue:
    """Updates not yet confirmed, every update ever made (for a replay), and the long poll's
    wake-up. Used from the emulator's event loop only."""

    def __init__(self) -> None:
        self._pending: list[_Pending] = []
        self._made: dict[int, dict[str, Any]] = {}
        self._raw: set[int] = set()  # the ids of updates made by `add(..., raw=True)`
        self._next_id = 1
        self._arrived: anyio.Event | None = None
        #: a long poll is waiting (a second one is refused 409)
        self.polling = False
        #: the last `allowed_updates` a getUpdates gave (None or empty: every kind)
        self.allowed: frozenset[str] | None = None

    def add(self, body: dict[str, Any], *, raw: bool = False) -> dict[str, Any]:
        """Make an update from `body` (`{"message": ...}` or `{"callback_query": ...}`; with
        `raw`, any object, kept past the `allowed_updates` filter)."""
        update = {"update_id": self._next_id, **body}
        self._next_id += 1
        self._made[update["update_id"]] = update
        self._pending.append(_Pending(update, raw=raw))
        if raw:
            self._raw.add(update["update_id"])
        self._wake()
        return update

    def replay(self, update_id: int) -> dict[str, Any] | None:
        """Deliver update `update_id` again, the same object; None when it was never made."""
        update = self._made.get(update_id)
        if update is not None:
            self._pending.append(_Pending(update, raw=update_id in self._raw, replayed=True))
            self._wake()
        return update

    def confirm(self, offset: int | None) -> None:
        """`offset` > 0 forgets every update below it (a replayed one once delivered); a
        negative one keeps only the last -offset updates (Telegram's "from the end of the
        queue")."""
        if offset is None or offset == 0:
            return
        if offset < 0:
            self._pending = self._pending[offset:]
            return
        self._pending = [
            entry
            for entry in self._pending
            if entry.update["update_id"] >= offset or (entry.replayed and not entry.delivered)
        ]

    def allow(self, allowed: frozenset[str] | None) -> None:
        """Remember `allowed_updates` (None: keep the last); drop waiting updates of other
        kinds, which Telegram would not have made."""
        if allowed is not None:
            self.allowed = allowed or None
        if self.allowed is not None:
            self._pending = [
                entry for entry in self._pending if entry.raw or entry.kind in self.allowed
            ]

    def ready(self) -> bool:
        return bool(self._pending)

    def take(self, limit: int) -> list[dict[str, Any]]:
        """The first `limit` waiting updates, marked delivered (they stay until confirmed)."""
        entries = self._pending[:limit]
        for entry in entries:
            entry.delivered = True
        return [entry.update for entry in entries]

    async def wait(self, timeout_s: float) -> None:
        """Return when an update arrives or after `timeout_s`."""
        if self._arrived is None:
            self._arrived = anyio.Event()
        arrived = self._arrived
        with anyio.move_on_after(timeout_s):
            await arrived.wait()

    @property
    def next_id(self) -> int:
        """The id the next update gets."""
        return self._next_id

    def restart_ids(self, next_id: int) -> None:
        """Number the next update `next_id` (any positive id, below the last one included):
        what Telegram does after a week without updates, and a restarted emulator does."""
        if next_id < 1:
            raise ValueError("next_update_id must be a positive integer")
        self._next_id = next_id

    def pending_ids(self) -> list[int]:
        return [entry.update["update_id"] for entry in self._pending]

    def reset(self) -> None:
        self._pending.clear()
        self._made.clear()
        self._raw.clear()
        # update ids keep counting, as Telegram's do: a poller's stored offset stays valid
        self.allowed = None
        self._wake()

    def _wake(self) -> None:
        arrived, self._arrived = self._arrived, None
        if arrived is not None:
            arrived.set()
