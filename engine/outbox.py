"""The outbox's public functions, by the names library callers and the docs use: an explicit
notification, the operator's two acts on a row (cancel with a reason, retry now), the owner's
one act on the notifier's worker lock (`unlock_worker`), and the operator's reads.

Each is its verb (`engine.verbs.outbox`, the one source) run through `engine.api`, the edge
that decides local or owner service. `enqueue` is the producers' insert
(`engine.store.queue.enqueue`), run inside the caller's `store.write()` transaction, so a
notification exists exactly when the change it reports does. Delivery state (attempts,
deferral, delivered) is the notifier's to write, through `notifier.delivery`; every statement on
the two tables is in `engine.store.queue`.
"""

from __future__ import annotations

from engine.api import public
from engine.store.queue import STATES, enqueue
from engine.verbs import outbox as _verbs

notify = public(_verbs.notify)
rows = public(_verbs.rows)
retry = public(_verbs.retry)
cancel = public(_verbs.cancel)
unlock_worker = public(_verbs.unlock_worker)
status_snapshot = public(_verbs.status_snapshot)

__all__ = [
    "STATES",
    "cancel",
    "enqueue",
    "notify",
    "retry",
    "rows",
    "status_snapshot",
    "unlock_worker",
]
