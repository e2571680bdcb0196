"""The door's pure parts: settings, the guard's order, posture documents, the
per-row lock table, the serve lock, and the one mapping of python-telegram-bot's errors."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
from pathlib import Path

import anyio
import pytest
import telegram.error

from chief.door.config import DoorConfig
from chief.door.guard import Guard
from chief.door.posture import FixedPosture, parse_posture
from chief.errors import DoorError, PostureUnavailable, TelegramRefused, TelegramUnavailable
from chief.phone.locks import KeyedLocks
from chief.serve_lock import ServeLock
from chief.telegram.emulator import parse_fault
from chief.telegram.sender import translate_error
from tests.support.door import KEY, door_env, write_key


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    write_key(tmp_path)
    return door_env(tmp_path)


def test_door_config_defaults(tmp_path: Path) -> None:
    write_key(tmp_path)
    config = DoorConfig.from_env({"COOP_HOME": str(tmp_path)})
    assert (config.socket_path, config.metrics_port) == (tmp_path / "door.sock", 8765)
    assert config.service_key_file == tmp_path / "service.key"
    assert config.service_key_digest == hashlib.sha256(KEY.encode()).digest()
    assert {str(peer) for peer in config.allowed_peers} == {"127.0.0.1", "::1"}
    assert config.posture_file is None
    assert not config.telegram_configured
    assert config.telegram_api_base == "https://api.telegram.org/bot"
    assert KEY not in repr(config)


def test_door_config_key_defaults_to_the_xdg_data_dir(tmp_path: Path) -> None:
    (tmp_path / "coop").mkdir()
    write_key(tmp_path / "coop")
    config = DoorConfig.from_env({"XDG_DATA_HOME": str(tmp_path)})
    assert config.service_key_file == tmp_path / "coop" / "service.key"


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("CHIEF_HOST", "192.168.1.10"),
        ("CHIEF_HOST", "example.com"),
        ("CHIEF_PORT", "http"),
        ("CHIEF_PORT", "70000"),
        ("CHIEF_ALLOWED_PEERS", "localhost"),
        ("CHIEF_ALLOWED_PEERS", " , "),
        ("TELEGRAM_CHAT_ID", "42"),  # without TELEGRAM_BOT_TOKEN
        ("TELEGRAM_API_BASE", "api.telegram.org"),
        ("TELEGRAM_TIMEOUT_S", "0"),
        ("TELEGRAM_TIMEOUT_S", "soon"),
    ],
)
def test_door_config_wrong_value_names_the_setting(
    env: dict[str, str], setting: str, value: str
) -> None:
    with pytest.raises(DoorError) as caught:
        DoorConfig.from_env(env | {setting: value})
    assert any(name in str(caught.value) for name in (setting, "TELEGRAM_"))


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o666])
def test_door_config_refuses_a_key_file_others_can_read(tmp_path: Path, mode: int) -> None:
    write_key(tmp_path, mode=mode)
    with pytest.raises(DoorError, match=r"must be private \(0600\)"):
        DoorConfig.from_env(door_env(tmp_path))


def test_door_config_refuses_missing_or_empty_key(tmp_path: Path) -> None:
    with pytest.raises(DoorError, match="COOP_SERVICE_KEY_FILE"):
        DoorConfig.from_env(door_env(tmp_path))
    write_key(tmp_path, key="  ")
    with pytest.raises(DoorError, match="is empty"):
        DoorConfig.from_env(door_env(tmp_path))


def _guard(env: dict[str, str]) -> Guard:
    return Guard(DoorConfig.from_env(env), FixedPosture("normal"))


def _headers(**extra: str) -> list[tuple[bytes, bytes]]:
    headers = {"host": "127.0.0.1:8765", "x-coop-service-key": KEY} | extra
    return [(name.encode(), value.encode()) for name, value in headers.items()]


def test_door_guard_passes_a_good_request(env: dict[str, str]) -> None:
    guard = _guard(env)
    assert guard.check("127.0.0.1", _headers(), owner_configured=True) is None
    assert guard.check("::1", _headers(), owner_configured=True) is None
    assert guard.check("::ffff:127.0.0.1", _headers(), owner_configured=True) is None


@pytest.mark.parametrize(
    ("peer", "headers", "reason"),
    [
        ("10.0.0.5", _headers(), "peer_not_allowed"),
        (None, _headers(), "peer_not_allowed"),
        ("testclient", _headers(), "peer_not_allowed"),
        ("127.0.0.1", _headers(origin="null"), "forwarded_or_browser"),
        ("127.0.0.1", _headers(**{"x-real-ip": "1.2.3.4"}), "forwarded_or_browser"),
        ("127.0.0.1", _headers(host="rebind.example"), "host_not_loopback"),
        ("127.0.0.1", _headers(**{"x-coop-service-key": KEY + " "}), None),
        ("127.0.0.1", [*_headers(), (b"x-coop-service-key", KEY.encode())], "service_key_invalid"),
        ("127.0.0.1", [*_headers(), (b"host", b"localhost")], "host_not_loopback"),
    ],
)
def test_door_guard_refusals(
    env: dict[str, str], peer: str | None, headers: list[tuple[bytes, bytes]], reason: str | None
) -> None:
    refusal = _guard(env).check(peer, headers, owner_configured=True)
    assert (refusal.reason if refusal else None) == reason


def test_door_guard_posture_then_owner(env: dict[str, str]) -> None:
    config = DoorConfig.from_env(env)
    for state, reason in (("blocked", "posture_blocked"), ("locked", "posture_locked")):
        refusal = Guard(config, FixedPosture(state)).check(  # type: ignore[arg-type]
            "127.0.0.1", _headers(), owner_configured=False
        )
        assert refusal is not None
        assert refusal.reason == reason
    refusal = _guard(env).check("127.0.0.1", _headers(), owner_configured=False)
    assert refusal is not None
    assert (refusal.status, refusal.reason) == (503, "owner_unconfigured")


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"[]", b'{"state": "open"}', b'{"state": null}', b"x" * 5000]
)
def test_door_posture_documents_that_say_nothing_are_unavailable(raw: bytes) -> None:
    with pytest.raises(PostureUnavailable):
        parse_posture(raw)


def test_door_posture_documents() -> None:
    assert parse_posture(b'{"state": "normal", "since": "today"}') == "normal"
    assert parse_posture(b'{"state": "locked"}') == "locked"


async def test_door_keyed_locks_serialise_and_empty_themselves() -> None:
    locks = KeyedLocks()
    order: list[str] = []
    inside = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("row"):
            inside.set()
            await release.wait()
            order.append("holder")

    async def waiter() -> None:
        async with locks.hold("row"):
            order.append("waiter")

    first = asyncio.create_task(holder())
    await inside.wait()
    second = asyncio.create_task(waiter())
    cancelled = asyncio.create_task(waiter())
    await asyncio.sleep(0)  # let both reach the lock (one loop turn, no timing)
    assert locks.waiting("row") == 3
    cancelled.cancel()
    release.set()
    await asyncio.gather(first, second)
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert order == ["holder", "waiter"]
    assert len(locks) == 0


async def test_door_keyed_locks_drop_waiters_cancelled_by_a_cancel_scope() -> None:
    # The door runs under anyio: a waiter leaves by its cancel scope, not by Task.cancel().
    locks = KeyedLocks()
    inside, release = anyio.Event(), anyio.Event()
    scope = anyio.CancelScope()

    async def holder() -> None:
        async with locks.hold("row"):
            inside.set()
            await release.wait()

    async def waiter() -> None:
        with scope:
            async with locks.hold("row"):
                pytest.fail("a cancelled waiter must never hold the lock")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(holder)
        await inside.wait()
        tasks.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert locks.waiting("row") == 2
        scope.cancel()
        await anyio.wait_all_tasks_blocked()
        assert locks.waiting("row") == 1
        release.set()
    assert scope.cancelled_caught
    assert len(locks) == 0


async def test_door_keyed_locks_bounded_by_holders_not_rows() -> None:
    locks = KeyedLocks()
    for index in range(1000):
        async with locks.hold(f"row-{index}"):
            assert len(locks) == 1
    assert len(locks) == 0


def test_door_serve_lock_refuses_a_second_holder(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "chief.db"
    with ServeLock(db) as first:
        assert first.path == tmp_path / "sub" / "chief.db.serve.lock"
        with pytest.raises(DoorError, match=f"pid {os.getpid()}"):
            ServeLock(db).acquire()
    with ServeLock(db):
        pass  # released by the first holder's exit


def _ptb_errors() -> list[type[telegram.error.TelegramError]]:
    return [
        cls
        for _, cls in inspect.getmembers(telegram.error, inspect.isclass)
        if issubclass(cls, telegram.error.TelegramError)
    ]


@pytest.mark.parametrize("cls", _ptb_errors(), ids=lambda cls: cls.__name__)
def test_door_every_ptb_error_translates_to_telegram_unavailable(
    cls: type[telegram.error.TelegramError], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails if python-telegram-bot grows an error the sender does not map."""
    monkeypatch.setenv("PTB_TIMEDELTA", "true")  # what BotSender opts in to
    if cls is telegram.error.RetryAfter:
        error: telegram.error.TelegramError = cls(7)  # type: ignore[call-arg]
    elif cls is telegram.error.ChatMigrated:
        error = cls(-100)  # type: ignore[call-arg]
    else:
        error = cls("boom")
    translated = translate_error(error)
    assert isinstance(translated, TelegramUnavailable)
    assert translated.retry_after_s == (7.0 if cls is telegram.error.RetryAfter else None)


