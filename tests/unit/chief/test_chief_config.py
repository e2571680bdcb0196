"""ChiefConfig.from_env: where chief.db lives, whose it is, and errors that name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from chief.config import ChiefConfig
from chief.errors import ChiefConfigError


def test_chief_db_wins_over_everything(tmp_path: Path) -> None:
    env = {"CHIEF_DB": str(tmp_path / "x.db"), "COOP_HOME": "/srv/coop", "XDG_DATA_HOME": "/d"}
    assert ChiefConfig.from_env(env).db_path == tmp_path / "x.db"


def test_coop_home_holds_chief_db() -> None:
    env = {"COOP_HOME": "/srv/coop", "XDG_DATA_HOME": "/d"}
    assert ChiefConfig.from_env(env).db_path == Path("/srv/coop/chief.db")


def test_xdg_data_home_then_the_home_default() -> None:
    assert ChiefConfig.from_env({"XDG_DATA_HOME": "/d"}).db_path == Path("/d/coop/chief.db")
    assert ChiefConfig.from_env({"HOME": "/home/owner"}).db_path == Path(
        "/home/owner/.local/share/coop/chief.db"
    )


def test_a_relative_xdg_data_home_is_ignored_as_the_spec_says() -> None:
    env = {"XDG_DATA_HOME": "relative/dir", "HOME": "/home/owner"}
    assert ChiefConfig.from_env(env).db_path == Path("/home/owner/.local/share/coop/chief.db")


def test_owner_has_no_default_and_is_trimmed() -> None:
    assert ChiefConfig.from_env({"HOME": "/h"}).owner is None
    assert ChiefConfig.from_env({"HOME": "/h", "CHIEF_OWNER": " owner "}).owner == "owner"


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"CHIEF_DB": ""}, "CHIEF_DB"),
        ({"CHIEF_DB": "  "}, "CHIEF_DB"),
        ({"HOME": "/h", "CHIEF_OWNER": ""}, "CHIEF_OWNER"),
        ({"HOME": "/h", "CHIEF_OWNER": "owner\x07"}, "CHIEF_OWNER"),
        ({"HOME": "/h", "CHIEF_OWNER": "d" * 500}, "CHIEF_OWNER"),
    ],
)
def test_a_bad_value_names_the_setting(env: dict[str, str], setting: str) -> None:
    with pytest.raises(ChiefConfigError, match=setting):
        ChiefConfig.from_env(env)


def test_chief_db_naming_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ChiefConfigError, match=r"CHIEF_DB.*folder"):
        ChiefConfig.from_env({"CHIEF_DB": str(tmp_path)})


def test_config_is_frozen() -> None:
    config = ChiefConfig(db_path=Path("/x/chief.db"), owner="owner")
    with pytest.raises(AttributeError):
        config.owner = "mum"  # type: ignore[misc]
