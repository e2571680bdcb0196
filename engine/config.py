"""Where the engine's files live and who the named deciders are, read from the environment.

- `COOP_HOME`: the data folder for every file; default `$XDG_DATA_HOME/coop` when that is an
  absolute path, else `~/.local/share/coop` (a blank `COOP_HOME` counts as unset): the floor's
  one rule, `plumbing.home`, which every package reads.
- `COOP_DB`: the ledger database; default `<COOP_HOME>/coop.db`.
- `COOP_OWNER`: the actor who may make the owner's calls; default `owner`.
- `COOP_CHIEF_ACTOR`: the Chief acting as the owner's proxy; default `chief`.
- `COOP_STALE_AFTER_S`: a take older than this shows as stale; default `3600`.
- `COOP_REMIND_MAX`: how many times the phone rings a request's ask again (`--remind`), read
  when the request is filed and stored with it; default `3`.

Library callers read this per call (it is a handful of environment lookups); services read it
once at start into an `EngineConfig`.
"""

from __future__ import annotations

import os

from engine.errors import UsageError
from plumbing import settings
from plumbing.bounds import MAX_REMIND_MAX
from plumbing.home import data_folder, pure_path

# `typing` and `pathlib` stay off the CLI's cold path (together ~17 ms of a cold start): names
# for annotations only, read by mypy (which treats any `TYPE_CHECKING` as true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

DEFAULT_OWNER = "owner"
DEFAULT_CHIEF_ACTOR = "chief"
DEFAULT_STALE_AFTER_S = 3600.0
DEFAULT_REMIND_MAX = 3
# The most reminders one request may ring (a bound on a nag, whatever the setting says) is the
# floor's `plumbing.bounds.MAX_REMIND_MAX`, which the door holds too.
_INFINITY = float("inf")  # without `math`: the CLI's cold path reads this module


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """The data folder by the floor's one rule (`plumbing.home.data_folder`), as a `Path`."""
    from pathlib import Path

    return Path(data_folder(environ))


def db_file(environ: Mapping[str, str] | None = None) -> str:
    """`db_path()` as text, for the CLI's path (no pathlib)."""
    env = os.environ if environ is None else environ
    if env.get("COOP_DB"):
        return pure_path(os.path.expanduser(env["COOP_DB"]))
    return pure_path(os.path.join(data_folder(env), "coop.db"))


def ledger_origin(db: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Which setting named the ledger's path, for a person who may have the wrong folder:
    `--db`, `COOP_DB=...`, `COOP_HOME=...`, or the default that applies when neither is set."""
    env = os.environ if environ is None else environ
    if db is not None:
        return "--db"
    if env.get("COOP_DB"):
        return f"COOP_DB={env['COOP_DB']}"
    if env.get("COOP_HOME", "").strip():
        return f"COOP_HOME={env['COOP_HOME']}"
    return f"COOP_HOME is not set: the default folder {data_folder(env)}"


def db_path(environ: Mapping[str, str] | None = None) -> Path:
    """The ledger database: `COOP_DB`, else `coop.db` under the data folder."""
    from pathlib import Path

    return Path(db_file(environ))


class EngineConfig:
    """The engine's settings, read once, immutable.

    A small slotted class rather than a dataclass or a NamedTuple: `dataclasses` costs the
    CLI's cold start ~25 ms (it imports inspect) and `typing` ~7 ms. `db_path` is the ledger's
    path as the caller gave it (text or a `Path`)."""

    __slots__ = ("chief_actor", "db_path", "owner", "remind_max", "stale_after_s")

    db_path: str | os.PathLike[str]
    owner: str
    chief_actor: str
    stale_after_s: float
    remind_max: int

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        owner: str,
        chief_actor: str,
        stale_after_s: float,
        remind_max: int = DEFAULT_REMIND_MAX,
    ) -> None:
        for name, value in (
            ("db_path", db_path),
            ("owner", owner),
            ("chief_actor", chief_actor),
            ("stale_after_s", stale_after_s),
            ("remind_max", remind_max),
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"EngineConfig is read once and never changed (not {name})")

    def _replace(self, **changes: object) -> EngineConfig:
        """A copy with some settings changed (a NamedTuple's spelling, kept for callers)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        values.update(changes)
        return EngineConfig(**values)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EngineConfig):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in self.__slots__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"EngineConfig({fields})"

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, db: str | os.PathLike[str] | None = None
    ) -> EngineConfig:
        """The settings from the environment; `db`, when given, is the ledger the caller
        already resolved (the environment's `COOP_DB` is then not consulted)."""
        env = os.environ if environ is None else environ
        raw_stale = env.get("COOP_STALE_AFTER_S", str(DEFAULT_STALE_AFTER_S))
        read = settings.decimal(raw_stale)  # ASCII digits only, never `inf`, `nan` or `٣٠`
        stale = -1.0 if read is None else read
        if not 0 < stale < _INFINITY:  # nan and infinity are not an age (nan compares false)
            raise UsageError(
                f"COOP_STALE_AFTER_S must be a positive number of seconds, not {raw_stale!r}"
            )
        return cls(
            db_path=db_file(env) if db is None else db,
            owner=env.get("COOP_OWNER") or DEFAULT_OWNER,
            chief_actor=env.get("COOP_CHIEF_ACTOR") or DEFAULT_CHIEF_ACTOR,
            stale_after_s=stale,
            remind_max=_remind_max(env.get("COOP_REMIND_MAX")),
        )


def _remind_max(raw: str | None) -> int:
    """`COOP_REMIND_MAX`: a whole number from 1 to `MAX_REMIND_MAX` (unset or blank: 3)."""
    if raw is None or not raw.strip():
        return DEFAULT_REMIND_MAX
    value = settings.whole_number(raw)
    if value is None or not 1 <= value <= MAX_REMIND_MAX:
        raise UsageError(
            f"COOP_REMIND_MAX must be a whole number from 1 to {MAX_REMIND_MAX}, not {raw!r}"
        )
    return value