@pytest.mark.parametrize(
    "document",
    [
        {"mode": "teapot"},
        {"mode": "429", "count": 0},
        {"mode": "5xx", "status": 404},
        {"mode": "delay", "delay_s": -1},
        {"mode": "429", "retry_after": 0},
        {"mode": "429", "methods": "sendMessage"},
        [],
    ],
)
def test_door_emulator_refuses_bad_fault_requests(document: object) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        parse_fault(document)


def _rejected_token(answer: str) -> telegram.error.InvalidToken:
    """What `Bot.initialize` raises for a token Telegram refuses: its own words, with the token,
    wrapping Telegram's answer."""
    try:
        try:
            raise telegram.error.InvalidToken(answer)
        except telegram.error.InvalidToken as exc:
            raise telegram.error.InvalidToken(
                "The token `123456:secret-token` was rejected by the server."
            ) from exc
    except telegram.error.InvalidToken as exc:
        return exc


@pytest.mark.parametrize(
    ("error", "kind", "answer", "remedy"),
    [
        (telegram.error.InvalidToken("Unauthorized"), "bad_token", "401 Unauthorized", "TOKEN"),
        (_rejected_token("Unauthorized"), "bad_token", "401 Unauthorized", "TELEGRAM_BOT_TOKEN"),
        (_rejected_token("Not Found"), "bad_token", "404 Not Found", "TELEGRAM_BOT_TOKEN"),
        (
            telegram.error.BadRequest("Bad Request: chat not found"),
            "chat_not_found",
            "400 Bad Request: chat not found",
            "TELEGRAM_CHAT_ID",
        ),
        (
            telegram.error.Forbidden("Forbidden: bot was blocked by the user"),
            "bot_blocked",
            "403 Forbidden: bot was blocked by the user",
            "unblock",
        ),
        (
            telegram.error.Forbidden("Forbidden: bot was kicked from the group chat"),
            "forbidden",
            "403 Forbidden: bot was kicked from the group chat",
            "add it back",
        ),
    ],
)
def test_door_telegram_permanent_refusals_are_named_with_what_to_do(
    error: telegram.error.TelegramError, kind: str, answer: str, remedy: str
) -> None:
    translated = translate_error(error)
    assert isinstance(translated, TelegramRefused)
    assert (translated.kind, translated.answer) == (kind, answer)
    assert remedy in translated.action
    assert translated.message == f"Telegram refuses the messages ({answer}): {translated.action}"
    assert "secret-token" not in translated.message  # PTB's wrapper names the token


@pytest.mark.parametrize(
    "error",
    [
        telegram.error.BadRequest("Bad Request: message is too long"),
        telegram.error.NetworkError("Bad Gateway"),
        telegram.error.TimedOut(),
        telegram.error.Conflict("Conflict"),
    ],
)
def test_door_passing_telegram_failures_are_not_permanent_refusals(
    error: telegram.error.TelegramError,
) -> None:
    assert not isinstance(translate_error(error), TelegramRefused)
