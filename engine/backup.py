"""`coop backup DIR` and `coop restore DIR`: the data folder's two databases, copied through
SQLite's online backup API (never as files: a live WAL file copied by bytes is not a database).

Backup takes coop.db (required: no ledger, no backup, and nothing is created) and chief.db (when
the door has made one) while the services run, into a new time-stamped folder inside DIR (0700),
checks each copy with `PRAGMA integrity_check`, fsyncs the copies and the folders, and answers
what it wrote and each table's rows. A failure removes what it had created.

Restore copies a backup's coop.db over the live one, and its chief.db only when asked
(`with_chief`), once each is checked to be what this build's migrations make, whole
(`engine.backup_check`). It refuses while a process holds the ledger: `coop serve`
(`<coop.db>.serve.lock`), a notifier daemon (`<coop.db>.notifier.lock`) or a drainer's waiter,
and, for chief.db, the door (`<chief.db>.serve.lock`). It holds those locks itself while it
writes, so none of them starts meanwhile. It answers what the restore means for delivery, read
from both files before the copy: the rows pending in the backup (sent again; the door answers
`already_sent` for those it took since, so they ring once), and what was written after the
backup (gone from the ledger; the Chief keeps its lines).

Where chief.db lives is the floor's rule (`plumbing.home.chief_db_file`: `CHIEF_DB`, else
`<data folder>/chief.db`), which the Chief reads too.
"""

from __future__ import annotations

import contextlib
import os
import time

from engine import store
from engine.config import ledger_origin
from engine.daemon_lock import DAEMON_LOCK_SUFFIX, SERVE_LOCK_SUFFIX
from engine.errors import BackupError, UsageError
from engine.store import copies
from plumbing import files, holders
from plumbing.home import chief_db_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

COOP_DB = "coop.db"
CHIEF_DB = "chief.db"
#: A backup folder's name: this prefix and the UTC time it was taken.
FOLDER_PREFIX = "coop-backup-"
STAMP = "%Y%m%dT%H%M%SZ"
#: The locks whose holder writes the ledger: (the suffix after coop.db, who holds it).
LEDGER_LOCKS = (
    (SERVE_LOCK_SUFFIX, "`coop serve`"),
    (DAEMON_LOCK_SUFFIX, "a notifier daemon (`coop-notifier run`)"),
    (".drain-wait.lock", "a notifier drainer"),
)
CHIEF_LOCK = (".serve.lock", "the door (`chief serve`) or the Chief")
#: The tables whose ids tell what a restore loses: written after the backup means a higher id.
LOST_TABLES = (("todos", "todo"), ("requests", "request"), ("coop_outbox", "outbox row"))

__all__ = ["backup", "restore"]


def _check(path: str) -> dict[str, int]:
    """Each table's row count, once `PRAGMA integrity_check` says ok; else BackupError."""
    verdict, counts = copies.checked_counts(path)
    if verdict != ["ok"]:
        raise BackupError(f"{path} fails its integrity check: {'; '.join(verdict[:3])}")
    return counts


def _counts(counts: dict[str, int]) -> str:
    """The tables that have rows, with their counts."""
    return ", ".join(f"{name} {count}" for name, count in counts.items() if count) or "none"


def _many(count: int, what: str) -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


# ---- backup ----------------------------------------------------------------------------------


def _new_folder(target: str) -> tuple[str, int, list[str]]:
    """A new time-stamped folder inside `target` (0700), its open descriptor (everything the
    backup writes goes through it: no rename can redirect it), and every folder made for it
    (the ones to remove on failure). `target` must be a folder nobody but its owner, the caller
    or root, can write (`plumbing.files.check_backup_target`)."""
    files.check_backup_target(target)
    made: list[str] = []
    parent = os.path.abspath(target)
    while not os.path.exists(parent):
        made.insert(0, parent)
        parent = os.path.dirname(parent)
    parent_fd = files.open_folder(target, make=True)
    try:
        stamp = time.strftime(STAMP, time.gmtime())
        for number in range(1, 100):
            name = FOLDER_PREFIX + stamp + ("" if number == 1 else f"-{number}")
            try:
                os.mkdir(name, files.FOLDER_MODE, dir_fd=parent_fd)
            except FileExistsError:
                continue
            made.append(os.path.join(target, name))
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
            os.fchmod(fd, files.FOLDER_MODE)
            return os.path.join(target, name), fd, made
    finally:
        os.close(parent_fd)
    raise BackupError(f"{target} already holds 99 backups taken this second")


def _remove(made: list[str]) -> None:
    import shutil

    for folder in reversed(made):
        shutil.rmtree(folder, ignore_errors=True)


