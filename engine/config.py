"""Where the engine's files live and who the named deciders are, read from the environment.

- `COOP_HOME`: the data folder for every file; default `$XDG_DATA_HOME/coop`, or
  `~/.local/share/coop`.
- `COOP_DB`: the ledger database; default `<COOP_HOME>/coop.db`.
- `COOP_OWNER`: the actor who may make the owner's calls; default `owner`.
- `COOP_CHIEF_ACTOR`: the Chief acting as the owner's proxy; default `chief`.
- `COOP_STALE_AFTER_S`: a take older than this shows as stale; default `3600`.

Library callers read this per call (it is a handful of environment lookups); services read it
once at start into an `EngineConfig`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from engine.errors import UsageError

DEFAULT_OWNER = "owner"
DEFAULT_CHIEF_ACTOR = "chief"
DEFAULT_STALE_AFTER_S = 3600.0


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """The data folder: `COOP_HOME`, else the per-user data directory."""
    env = os.environ if environ is None else environ
    if env.get("COOP_HOME"):
        return Path(env["COOP_HOME"]).expanduser()
    xdg = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "coop"


def db_path(environ: Mapping[str, str] | None = None) -> Path:
    """The ledger database: `COOP_DB`, else `coop.db` under the data folder."""
    env = os.environ if environ is None else environ
    if env.get("COOP_DB"):
        return Path(env["COOP_DB"]).expanduser()
    return data_home(env) / "coop.db"


class EngineConfig(NamedTuple):
    """The engine's settings, read once (immutable; a NamedTuple rather than a dataclass because
    `dataclasses` alone costs the CLI's cold start ~10 ms)."""

    db_path: Path
    owner: str
    chief_actor: str
    stale_after_s: float

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EngineConfig:
        env = os.environ if environ is None else environ
        raw_stale = env.get("COOP_STALE_AFTER_S", str(DEFAULT_STALE_AFTER_S))
        try:
            stale = float(raw_stale)
        except ValueError:
            stale = -1.0
        if stale <= 0:
            raise UsageError(
                f"COOP_STALE_AFTER_S must be a positive number of seconds, not {raw_stale!r}"
            )
        return cls(
            db_path=db_path(env),
            owner=env.get("COOP_OWNER") or DEFAULT_OWNER,
            chief_actor=env.get("COOP_CHIEF_ACTOR") or DEFAULT_CHIEF_ACTOR,
            stale_after_s=stale,
        )
