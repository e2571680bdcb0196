"""The outbox's public functions, by the name library callers and the README use: an explicit
notification, the operator's two acts on a row (cancel with a reason, retry now), and the
owner's one act on the notifier's worker lock (`unlock_worker`).

They are `engine.api`'s (the edge that decides local or owner service); the use cases are in
`engine.verbs`. `enqueue` is the producers' insert (`engine.store.queue.enqueue`), run inside
the caller's `store.write()` transaction, so a notification exists exactly when the change it
reports does. Delivery state (attempts, deferral, delivered) is the notifier's to write,
through `notifier.delivery`; every statement on the two tables is in `engine.store.queue`.
"""

from __future__ import annotations

from engine.api import cancel, notify, retry, rows, unlock_worker
from engine.store.queue import STATES, enqueue

__all__ = ["STATES", "cancel", "enqueue", "notify", "retry", "rows", "unlock_worker"]