def backup(target: str, *, db: str | None = None) -> list[str]:
    """Back coop.db (and chief.db, when it exists) up into a new folder inside `target`; the
    lines saying what was written. No ledger: refused, nothing created."""
    if not target.strip():
        raise UsageError("give the folder to back up into, e.g. `coop backup /var/backups/coop`")
    ledger = store.locate(db)
    if not os.path.isfile(ledger):
        raise BackupError(
            f"no ledger at {ledger} ({ledger_origin(db)}): nothing to back up"
            " (set COOP_HOME or --db to the ledger)"
        )
    sources = [(COOP_DB, ledger)]
    chief = chief_db_file()
    if os.path.isfile(chief):
        sources.append((CHIEF_DB, chief))
    try:
        folder, folder_fd, made = _new_folder(target)
    except OSError as exc:
        raise BackupError(f"cannot back up into {target}: {exc.strerror or exc}") from None
    try:
        lines = [_back_up_one(source, folder, folder_fd, name) for name, source in sources]
        os.fsync(folder_fd)
        files.fsync_folder(os.path.dirname(os.path.abspath(folder)))
    except BaseException:
        _remove(made)
        raise
    finally:
        os.close(folder_fd)
    if len(sources) == 1:
        lines.append(f"no chief.db at {chief}: the door has not run here; only coop.db is saved")
    lines.append(f"backup {folder} done; restore it with `coop restore {folder}`")
    return lines


def _back_up_one(source: str, folder: str, folder_fd: int, name: str) -> str:
    copy = os.path.join(folder, name)
    # 0600 before a page is copied, whatever the umask; made O_EXCL in the folder's descriptor.
    fd = files.open_at(folder_fd, name, os.O_RDWR | os.O_CREAT | os.O_EXCL, shown=copy)
    try:
        reach = files.path_in(folder_fd, name, copy)
        copies.copy(source, reach)
        copies.single_file(reach)
        counts = _check(reach)
        os.fchmod(fd, files.FILE_MODE)
        os.fsync(fd)
    finally:
        os.close(fd)
    return f"wrote {copy} from {source} (integrity ok; rows: {_counts(counts)})"


# ---- restore ---------------------------------------------------------------------------------


def _holder(path: str) -> str:
    try:
        return files.read_head(path, 64).decode("ascii", "replace").split()[0]
    except (OSError, IndexError):
        return "unknown"


@contextlib.contextmanager
def _holding(locks: list[tuple[str, str]]) -> Iterator[None]:
    """Hold each `(path, who)` lock for the restore, or refuse naming the pid that holds one."""
    import fcntl

    held: list[int] = []
    try:
        for path, who in locks:
            made = not os.path.lexists(path)
            fd = files.lock_file(path)  # never through a link planted at the name
            if made:
                _as_folder_owner(fd, path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                pid = _holder(path)
                # Advice for what the holder is: a drainer that exits by itself, a unit, a
                # process under ops/run (`plumbing.holders`).
                advice = holders.stop_advice(int(pid)) if pid.isdigit() else "stop it first"
                raise BackupError(
                    f"{who} (pid {pid}) holds {path.rsplit('.', 2)[0]}: {advice}; then restore"
                ) from None
            held.append(fd)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} coop restore\n".encode("ascii"), 0)
        yield
    finally:
        for fd in held:
            os.close(fd)


def _as_folder_owner(fd: int, path: str) -> None:
    """Give a file this command made (open as `fd`) to its folder's owner and group: a restore
    run as root must leave nothing the service's group cannot open. (Root on a folder another
    user owns is refused at the CLI's edge: `plumbing.files.refuse_foreign_folder`.)"""
    folder = os.stat(os.path.dirname(os.path.abspath(path)))
    if os.geteuid() == 0 and (folder.st_uid, folder.st_gid) != (0, 0):
        os.fchown(fd, folder.st_uid, folder.st_gid)


