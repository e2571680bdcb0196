"""`coop cutover [--socket PATH]` and `coop cutover --undo`: moving the ledger to one writer and
back. The owner service is `coop serve` on its Unix socket (`--socket`, else
`COOP_SERVICE_SOCKET`, else `<COOP_HOME>/service.sock`: `engine.service_socket`).

Cutover, in this order (each step fails closed if the next never happens):

1. a consistent backup of the database with SQLite's backup API, `<db>.pre-cutover-<time>.bak`
   (0600);
2. a fresh credential, `<db>.owner.key`, created exclusively with mode 0600;
3. the fence: triggers on every ledger table refusing writes from any connection that has not
   registered the owner's SQL function, installed in one write transaction together with a
   `cutover` event in `coop_events`;
4. the owner file (`<db>.owner.json`, or `COOP_OWNER_FILE`), written atomically: from the next
   call on, every caller routes to the owner.

A crash after 3 and before 4 leaves a fenced database without an owner file: local writers are
refused by the database (fail closed); re-run the cutover, or undo it.

Before step 1 the cutover makes sure no notifier daemon but `coop serve`'s holds the ledger
(`engine.daemon_lock`): a standalone `coop-notifier run` would be fenced out while it kept the
ledger's lock from `coop serve`'s daemon, so the cutover refuses in one line naming its pid; a
free lock is held until the owner file is written.

An owner file an older build wrote names the service's TCP address: `coop cutover` run again
rewrites it in place (`migrate`) with the socket instead, keeping its credential, its backup
and the fence, and records a `cutover_migrated` event; nothing else changes.

The fence is installed by cutover and dropped by undo (not merely disabled), so in local mode
the database carries no trace of it. Undo is an operator act: it drops the fence and records a
`cutover_undo` event in the same transaction, then removes the owner file and the credential
it created (each removal made durable by a directory fsync), and returns the list of what it
did for the CLI to print.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine import owner, service_socket, store
from engine.daemon_lock import daemon_lock_free_of_others
from engine.errors import OwnerFileOutdated, StoreError, UsageError
from engine.store.ledger import record_event
from plumbing import files

CREDENTIAL_SUFFIX = ".owner.key"
CREDENTIAL_BYTES = 32
PRIVATE_MODE = files.FILE_MODE


def credential_path(db: Path) -> Path:
    return Path(str(db) + CREDENTIAL_SUFFIX)


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a new 0600 file, atomically (a fresh temporary name, never a link
    planted there; fsync'd, renamed, the folder fsync'd)."""
    files.write_atomic(path, text.encode())


def _owner_connection(db: Path) -> sqlite3.Connection:
    # Cutover and undo are the owner's own acts: their writes must pass the fence.
    return owner.register_fence_function(store.open_connection(db))


def _backup(conn: sqlite3.Connection, db: Path, stamp: str) -> Path:
    target = db.with_name(f"{db.name}.pre-cutover-{stamp}.bak")
    # Made here, 0600, never through a link planted at the name (O_EXCL, O_NOFOLLOW).
    os.close(files.open_file(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE))
    try:
        dest = sqlite3.connect(target)
        try:
            conn.backup(dest)
        finally:
            dest.close()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot back up the Coop database to {target}: {exc}") from exc
    return target


def owner_socket(given: str | None) -> str:
    """The socket the owner file will name: `given` (absolute), else the service's own
    (`COOP_SERVICE_SOCKET`, else `<COOP_HOME>/service.sock`)."""
    if given is None or not given.strip():
        return service_socket.socket_path()
    path = os.path.expanduser(given.strip())
    if not path.startswith("/"):
        raise UsageError(f"--socket must be an absolute path, not {given!r}")
    return os.path.normpath(path)


