"""The owner: the ledger's one writer after `coop cutover`, and everything that makes it so.

    file       the owner file (`<store>.owner.json`): local or service mode, and where the owner
               listens; its exact failure words; the fence function the owner's connections carry
    compat     the compatibility client: one call shipped to the owner, failing closed, with a
               receipt (`engine.api` is the only caller that decides to ship)
    receipts   the client's own record of every call it shipped, written before the call
    arguments  a shipped call's arguments, checked against its public signature
    commands   the owner's command log: run a verb once per request key, filed with its change
    app        the owner's FastAPI app (`/compat/call`, `/compat/reconcile`, `/status`) and the
               loopback guard every route of the engine service applies
    cutover    `coop cutover --url URL` and `--undo`: moving the ledger to one writer and back

Arrows point one way: `file` is standard library only and imports nothing here (the store
reads it); `compat` and `receipts` stay on the standard library (the CLI ships calls);
`commands` runs `engine.verbs`; `app` serves `commands`; nothing here imports `app`.

The owner file's names are re-exported here, so `engine.owner.owner_config` reads as before.
"""

from engine.owner.file import (
    DIRECT_SQL_DISABLED,
    FENCE_FUNCTION,
    INVALID_OWNER,
    OWNER_FILE_ENV,
    OWNER_FILE_SUFFIX,
    SERVICE_MODE,
    owner_config,
    owner_file_path,
    register_fence_function,
)

__all__ = [
    "DIRECT_SQL_DISABLED",
    "FENCE_FUNCTION",
    "INVALID_OWNER",
    "OWNER_FILE_ENV",
    "OWNER_FILE_SUFFIX",
    "SERVICE_MODE",
    "owner_config",
    "owner_file_path",
    "register_fence_function",
]
