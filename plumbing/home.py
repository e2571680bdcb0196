"""Where the project's files live: the one data folder every package reads, and chief.db in it.

    data_folder(env)    a non-blank `COOP_HOME`; else `coop/` under `XDG_DATA_HOME` when that
                        is an absolute path (the XDG spec says a relative or empty one is
                        ignored); else `~/.local/share/coop`
    chief_db_file(env)  `CHIEF_DB` when set and not blank, else `chief.db` in the data folder
                        (`coop backup` and `coop restore` find it there; `chief` refuses a
                        blank or otherwise unusable CHIEF_DB at its edge, `chief.config`)
    pure_path(text)     a path's text normalised as `PurePosixPath` would, without pathlib

Paths are text: the `coop` CLI's cold path loads this module, and pathlib costs it ~10 ms.
Standard library only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

DATA_DIR_NAME = "coop"
CHIEF_DB_NAME = "chief.db"


def pure_path(text: str) -> str:
    """`str(PurePosixPath(text))` without importing pathlib: repeated and `.` parts dropped, a
    trailing slash too, `//` kept only as the very start (POSIX leaves its meaning open)."""
    if text.startswith("//") and not text.startswith("///"):
        root = "//"
    elif text.startswith("/"):
        root = "/"
    else:
        root = ""
    parts = [part for part in text.split("/") if part and part != "."]
    return root + "/".join(parts) or "."


def data_folder(environ: Mapping[str, str] | None = None) -> str:
    """The data folder (see the module docstring), from `environ` (default `os.environ`)."""
    env = os.environ if environ is None else environ
    coop_home = env.get("COOP_HOME", "")
    if coop_home.strip():
        return pure_path(os.path.expanduser(coop_home))
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg and xdg.startswith("/"):
        return pure_path(os.path.join(xdg, DATA_DIR_NAME))
    home = env.get("HOME") or os.path.expanduser("~")
    return pure_path(os.path.join(home, ".local", "share", DATA_DIR_NAME))


def chief_db_file(environ: Mapping[str, str] | None = None) -> str:
    """Where the Chief keeps chief.db: `CHIEF_DB` when set and not blank, else in the data
    folder."""
    env = os.environ if environ is None else environ
    explicit = env.get("CHIEF_DB", "")
    if explicit.strip():
        return pure_path(os.path.expanduser(explicit))
    return os.path.join(data_folder(env), CHIEF_DB_NAME)
