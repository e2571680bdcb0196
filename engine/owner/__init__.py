"""The owner: the ledger's one writer after `coop cutover`, and everything that makes it so.

    compat     the compatibility client: one call shipped to the owner, failing closed, with a
               receipt (`engine.api` is the only caller that decides to ship)
    receipts   the client's own record of every call it shipped, written before the call
    arguments  a shipped call's arguments, checked against its public signature
    commands   the owner's command log: run a verb once per request key, filed with its change
    app        the owner's FastAPI app (`/compat/call`, `/compat/reconcile`, `/status`) and the
               loopback guard every route of the engine service applies
    phone      the phone's routes on that app (`/api/coop/phone/answer`, `.../summary`): the
               owner's answers relayed by the Chief's door, guarded by the service key
    cutover    `coop cutover [--socket PATH]` and `--undo`: moving the ledger to one writer and back

The owner file itself (`<store>.owner.json`: local or service mode, where the owner listens,
its exact failure words) is `engine.owner_file`, a sibling below both the direct door
(`engine.direct`) and the API's edge, which read it; this package sits above them (`commands`
runs `engine.verbs` on the store, `cutover` writes the fence), so the owner file cannot live
inside it without an import cycle. Its names, and the fence's (`engine.store.schema`), are
re-exported here, so `engine.owner.owner_config` reads as before. Arrows point one way:
`compat` and `receipts` stay on the standard library (the CLI ships calls); `app` serves
`commands`; nothing here imports `app`.

The engine service's process (`coop serve`: this app, its metrics listener and the notifier's
daemon in one process) is assembled in `notifier.engine_service`, not here: it embeds the
notifier's daemon, and the engine never imports the notifier. `coop serve` execs
`python -P -m notifier serve` (`engine.cli`).
"""

from engine.owner_file import (
    INVALID_OWNER,
    OWNER_FILE_ENV,
    OWNER_FILE_SUFFIX,
    SERVICE_MODE,
    TCP_FIELD,
    owner_config,
    owner_file_path,
)
from engine.store.schema import DIRECT_SQL_DISABLED, FENCE_FUNCTION, register_fence_function

__all__ = [
    "DIRECT_SQL_DISABLED",
    "FENCE_FUNCTION",
    "INVALID_OWNER",
    "OWNER_FILE_ENV",
    "OWNER_FILE_SUFFIX",
    "SERVICE_MODE",
    "TCP_FIELD",
    "owner_config",
    "owner_file_path",
    "register_fence_function",
]
