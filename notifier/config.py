"""The notifier's settings, read once at start from the environment into a frozen `NotifierConfig`.

    COOP_DB                the ledger database          default <COOP_HOME>/coop.db
    COOP_DOOR_SOCKET       the Chief's notify door's    default <COOP_HOME>/door.sock
                           Unix socket (plumbing.door), checked private before each request
    COOP_SERVICE_KEY_FILE  the shared service key, 0600 default <COOP_HOME>/service.key
    COOP_CLIENT_TIMEOUT_S  bound on one door call       default 15
    COOP_BACKOFF_BASE_S    first deferral's delay       default 1 (doubles per attempt, with jitter)
    COOP_BACKOFF_MAX_S     cap of that delay            default 300
    COOP_UNREACHABLE_RETRY_S  retry interval while     default 1 (fixed, not backed off: nothing
                           nothing listens on the      listens, so asking again costs nothing;
                           door's socket               a door that comes back gets the row at once)
    COOP_BACKSTOP_S        longest sleep of the daemon  default 300 (a kick or a due row wakes
                                                        it sooner; the backstop bounds a lost kick)
    COOP_BATCH_MAX         due head rows one POST       default 64, 1..64 (1: one row per POST on
                           may carry                    the single route; above 1 the batch route,
                                                        the notify route + "-batch")

A wrong value raises `ConfigError` naming the setting, and the notifier does not start; so does
a retired setting that named a TCP door (`COOP_DOOR_URL`, `CHIEF_PORT`, `CHIEF_HOST`: one line
saying what to set instead). The key
file must be private to its owner (mode 0600), as on the door's side; it is read here once, so
rotating the key means restarting the notifier.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.config import db_path as engine_db_path
from notifier.errors import ConfigError, ServiceKeyError
from notifier.outcome import UNREACHABLE_RETRY_S
from plumbing import door as door_address
from plumbing import settings
from plumbing.keyfile import read_key, service_key_file
from plumbing.wire import CLIENT_TIMEOUT_S, NOTIFY_BATCH_PATH, NOTIFY_PATH

# The wire (the notify routes, the client timeout's default) is `plumbing.wire`'s, the key file
# and its rule `plumbing.keyfile`'s, the door's socket `plumbing.door`'s: each written once.
DEFAULT_CLIENT_TIMEOUT_S = CLIENT_TIMEOUT_S
DEFAULT_BACKOFF_BASE_S = 1.0
DEFAULT_BACKOFF_MAX_S = 300.0
# Nothing listens on the door's port: tried again on this fixed interval (notifier.outcome).
DEFAULT_UNREACHABLE_RETRY_S = UNREACHABLE_RETRY_S
DEFAULT_BACKSTOP_S = 300.0
# The largest the door takes by default: a batch forms only from rows already due (a lone row
# still goes at once), and each request costs ~1 ms of CPU across the notifier and the door
# whatever it carries, so under a backlog the bigger batch pays it once per 64 rows instead of
# per 8 (bench/README.md: 1.72 -> 0.76 ms of CPU per row across processes, 8 -> 64).
DEFAULT_BATCH_MAX = 64
# The door's default CHIEF_NOTIFY_BATCH_MAX: a larger batch would be refused (422) by default.
MAX_BATCH_MAX = 64
# A setting past a day is a typo (milliseconds for seconds), not a wish.
MAX_SETTING_S = 86_400.0


@dataclass(frozen=True)
class NotifierConfig:
    """The notifier's settings, read once."""

    db_path: Path
    #: `COOP_DOOR_SOCKET`: the door's Unix socket.
    door_socket: Path
    service_key: str = field(repr=False)
    service_key_file: Path | None = None
    client_timeout_s: float = DEFAULT_CLIENT_TIMEOUT_S
    backoff_base_s: float = DEFAULT_BACKOFF_BASE_S
    backoff_max_s: float = DEFAULT_BACKOFF_MAX_S
    backstop_s: float = DEFAULT_BACKSTOP_S
    batch_max: int = DEFAULT_BATCH_MAX
    unreachable_retry_s: float = DEFAULT_UNREACHABLE_RETRY_S

    @property
    def door_url(self) -> str:
        """The notify route's URL over the socket (its host is only the request's `Host`)."""
        return door_address.BASE_URL + NOTIFY_PATH

    @property
    def batch_url(self) -> str:
        """The door's batch route, beside the notify route."""
        return door_address.BASE_URL + NOTIFY_BATCH_PATH

    def __post_init__(self) -> None:
        if not 1 <= self.batch_max <= MAX_BATCH_MAX:
            raise ConfigError(
                f"COOP_BATCH_MAX must be a whole number from 1 to {MAX_BATCH_MAX},"
                f" not {self.batch_max!r}"
            )
        for name, value in (
            ("COOP_CLIENT_TIMEOUT_S", self.client_timeout_s),
            ("COOP_BACKOFF_BASE_S", self.backoff_base_s),
            ("COOP_BACKOFF_MAX_S", self.backoff_max_s),
            ("COOP_BACKSTOP_S", self.backstop_s),
            ("COOP_UNREACHABLE_RETRY_S", self.unreachable_retry_s),
        ):
            if not 0 < value <= MAX_SETTING_S:
                raise ConfigError(
                    f"{name} must be a number of seconds above 0 and at most {MAX_SETTING_S:g},"
                    f" not {value!r}"
                )
        if self.backoff_max_s < self.backoff_base_s:
            raise ConfigError(
                f"COOP_BACKOFF_MAX_S ({self.backoff_max_s:g}) must be at least"
                f" COOP_BACKOFF_BASE_S ({self.backoff_base_s:g})"
            )
        if not self.service_key:
            raise ServiceKeyError("the service key is empty — put the door's key in the file")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NotifierConfig:
        """Read and check every setting; `ConfigError` names the first wrong one."""
        env = os.environ if environ is None else environ
        retired = door_address.retired_setting(env)
        if retired is not None:
            raise ConfigError(retired)
        key_file = Path(service_key_file(env))
        return cls(
            db_path=engine_db_path(env),
            door_socket=Path(door_address.socket_path(env)),
            service_key=read_service_key(key_file),
            service_key_file=key_file,
            client_timeout_s=_seconds(env, "COOP_CLIENT_TIMEOUT_S", DEFAULT_CLIENT_TIMEOUT_S),
            backoff_base_s=_seconds(env, "COOP_BACKOFF_BASE_S", DEFAULT_BACKOFF_BASE_S),
            backoff_max_s=_seconds(env, "COOP_BACKOFF_MAX_S", DEFAULT_BACKOFF_MAX_S),
            backstop_s=_seconds(env, "COOP_BACKSTOP_S", DEFAULT_BACKSTOP_S),
            batch_max=_batch_max(env),
            unreachable_retry_s=_seconds(
                env, "COOP_UNREACHABLE_RETRY_S", DEFAULT_UNREACHABLE_RETRY_S
            ),
        )


