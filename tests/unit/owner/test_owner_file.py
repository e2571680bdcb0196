"""Every owner-file variant fails closed: the expected error, no connection opened, no request
sent, no receipt written."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import api, direct, ledger, owner, store, verbs
from engine.config import EngineConfig
from engine.errors import OwnerUnavailable
from tests.unit.owner.conftest import write_owner_file


@pytest.fixture
def listener(home: Path) -> Iterator[socket.socket]:
    """The owner's socket, that nobody accepts on: a connection would sit in its backlog."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(home / "service.sock"))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def _socket(sock: socket.socket) -> str:
    return str(sock.getsockname())


def _nobody_connected(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


def _credential(home: Path, mode: int = 0o600) -> Path:
    path = home / "owner.key"
    path.write_text("secret\n")
    path.chmod(mode)
    return path


def _valid(home: Path, sock: socket.socket) -> dict[str, object]:
    return {
        "mode": "service",
        "database": str(home / "coop.db"),
        "socket": _socket(sock),
        "credential_file": str(_credential(home)),
        "transferred_at": "2026-01-01T00:00:00+00:00",
        "backup": str(home / "coop.db.bak"),
    }


def _assert_nothing_happened(home: Path, sock: socket.socket) -> None:
    assert not (home / "coop.db").exists(), "a connection was opened"
    assert _nobody_connected(sock), "a request was sent"
    assert not list((home / "receipts").glob("*.json")) if (home / "receipts").exists() else True


BROKEN = {
    "mode local": (
        lambda v: {**v, "mode": "local"},
        OwnerUnavailable,
        "Invalid Coop owner configuration",
    ),
    "mode missing": (
        lambda v: {k: x for k, x in v.items() if k != "mode"},
        OwnerUnavailable,
        "Invalid Coop owner configuration",
    ),
    "another database": (
        lambda v: {**v, "database": "/elsewhere/other.db"},
        OwnerUnavailable,
        "Invalid Coop owner configuration",
    ),
    "not an object": (lambda v: [v], OwnerUnavailable, "Invalid Coop owner configuration"),
    "invalid json": (lambda v: "{not json", OwnerUnavailable, "Invalid Coop owner configuration"),
    "database missing": (
        lambda v: {k: x for k, x in v.items() if k != "database"},
        OwnerUnavailable,
        "Invalid Coop owner configuration",
    ),
}


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_owner_file_fails_closed_before_routing_or_opening(
    home: Path, listener: socket.socket, variant: str
) -> None:
    change, error, words = BROKEN[variant]
    write_owner_file(home / "coop.db.owner.json", change(_valid(home, listener)))

    with pytest.raises(error, match=words):
        ledger.add_todo("write the report", actor="agent")
    with pytest.raises(error, match=words), direct.connection():
        pass
    with pytest.raises(error, match=words) as caught:
        ledger.list_items()

    # Exactly the design's sentence; what was wrong is the detail, printed on its own line.
    assert str(caught.value) == words
    assert caught.value.detail
    _assert_nothing_happened(home, listener)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("socket", "service.sock", "Invalid Coop owner configuration"),
        ("socket", "", "Invalid Coop owner configuration"),
        ("socket", 8764, "Invalid Coop owner configuration"),
        ("credential_file", "/nonexistent/owner.key", "Invalid Coop owner configuration"),
    ],
)
def test_owner_socket_or_credential_unusable_fails_closed(
    home: Path, listener: socket.socket, field: str, value: object, words: str
) -> None:
    write_owner_file(home / "coop.db.owner.json", {**_valid(home, listener), field: value})

    with pytest.raises(OwnerUnavailable, match=words) as caught:
        ledger.add_todo("write the report", actor="agent")

    assert str(caught.value) == words
    _assert_nothing_happened(home, listener)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_credential_readable_by_others_is_refused_before_a_byte_is_sent(
    home: Path, listener: socket.socket, mode: int
) -> None:
    config = _valid(home, listener)
    Path(str(config["credential_file"])).chmod(mode)
    write_owner_file(home / "coop.db.owner.json", config)

    with pytest.raises(OwnerUnavailable) as caught:
        ledger.take_todo(1, actor="agent")

    assert str(caught.value) == "Coop credential must be private (0600)"
    _assert_nothing_happened(home, listener)


def test_direct_sql_is_refused_while_an_owner_file_exists(
    home: Path, listener: socket.socket
) -> None:
    write_owner_file(home / "coop.db.owner.json", _valid(home, listener))

    with pytest.raises(OwnerUnavailable) as caught, direct.connection():
        pass

    assert str(caught.value) == "Direct SQL is disabled; use the Coop service API"
    _assert_nothing_happened(home, listener)


def test_coop_owner_file_overrides_the_path_beside_the_store(
    home: Path, listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = write_owner_file(home / "custom-owner.json", {**_valid(home, listener), "mode": 1})
    monkeypatch.setenv("COOP_OWNER_FILE", str(elsewhere))

    assert owner.owner_file_path(home / "coop.db") == elsewhere
    with pytest.raises(OwnerUnavailable, match="Invalid Coop owner configuration"):
        ledger.add_todo("write the report", actor="agent")
    _assert_nothing_happened(home, listener)


def test_no_owner_file_means_local_mode(home: Path) -> None:
    assert owner.owner_config(home / "coop.db") is None
    added = ledger.add_todo("write the report", actor="agent")
    assert added["todo"]["title"] == "write the report"
    assert (home / "coop.db").exists()


def test_owner_file_is_read_on_every_call(home: Path, listener: socket.socket) -> None:
    ledger.add_todo("before the cutover", actor="agent")
    owner_file = home / "coop.db.owner.json"
    write_owner_file(owner_file, {**_valid(home, listener), "mode": "local"})

    with pytest.raises(OwnerUnavailable, match="Invalid Coop owner configuration"):
        ledger.list_items()

    owner_file.unlink()
    assert [item["title"] for item in ledger.list_items()] == ["before the cutover"]


def test_the_owners_verbs_run_on_the_connection_handed_in_whatever_the_owner_file_says(
    home: Path, listener: socket.socket
) -> None:
    conn = owner.register_fence_function(store.open_connection(home / "coop.db"))
    config = EngineConfig(home / "coop.db", owner="owner", chief_actor="chief", stale_after_s=60)
    unit = verbs.Unit(tx=lambda: conn, config=lambda: config)
    try:
        write_owner_file(home / "coop.db.owner.json", _valid(home, listener))
        with store.write(conn):
            verbs.ledger.add_todo(unit, "run by the owner", actor="agent")
        titles = [item["title"] for item in verbs.ledger.list_items(unit)]
        assert titles == ["run by the owner"]
        assert conn.execute("SELECT COUNT(*) FROM todos").fetchone()[0] == 1  # still open
    finally:
        conn.close()
    assert _nobody_connected(listener)


def test_a_public_call_reads_the_owner_file_once(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[Path] = []
    real = owner.owner_config

    def counted(db: Path | None = None) -> dict | None:
        reads.append(Path(str(db)))
        return real(db)

    monkeypatch.setattr(api, "owner_config", counted)
    monkeypatch.setattr(owner, "owner_config", counted)
    ledger.add_todo("counted", actor="agent")
    ledger.list_items()
    assert reads == [home / "coop.db", home / "coop.db"]
