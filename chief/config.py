"""The settings every chief command shares (chief.db, the owner), read once into a frozen dataclass.

| setting        | meaning                                                            |
|----------------|--------------------------------------------------------------------|
| CHIEF_DB       | path of chief.db; wins over everything below                       |
| COOP_HOME      | data folder shared with the engine; chief.db lives in it (blank: unset) |
| XDG_DATA_HOME  | per-user data root (default ~/.local/share); chief.db in its coop/ |
| CHIEF_OWNER    | the owner whose Master Chief this is; no default (the door 503s)   |

`chief serve`'s own settings (the door's key and peers, the phone's Telegram) are
`chief.door.config`'s, not here.
Nothing is created on disk here: the store makes the folder when it opens the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from chief.errors import ChiefConfigError

DB_FILE_NAME = "chief.db"
DATA_DIR_NAME = "coop"
OWNER_MAX_CHARS = 200


@dataclass(frozen=True)
class ChiefConfig:
    """Where chief.db lives and whose conversation it holds."""

    db_path: Path
    owner: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> ChiefConfig:
        """Read the settings once; a bad value raises ChiefConfigError naming the variable."""
        return cls(db_path=_db_path(environ), owner=_owner(environ))


def _db_path(environ: Mapping[str, str]) -> Path:
    explicit = environ.get("CHIEF_DB")
    if explicit is not None:
        path = _non_blank_path("CHIEF_DB", explicit)
        if path.is_dir():
            raise ChiefConfigError(
                f"CHIEF_DB={explicit!r} is a folder — give the path of the database file, "
                f"e.g. {path / DB_FILE_NAME}"
            )
        return path
    # The data folder's rule is shared with `engine.config.data_home` and
    # `chief.door.config.data_home` (deliberate twins; tests/contract/test_shared_facts.py pins
    # them): a blank COOP_HOME counts as unset, as an empty XDG_DATA_HOME does.
    coop_home = environ.get("COOP_HOME", "")
    if coop_home.strip():
        return _non_blank_path("COOP_HOME", coop_home) / DB_FILE_NAME
    return _data_home(environ) / DATA_DIR_NAME / DB_FILE_NAME


def _data_home(environ: Mapping[str, str]) -> Path:
    raw = environ.get("XDG_DATA_HOME", "")
    # The XDG spec says a relative or empty XDG_DATA_HOME is invalid and must be ignored.
    if raw and Path(raw).is_absolute():
        return Path(raw)
    home = environ.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "share"


def _non_blank_path(name: str, raw: str) -> Path:
    if not raw.strip():
        raise ChiefConfigError(f"{name} is set but empty — unset it or give a path")
    if "\x00" in raw:
        raise ChiefConfigError(f"{name} contains a NUL byte — give a plain file system path")
    return Path(raw).expanduser()


def _owner(environ: Mapping[str, str]) -> str | None:
    raw = environ.get("CHIEF_OWNER")
    if raw is None:
        return None
    owner = raw.strip()
    if not owner:
        raise ChiefConfigError(
            "CHIEF_OWNER is set but empty — set it to the owner's name, or unset it"
        )
    if len(owner) > OWNER_MAX_CHARS or not owner.isprintable():
        raise ChiefConfigError(
            f"CHIEF_OWNER={raw[:40]!r} is not a usable name — use printable text of at most "
            f"{OWNER_MAX_CHARS} characters"
        )
    return owner
