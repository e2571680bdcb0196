import pytest

from tests.support.ledger import db, e2e_env

__all__ = ["db", "e2e_env"]


@pytest.fixture(autouse=True)
def _coop_settings(e2e_env: None) -> None:
    """These tests run the real `coop` CLI and API, whose settings are the environment."""
