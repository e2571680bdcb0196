"""The notifier's errors: one root, each message saying what happened and what to do next.

    NotifierError                   root; its docstring is the default message
    ├── ConfigError                 a setting is wrong (names the setting); nothing starts
    │   └── ServiceKeyError         the service key file is missing, unreadable or not 0600
    ├── StoreError                  the Coop database failed (sqlite3 errors and the engine's
    │                               store errors translated in notifier.delivery)
    ├── LockLost                    this worker no longer owns the worker lock it was draining under
    └── DaemonAlreadyRunning        another notifier daemon holds this store's instance lock

A door that refuses, times out or cannot be reached is not an error: it is a deferral
(notifier.outcome), and the row waits for its next attempt.
"""

from __future__ import annotations


class NotifierError(Exception):
    """The notifier could not do that."""

    exit_status = 1

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())

    @property
    def message(self) -> str:
        return str(self.args[0])


class ConfigError(NotifierError):
    """A notifier setting is wrong; fix it in the environment and start again."""

    exit_status = 2


class ServiceKeyError(ConfigError):
    """The service key file cannot be used; write the door's key there with mode 0600."""


class StoreError(NotifierError):
    """The Coop database failed; check the file and its disk, then start the notifier again."""


class LockLost(NotifierError):
    """This worker no longer owns the worker lock; another worker drains now, so this one stops."""


class DaemonAlreadyRunning(NotifierError):
    """Another notifier daemon already runs for this store; stop it first."""
