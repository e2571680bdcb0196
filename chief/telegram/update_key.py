"""What one Telegram update is, for telling a replay from a new update: its id and a digest of
its content (`update_key`).

Telegram's update ids are no clock: after a week without updates the next id is chosen at random
(the Bot API's `update_id`), and an emulator starts again from 1 when it restarts. An id alone
may therefore name two different updates. A replay (Telegram delivering an update again, the
same object) has the same id and the same content; a new update under a reused id differs in
its content (its message id, date, text, callback query id). The key holds both, so the door's
replay guards (`chief.store.inbox`, `chief.store.answers`) never take a new update for an old
one.
"""

from __future__ import annotations

import hashlib
import json

from telegram import Update

# Hex digits of the content digest kept in a key (128 bits: no two updates collide).
DIGEST_HEX = 32


def update_key(update: Update) -> str:
    """`<update_id>:<digest of the update's content>`: equal for a replay of the same update,
    different for a new update that reuses an id."""
    content = json.dumps(
        update.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{update.update_id}:{digest[:DIGEST_HEX]}"
