"""Who delivers a ledger: the notifier daemon's lock and the owner service's, as `coop cutover`
sees them before it fences the ledger. Standard library only.

`<coop.db>.notifier.lock` is held (an exclusive `flock`, the holder's pid written inside) by the
ledger's one notifier daemon: a standalone `coop-notifier run`, or the one `coop serve` embeds,
which also holds `<coop.db>.serve.lock` for its whole life (`notifier.pidlock` takes both; the
names are defined here, below both packages). After a cutover only the owner's connections pass
the fence, so a standalone daemon holding the ledger would be refused every write while
`coop serve` waits for its lock: delivery stranded. `daemon_lock_free_of_others` closes that:

- the lock is free: the cutover holds it until it is done, so no daemon takes the ledger
  meanwhile (one that does so afterwards finds the fence at its first drain and steps aside);
- `coop serve` holds it (the same pid holds the service's lock): its daemon delivers on the
  owner's connections before and after the cutover alike;
- any other process holds it: refused in one line naming its pid and how to stop it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from engine.errors import StoreError, UsageError
from plumbing import files, holders

DAEMON_LOCK_SUFFIX = ".notifier.lock"
SERVE_LOCK_SUFFIX = ".serve.lock"


def daemon_lock_file(db: str | os.PathLike[str]) -> str:
    """`<coop.db>.notifier.lock`: the ledger's one notifier daemon holds it."""
    return os.fspath(db) + DAEMON_LOCK_SUFFIX


def serve_lock_file(db: str | os.PathLike[str]) -> str:
    """`<coop.db>.serve.lock`: the ledger's one owner service (`coop serve`) holds it."""
    return os.fspath(db) + SERVE_LOCK_SUFFIX


def lock_holder(path: str) -> str:
    """The pid the holder wrote in the lock file ("unknown" when it cannot be read)."""
    try:
        # Never through a link: root would print the head of whatever it names.
        return files.read_head(path, 32).decode("ascii", "replace").strip() or "unknown"
    except OSError:
        return "unknown"


@contextlib.contextmanager
def daemon_lock_free_of_others(db: str | os.PathLike[str], act: str) -> Iterator[None]:
    """Run the block with no notifier daemon but `coop serve`'s holding the ledger (see the
    module); `act` names the refused command in its one line."""
    import fcntl

    path = daemon_lock_file(db)
    try:
        fd = files.lock_file(path)  # 0600, never through a link planted at the name
    except OSError as exc:
        raise StoreError(f"cannot open the daemon's lock file {path}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            _refuse_unless_serve(db, path, act)
        yield
    finally:
        os.close(fd)  # drops the flock, if this process took it


def _refuse_unless_serve(db: str | os.PathLike[str], path: str, act: str) -> None:
    holder = lock_holder(path)
    if holder.isdigit() and holder == lock_holder(serve_lock_file(db)):
        return  # coop serve's own daemon: it delivers on the owner's connections
    raise UsageError(
        f"a standalone notifier daemon (pid {holder}, `coop-notifier run`) delivers for {db}"
        f" (it holds {path}); {act} would fence it out and strand delivery: stop it first"
        f" ({holders.advice(holder)}), and `coop serve` takes delivery over within seconds"
    )