def _batch_max(env: Mapping[str, str]) -> int:
    raw = env.get("COOP_BATCH_MAX")
    if raw is None or raw.strip() == "":
        return DEFAULT_BATCH_MAX
    value = whole_number(raw, 1, MAX_BATCH_MAX)
    if value is None:
        raise ConfigError(
            f"COOP_BATCH_MAX must be a whole number from 1 to {MAX_BATCH_MAX}, not {raw!r}"
        )
    return value


def whole_number(raw: str, low: int, high: int) -> int | None:
    """`raw` read as a whole number (ASCII digits only) from `low` to `high`; None for anything
    else."""
    value = settings.whole_number(raw)
    return value if value is not None and low <= value <= high else None


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    read = settings.decimal(raw)  # ASCII digits only, never `inf`, `nan` or `٣٠`
    value = float("nan") if read is None else read
    if not 0 < value <= MAX_SETTING_S:  # also false for nan
        raise ConfigError(
            f"{name} must be a number of seconds above 0 and at most {MAX_SETTING_S:g}, not {raw!r}"
        )
    return value


def read_service_key(path: Path) -> str:
    """The key in `path` (`plumbing.keyfile.read_key`: this user's alone, one short line), its
    refusal worded as the notifier's `ServiceKeyError`."""
    try:
        return read_key(path, "COOP_SERVICE_KEY_FILE")
    except FileNotFoundError:
        raise ServiceKeyError(
            f"COOP_SERVICE_KEY_FILE {path} does not exist — write the door's service key there"
            " (mode 0600), or point COOP_SERVICE_KEY_FILE at it"
        ) from None
    except (OSError, ValueError) as exc:
        raise ServiceKeyError(str(exc)) from exc
