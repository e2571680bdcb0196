"""Where the engine's files live and who the named deciders are, read from the environment.

- `COOP_HOME`: the data folder for every file; default `$XDG_DATA_HOME/coop` when that is an
  absolute path, else `~/.local/share/coop` (a blank `COOP_HOME` counts as unset).
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

DATA_DIR_NAME = "coop"
DEFAULT_OWNER = "owner"
DEFAULT_CHIEF_ACTOR = "chief"
DEFAULT_STALE_AFTER_S = 3600.0


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """The data folder: a non-blank `COOP_HOME`; else `coop/` under `XDG_DATA_HOME` if that is
    an absolute path (the XDG spec says a relative or empty one is ignored); else
    `~/.local/share/coop`.

    One rule, three copies (the packages share no code): `chief.config._db_path` and
    `chief.door.config.data_home` are its twins, and tests/contract/test_shared_facts.py fails
    if any of them resolves another folder. The notifier calls this one."""
    env = os.environ if environ is None else environ
    coop_home = env.get("COOP_HOME", "")
    if coop_home.strip():
        return Path(coop_home).expanduser()
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / DATA_DIR_NAME
    return Path(env.get("HOME") or Path.home()) / ".local" / "share" / DATA_DIR_NAME


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
