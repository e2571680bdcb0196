"""The engine's errors: one root, each message saying what happened and what to do next.

    CoopError                       root; its docstring is the default message
    ├── UsageError                  bad input (missing actor, empty title, missing reason); exit 2
    │   ├── NotFound                an unknown todo, request or outbox row id; exit 2
    │   └── CommandRefused          the owner service refused a routed call before running it
    │       │                       (HTTP 400)
    │       ├── ArgumentError       its arguments do not fit the verb's signature (named)
    │       └── KeyConflict         its request key was filed for another input (HTTP 409)
    ├── LifecycleError              a verb refused by the lifecycle (terminal row, foreign holder,
    │                               changed under this take); exit 1
    ├── StoreError                  the database failed (sqlite3 errors translated in engine.store)
    ├── NoLedger                    a read found no ledger at the path it names (and created
    │                               none); exit 1
    ├── OwnerUnavailable            the owner service could not be used (owner file, credential,
    │   │                           transport); the compatibility client's fail-closed answers
    │   ├── OwnerFileOutdated       the owner file names a TCP address (an older build's):
    │   │                           `coop cutover` again
    │   ├── ServiceNotRunning       nothing listens at the service's socket: nothing was sent
    │   └── ServiceNotTrusted       the socket, its folder or the process answering is not this
    │                               user's alone: nothing was sent
    ├── KeyFileError                a private key file is missing, unreadable, not a regular file,
    │   │                           empty or too large (engine.keyfile)
    │   └── KeyFileNotPrivate       a group or world bit is set on it: `chmod 600` it
    ├── NeedsAPerson                `coop status --check` found something; exit 1
    ├── TimedOut                    `coop request wait` gave up: the request is still open;
    │                               exit 3
    ├── ServiceError                `coop serve` cannot start (its socket is held, ...)
    ├── GuardRefused                `coop serve`'s guard turned a request away before its body
    │                               (peer, Host, browser header, key): answered with its HTTP
    │                               status, counted, summed up in the log (engine.owner.refused)
    └── BackupError                 `coop backup` or `coop restore` cannot be made (no ledger,
                                    a process holds it, a copy fails its check); exit 1

Domain errors travel from the owner service to the compatibility client as (type name, message)
and are re-raised as the same type with the same words: keep constructors to one message argument
(the keyword-only `detail` stays on the side that raised it; entry points print it on a line of
its own).
"""

from __future__ import annotations


class CoopError(Exception):
    """Coop could not do that."""

    exit_status = 1

    def __init__(self, message: str | None = None, *, detail: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())
        #: What exactly was wrong, for a second line or the log: the message stays the exact
        #: sentence the design gives (`Invalid Coop owner configuration`), the detail varies.
        self.detail = detail

    @property
    def message(self) -> str:
        return str(self.args[0])


class UsageError(CoopError):
    """That input is not accepted; see --help."""

    exit_status = 2


class NotFound(UsageError):
    """No such row; `coop list --all` shows the ids that exist."""


class CommandRefused(UsageError):
    """The owner refused the request before running it; send a corrected request."""

    status_code = 400


class ArgumentError(CommandRefused):
    """A routed call's arguments do not fit its verb; the message names the parameter."""


class KeyConflict(CommandRefused):
    """That request key was already filed for another input; mint a new key."""

    status_code = 409


class LifecycleError(CoopError):
    """The lifecycle does not allow that move; re-read the row with `coop history`."""


class StoreError(CoopError):
    """The Coop database failed; check the file and its disk, then retry."""


class NoLedger(CoopError):
    """There is no ledger there; a read creates none: point COOP_HOME (or COOP_DB, --db) at the
    ledger, or start one with a command that writes."""


class OwnerUnavailable(CoopError):
    """The Coop owner service could not be used; nothing was written locally."""


class OwnerFileOutdated(OwnerUnavailable):
    """The owner file names the owner service's TCP address (an older build's): run `coop
    cutover` again to name its socket."""


class ServiceNotRunning(OwnerUnavailable):
    """Coop owner unavailable: coop serve is not running; nothing was sent."""


class ServiceNotTrusted(OwnerUnavailable):
    """Coop owner refused: its socket is not private to this user; nothing was sent."""


class KeyFileError(CoopError):
    """A key file cannot be used; write the key there with mode 0600."""


class KeyFileNotPrivate(KeyFileError):
    """A key file is readable by others; `chmod 600` it."""


class NeedsAPerson(CoopError):
    """`coop status --check` found something that needs a person."""


class TimedOut(CoopError):
    """The wait ended before the request was closed; wait again, or look with `coop request
    show`."""

    exit_status = 3


class ServiceError(CoopError):
    """The engine service (`coop serve`) cannot start; the message says what to fix."""


class GuardRefused(CoopError):
    """The engine service refused the request before reading it."""

    def __init__(self, message: str, *, status: int, reason: str, event: str) -> None:
        super().__init__(message)
        #: the HTTP status it is answered with, the word it is counted under and the log event
        #: its summary is said as (`owner.refused`, `phone.refused`)
        self.status = status
        self.reason = reason
        self.event = event


class BackupError(CoopError):
    """The backup or the restore could not be made; nothing was changed."""


#: Every error type the owner service may send back as a verdict, by name.
DOMAIN_ERRORS: dict[str, type[CoopError]] = {
    cls.__name__: cls
    for cls in (CoopError, UsageError, NotFound, LifecycleError, StoreError, OwnerUnavailable)
}
