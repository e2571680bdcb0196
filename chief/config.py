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
from plumbing import home

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
    """chief.db by the floor's rule (`plumbing.home.chief_db_file`: CHIEF_DB, else in the data
    folder), once a set CHIEF_DB or COOP_HOME is found usable."""
    explicit = environ.get("CHIEF_DB")
    if explicit is not None:
        path = _non_blank_path("CHIEF_DB", explicit)
        if path.is_dir():
            raise ChiefConfigError(
                f"CHIEF_DB={explicit!r} is a folder — give the path of the database file, "
                f"e.g. {path / home.CHIEF_DB_NAME}"
            )
    coop_home = environ.get("COOP_HOME", "")
    if coop_home.strip():
        _non_blank_path("COOP_HOME", coop_home)
    return Path(home.chief_db_file(environ))


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
