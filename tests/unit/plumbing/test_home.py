"""The floor's data folder (`plumbing.home`), which every package reads: where the ledger, the
Chief's database, the key and both sockets are found when nothing names them."""

from __future__ import annotations

import os

import pytest

from plumbing import door, home, service

HOME = "/home/someone"
# (the environment, the data folder it names)
DATA_FOLDER_CASES: list[tuple[dict[str, str], str]] = [
    ({"HOME": HOME}, f"{HOME}/.local/share/coop"),
    ({"HOME": HOME, "COOP_HOME": "/srv/coop"}, "/srv/coop"),
    ({"HOME": HOME, "COOP_HOME": "/srv//coop/"}, "/srv/coop"),
    ({"HOME": HOME, "COOP_HOME": "relative/data"}, "relative/data"),
    ({"HOME": HOME, "COOP_HOME": "./data", "XDG_DATA_HOME": "/xdg"}, "data"),
    ({"HOME": HOME, "COOP_HOME": ""}, f"{HOME}/.local/share/coop"),
    ({"HOME": HOME, "COOP_HOME": "   "}, f"{HOME}/.local/share/coop"),
    ({"HOME": HOME, "XDG_DATA_HOME": "/xdg"}, "/xdg/coop"),
    # The XDG spec says a relative or empty XDG_DATA_HOME is ignored.
    ({"HOME": HOME, "XDG_DATA_HOME": "xdg-relative"}, f"{HOME}/.local/share/coop"),
    ({"HOME": HOME, "XDG_DATA_HOME": "./xdg"}, f"{HOME}/.local/share/coop"),
    ({"HOME": HOME, "XDG_DATA_HOME": "~/xdg"}, f"{HOME}/.local/share/coop"),
    ({"HOME": HOME, "XDG_DATA_HOME": ""}, f"{HOME}/.local/share/coop"),
    ({"HOME": "/other/home", "XDG_DATA_HOME": "relative"}, "/other/home/.local/share/coop"),
]


@pytest.mark.parametrize(("env", "folder"), DATA_FOLDER_CASES, ids=lambda v: repr(v)[:60])
def test_the_data_folder_is_coop_home_else_xdg_else_local_share(
    env: dict[str, str], folder: str
) -> None:
    assert home.data_folder(env) == folder


def test_a_tilde_in_coop_home_is_the_processes_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/runner")
    assert home.data_folder({"COOP_HOME": "~/coop-data"}) == "/home/runner/coop-data"


def test_the_environment_given_is_the_one_read() -> None:
    assert home.data_folder({"HOME": "/nowhere-real"}) == "/nowhere-real/.local/share/coop"
    assert os.environ.get("HOME") != "/nowhere-real"


# (the environment, where chief.db is)
CHIEF_DB_CASES: list[tuple[dict[str, str], str]] = [
    ({"CHIEF_DB": "/srv/chief/chief.db", "COOP_HOME": "/var/lib/coop"}, "/srv/chief/chief.db"),
    ({"COOP_HOME": "/var/lib/coop"}, "/var/lib/coop/chief.db"),
    ({"COOP_HOME": "/var/lib//coop/"}, "/var/lib/coop/chief.db"),
    ({"COOP_HOME": "   ", "XDG_DATA_HOME": "/data", "HOME": "/home/o"}, "/data/coop/chief.db"),
    ({"XDG_DATA_HOME": "relative", "HOME": "/home/o"}, "/home/o/.local/share/coop/chief.db"),
    ({"HOME": "/home/o"}, "/home/o/.local/share/coop/chief.db"),
    ({"CHIEF_DB": "~/chief.db", "HOME": "/home/o"}, "/home/o/chief.db"),
    ({"CHIEF_DB": "  ", "HOME": "/home/o"}, "/home/o/.local/share/coop/chief.db"),
]


@pytest.mark.parametrize(("env", "path"), CHIEF_DB_CASES, ids=lambda v: repr(v)[:60])
def test_chief_db_is_chief_db_else_in_the_data_folder(
    env: dict[str, str], path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", env.get("HOME", "/home/o"))  # `~` is read from the process
    assert home.chief_db_file(env) == path


@pytest.mark.parametrize("raw", ["/a/b", "a//b/", "./a/./b", "//a", "///a", "", ".", "/"])
def test_a_pure_path_is_what_pathlib_would_print(raw: str) -> None:
    from pathlib import PurePosixPath

    assert home.pure_path(raw) == str(PurePosixPath(raw))


def test_both_sockets_sit_in_the_data_folder_unless_named() -> None:
    env = {"HOME": HOME, "XDG_DATA_HOME": "/xdg"}
    assert door.socket_path(env) == "/xdg/coop/door.sock"
    assert service.socket_path(env) == "/xdg/coop/service.sock"
    named = env | {"COOP_DOOR_SOCKET": "/run/d.sock", "COOP_SERVICE_SOCKET": "/run/s.sock"}
    assert door.socket_path(named) == "/run/d.sock"
    assert service.socket_path(named) == "/run/s.sock"
