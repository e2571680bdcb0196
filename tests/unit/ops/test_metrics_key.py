"""The engine's `/metrics` reads the service key through the engine's one key reader: a key file
others could read is refused (issue 11's rule for every reader of the key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import metrics


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_key_file_others_can_read_is_not_used(tmp_path: Path, mode: int) -> None:
    key = tmp_path / "service.key"
    key.write_text("shared-key-0123456789\n")
    key.chmod(mode)
    assert metrics.read_service_key({"COOP_SERVICE_KEY_FILE": str(key)}) is None


def test_a_private_key_file_is_used(tmp_path: Path) -> None:
    key = tmp_path / "service.key"
    key.write_text("shared-key-0123456789\n")
    key.chmod(0o600)
    assert metrics.read_service_key({"COOP_SERVICE_KEY_FILE": str(key)}) == "shared-key-0123456789"


def test_the_key_is_found_in_the_data_folder(tmp_path: Path) -> None:
    (tmp_path / "service.key").write_text("in-the-folder-key\n")
    (tmp_path / "service.key").chmod(0o600)
    assert metrics.read_service_key({"COOP_HOME": str(tmp_path)}) == "in-the-folder-key"
