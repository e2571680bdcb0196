"""The chief package's errors: one root, each class saying the likely cause and what to do.

    ChiefError                  something in the Chief's side of the pipeline went wrong
    ├── ChiefConfigError        a setting (CHIEF_DB, COOP_HOME, XDG_DATA_HOME, CHIEF_OWNER) is bad
    ├── ChiefInputError         a caller passed a value the Chief does not accept (text, source id,
    │                           role, turn kind, origin); the message lists what is accepted
    ├── ChiefStoreError         chief.db could not be opened, migrated, read or written
    │                           (sqlite3 errors are translated into this in chief/store/ only)
    ├── DoorError               the notify door refused or failed a request
    │   ├── PostureUnavailable  the security posture could not be read (chief.door.posture);
    │   │                       the door answers 503 rather than guess
    │   ├── ChannelUnavailable  a notify could not be queued for Telegram (not configured, no
    │   │                       outbox id); 503 notification_channel_unavailable
    │   └── ChiefUnavailable    the Chief could not take a report or an entry (chief.db failed);
    │                           503 chief_unavailable
    ├── TelegramUnavailable     Telegram refused or could not be reached; `retry_after_s` carries
    │   │                       Telegram's own Retry-After when it gave one; `in_doubt` when the
    │   │                       request went out and no answer came back (it may have rung)
    │   ├── TelegramRefused     Telegram refuses the bot or the chat for good (a bad token, an
    │   │                       unknown chat, a bot the owner blocked) until a person acts;
    │   │                       `kind`, `answer` and `action` say which and what to do
    │   └── TelegramConflict    another reader polls this bot's updates (409 Conflict: a second
    │                           door, `chief telegram pair`); the door's phone retries slowly
    └── EngineUnavailable       the ledger service (`coop serve`) answered with an error: a
        │                       refused service key, a store error, an answer it cannot read
        └── EngineUnreachable   nothing answers at COOP_SERVICE_SOCKET within the bound: `coop
                                serve` is not running (or is stuck)

Every class's docstring is its default message, so `raise ChiefStoreError()` still says something
a person can act on.
"""

from __future__ import annotations


class ChiefError(Exception):
    """The Chief could not do what was asked — see the log line before this one for the cause."""

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (type(self).__doc__ or "").strip()
        super().__init__(self.message)


class ChiefConfigError(ChiefError):
    """A Chief setting has a bad value — fix the environment variable named in the message."""


class ChiefInputError(ChiefError):
    """The Chief does not accept this value — the message lists what it accepts."""


class ChiefStoreError(ChiefError):
    """chief.db could not be read or written — check the file, its folder and free disk space."""


class DoorError(ChiefError):
    """The notify door refused or failed this request — see the door's log for the reason."""


class PostureUnavailable(DoorError):
    """The security posture could not be read; fix the posture file, then retry."""


class ChannelUnavailable(DoorError):
    """The notify could not be queued for Telegram; the engine keeps the row and retries later."""

    def __init__(self, message: str | None = None, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        #: how long the caller should wait (the door's Retry-After), when the door knows
        self.retry_after_s = retry_after_s


class ChiefUnavailable(DoorError):
    """The Chief could not take the report (chief.db failed); the engine retries the row later."""


class TelegramUnavailable(ChiefError):
    """Telegram did not accept the message — the engine will retry the row later."""

    def __init__(
        self,
        message: str | None = None,
        *,
        retry_after_s: float | None = None,
        in_doubt: bool = False,
    ) -> None:
        super().__init__(message)
        # Telegram's own flood-control wait, passed on as the door's Retry-After.
        self.retry_after_s = retry_after_s
        # The request went out and its answer never came: Telegram may have taken the message.
        self.in_doubt = in_doubt


class TelegramRefused(TelegramUnavailable):
    """Telegram refuses this bot or chat until a person acts — fix what the door's status names;
    the door tries again at its backoff cap."""

    def __init__(
        self,
        message: str | None = None,
        *,
        kind: str = "forbidden",
        answer: str = "",
        action: str = "",
    ) -> None:
        super().__init__(message)
        #: bad_token, chat_not_found, chat_migrated, bot_blocked or forbidden
        self.kind = kind
        #: Telegram's answer, as it gave it (status and description), never the bot token
        self.answer = answer
        #: what a person does about it
        self.action = action

    @classmethod
    def named(cls, kind: str, answer: str, action: str) -> TelegramRefused:
        """The refusal `kind`, Telegram's `answer`, and the `action` a person takes."""
        return cls(
            f"Telegram refuses the messages ({answer}): {action}",
            kind=kind,
            answer=answer,
            action=action,
        )


class TelegramConflict(TelegramUnavailable):
    """Another reader is polling this bot's updates (409 Conflict) — stop the other door or
    `chief telegram pair`; the door's phone asks again slowly meanwhile."""


class EngineUnavailable(ChiefError):
    """The ledger service (coop serve) answered with an error — see its log; the door asks again
    on the next command."""


class EngineUnreachable(EngineUnavailable):
    """The ledger service (coop serve) is not running — start it (`coop serve`) or fix
    COOP_SERVICE_SOCKET."""

    def __init__(self, message: str | None = None, *, timed_out: bool = False) -> None:
        super().__init__(message)
        #: it took the call but did not answer within the bound (stuck, not gone)
        self.timed_out = timed_out