def _drainer(ledger: str) -> str | None:
    """The refusal when a live process on this host holds the ledger's worker lock (a one-shot
    drainer takes no lock file), else None."""
    holder = copies.holder(ledger)
    if holder is None or holder[1] != os.uname().nodename or not _alive(holder[0]):
        return None
    return (
        f"a notifier worker (pid {holder[0]}) is draining {ledger}:"
        f" {holders.stop_advice(holder[0])}; then restore (`coop worker unlock` clears a lock"
        " whose process is gone)"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _source(folder: str) -> str:
    """The backup folder `folder` names: itself, when it holds coop.db."""
    if os.path.isfile(os.path.join(folder, COOP_DB)):
        return folder
    try:
        inside = sorted(name for name in os.listdir(folder) if name.startswith(FOLDER_PREFIX))
    except OSError as exc:
        raise BackupError(f"no backup at {folder}: {exc.strerror or exc}") from None
    if inside:
        raise UsageError(
            f"{folder} holds backups, not one backup: name one, e.g. the newest:"
            f" `coop restore {os.path.join(folder, inside[-1])}`"
        )
    raise BackupError(f"no backup at {folder}: it holds no {COOP_DB}")


def _meaning(backup_ids: dict[str, int], live_ids: dict[str, int], pending: int) -> list[str]:
    """What the restore means for delivery, from the highest ids on both sides (`live_ids`
    empty: there was no ledger)."""
    lines = [
        f"sent again: {_many(pending, 'outbox row')} pending in the backup; a row the door took"
        " since is answered already_sent and rings no second time; the others are delivered once"
        if pending
        else "sent again: nothing (no outbox row was pending in the backup)"
    ]
    gone = [
        _many(live_ids[table] - backup_ids.get(table, 0), what)
        for table, what in LOST_TABLES
        if live_ids.get(table, 0) > backup_ids.get(table, 0)
    ]
    changes = max(live_ids.get("coop_events", 0) - backup_ids.get("coop_events", 0), 0)
    if not live_ids:
        lines.append("gone: nothing (there was no ledger here)")
    elif gone or changes:
        rows = f"{', '.join(gone)} written after the backup, and " if gone else ""
        lines.append(
            f"gone: {rows}{_many(changes, 'change')} made since (every todo and request is as the"
            " backup has it); the Chief keeps the lines they reported"
        )
    else:
        lines.append("gone: nothing (the ledger had not changed since the backup)")
    if live_ids.get("requests", 0) > backup_ids.get("requests", 0):
        lines.append(
            "a request filed after the backup may still be asked on the phone: a tap or a reply"
            " there changes nothing, and says the question is no longer in the ledger"
        )
    return lines


def restore(folder: str, *, db: str | None = None, with_chief: bool = False) -> list[str]:
    """Restore the backup in `folder` over the live coop.db (and chief.db with `with_chief`);
    the lines saying what it did and what that means for delivery."""
    if not folder.strip():
        raise UsageError(
            "give the backup folder, e.g. `coop restore /var/backups/coop/coop-backup-…`"
        )
    source = _source(folder)
    # What is checked below is what is copied only if nobody else can put another file in place
    # between the two: the backup's folder is the caller's or root's and closed to others'
    # writes, as a backup's target must be.
    files.check_backup_target(source)
    ledger = store.locate(db)
    chief = chief_db_file()
    backup_chief = os.path.join(source, CHIEF_DB)
    if with_chief and not os.path.isfile(backup_chief):
        raise BackupError(f"--with-chief: the backup {source} holds no {CHIEF_DB}")
    backup_ledger = os.path.join(source, COOP_DB)
    for copy, live in ((backup_ledger, ledger), (backup_chief, chief)):
        if os.path.isfile(live) and os.path.samefile(copy, live):
            raise UsageError(f"{source} is the data folder itself, not a backup of it")
    from engine import backup_check  # before any lock or file is made: a refusal changes nothing

    backup_check.check_ledger(backup_ledger)
    if with_chief:
        backup_check.check_chief(backup_chief)
    locks = [(ledger + suffix, who) for suffix, who in LEDGER_LOCKS]
    if with_chief:
        locks.append((chief + CHIEF_LOCK[0], CHIEF_LOCK[1]))
    files.make_folders(os.path.dirname(os.path.abspath(ledger)))  # each one it makes 0700
    with _holding(locks):
        busy = _drainer(ledger)
        if busy is not None:
            raise BackupError(busy)
        meaning = _meaning(
            copies.max_ids(backup_ledger),
            copies.max_ids(ledger),
            copies.pending_count(backup_ledger),
        )
        _restore_file(backup_ledger, ledger)
        lines = [f"restored {ledger} from {backup_ledger}", *meaning]
        if with_chief:
            _restore_file(backup_chief, chief)
            lines.append(_chief_restored(chief, backup_chief))
    if not with_chief:
        lines.append(
            f"chief.db left as it is ({chief}): the door remembers every row it took, so none"
            " rings twice; --with-chief restores it too"
        )
    return lines


def _restore_file(copy: str, live: str) -> None:
    """The backup's pages over the live file, through the backup API (it settles the live
    file's WAL too; a copy of the bytes would leave a -wal to be replayed onto wrong pages)."""
    made = not os.path.lexists(live)
    files.private_database(live)  # 0600 before SQLite writes it, whatever the umask; no link
    copies.copy(copy, live)
    if made:
        fd = files.open_file(live, os.O_RDONLY)
        try:
            _as_folder_owner(fd, live)
        finally:
            os.close(fd)


def _chief_restored(chief: str, backup_chief: str) -> str:
    return (
        f"restored {chief} from {backup_chief}: the door forgets what it took after the backup,"
        " so a row pending in the backup and delivered since is delivered and rung a second"
        " time, and the conversation loses its lines written since"
    )