def cutover(
    socket: str | None = None, *, actor: str, db: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Make the owner service on `socket` (default: `owner_socket`) the ledger's only writer;
    return the owner file's body. An owner file of an older build is migrated instead."""
    path = store.resolve(db).resolve()
    owner_file = owner.owner_file_path(path)
    socket = owner_socket(socket)
    if owner_file.exists():
        try:
            owner.owner_config(path)
        except OwnerFileOutdated:
            return migrate(path, owner_file, socket, actor)
        raise UsageError(
            f"{path} is already in service mode ({owner_file}); `coop cutover --undo` first"
        )
    with daemon_lock_free_of_others(path, "the cutover"):
        return _cut_over(path, owner_file, socket, actor)


def migrate(path: Path, owner_file: Path, socket: str, actor: str) -> dict[str, Any]:
    """An older build's owner file (a TCP `url`) rewritten with `socket` in its place; the
    credential, the backup and the fence stay as they are."""
    config = json.loads(owner_file.read_text())
    old_url = config.pop(owner.TCP_FIELD)
    config["socket"] = socket
    conn = _owner_connection(path)
    try:
        with store.write(conn):
            record_event(
                conn, "owner", 0, "cutover_migrated", actor, {"url": old_url, "socket": socket}
            )
    finally:
        conn.close()
    _write_private(owner_file, json.dumps(config, indent=2) + "\n")
    return {**config, "owner_file": str(owner_file), "migrated_from": old_url}


def _cut_over(path: Path, owner_file: Path, socket: str, actor: str) -> dict[str, Any]:
    """The cutover's four steps (the module's docstring), no daemon but `coop serve`'s on the
    ledger."""
    now = datetime.now(UTC)
    conn = _owner_connection(path)
    try:
        backup = _backup(conn, path, now.strftime("%Y%m%dT%H%M%S%fZ"))
        credential = credential_path(path)
        _write_private(credential, secrets.token_urlsafe(CREDENTIAL_BYTES) + "\n")
        with store.write(conn):
            triggers = store.install_fence(conn)
            record_event(
                conn,
                "owner",
                0,
                "cutover",
                actor,
                {"socket": socket, "backup": str(backup), "fence_triggers": len(triggers)},
            )
    finally:
        conn.close()
    config = {
        "mode": owner.SERVICE_MODE,
        "database": str(path),
        "socket": socket,
        "credential_file": str(credential),
        "transferred_at": now.isoformat(),
        "backup": str(backup),
    }
    _write_private(owner_file, json.dumps(config, indent=2) + "\n")
    return {**config, "owner_file": str(owner_file), "fence_triggers": len(triggers)}


def undo(*, actor: str, db: str | os.PathLike[str] | None = None) -> list[str]:
    """Return to local mode: drop the fence, remove the owner file and its credential."""
    path = store.resolve(db).resolve()
    owner_file = owner.owner_file_path(path)
    done: list[str] = []
    conn = _owner_connection(path)
    try:
        with store.write(conn):
            removed = store.remove_fence(conn)
            if removed or owner_file.exists():
                record_event(
                    conn,
                    "owner",
                    0,
                    "cutover_undo",
                    actor,
                    {"fence_triggers": len(removed), "owner_file": str(owner_file)},
                )
    finally:
        conn.close()
    if removed:
        done.append(f"dropped the fence ({len(removed)} triggers) on {path}")
    removed_from: set[Path] = set()
    if owner_file.exists():
        owner_file.unlink()
        removed_from.add(owner_file.parent)
        done.append(f"removed the owner file {owner_file}")
    # Only the credential this module creates: an owner file could name any path.
    credential = credential_path(path)
    if credential.exists():
        credential.unlink()
        removed_from.add(credential.parent)
        done.append(f"removed the owner credential {credential}")
    for folder in removed_from:
        # A removal is durable only once its folder is fsynced: a power cut would otherwise
        # bring the owner file back beside the unfenced ledger, routing every caller again.
        files.fsync_folder(folder)
    if not done:
        done.append(f"{path} was already in local mode; nothing to undo")
    return done
