"""The door in-process, for the door's tests and `bench/bench_door.py`: a 0600 key file, the
door's environment, request bodies, and `door_stack` (the Bot API emulator and the door each on
a real uvicorn in the test's event loop, a real Chief on a real chief.db, python-telegram-bot
as the sender). `door_stack(..., on_socket=True)` serves the door on its Unix socket,
`<folder>/door.sock` (bound as `chief serve` binds it), where the notifier looks; else on
loopback TCP, as a host application may mount it. The same stack as processes is
`tests.support.stack`; both use its key, bot token, chat and owner."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
from fastapi import FastAPI

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.door.config import DoorConfig
from chief.door.posture import posture_source
from chief.door.router import make_router
from chief.door.verbs import DoorVerbs
from chief.serve import build_asks, build_ringer, running
from chief.telegram.emulator import EmulatorState, create_emulator, parse_fault
from chief.telegram.sender import BotSender
from plumbing.unix import bind_private
from plumbing.wire import NOTIFY_BATCH_PATH, NOTIFY_PATH, STATUS_PATH
from tests.support import procs
from tests.support.asgi import serve_asgi
from tests.support.stack import BOT_TOKEN, CHAT_ID, OWNER
from tests.support.stack import SERVICE_KEY as KEY

__all__ = [
    "BOT_TOKEN",
    "CHAT_ID",
    "KEY",
    "OWNER",
    "DoorStack",
    "batch",
    "body",
    "door_env",
    "door_stack",
    "key_headers",
    "write_key",
]


def write_key(folder: Path, key: str = KEY, mode: int = 0o600) -> Path:
    return procs.write_key(folder / "service.key", key, mode)


def door_env(folder: Path, **settings: str) -> dict[str, str]:
    """A complete door environment over `folder` (no inherited variables), plus `settings`."""
    env = {
        "COOP_HOME": str(folder),
        "COOP_SERVICE_KEY_FILE": str(folder / "service.key"),
        "CHIEF_METRICS_PORT": "off",
    }
    env.update(settings)
    return env


def key_headers(key: str = KEY) -> dict[str, str]:
    return {"X-Coop-Service-Key": key}


def body(outbox_id: str | None = "1", text: str = "todo #1 done: tests green") -> dict[str, str]:
    document = {"text": text, "kind": "todo.done"}
    if outbox_id is not None:
        document["outbox_id"] = outbox_id
    return document


def batch(outbox_ids: list[str], text: str = "row <{}>") -> dict[str, list[dict[str, str]]]:
    """A notify-batch body: one row per outbox id, its text `text` with the id filled in."""
    return {"items": [body(outbox_id, text=text.format(outbox_id)) for outbox_id in outbox_ids]}


@dataclass
class DoorStack:
    """The door in-process (`door_stack`); the stack as processes is `tests.support.stack`."""

    url: str  # `http://localhost` on the door's socket (`socket_path`)
    client: httpx.AsyncClient
    service: DoorVerbs
    chief: Chief | None
    emulator: EmulatorState
    emulator_url: str
    folder: Path
    socket_path: str = ""  # the door's socket, when served there (`on_socket`)

    async def notify(self, document: object, **kwargs: object) -> httpx.Response:
        return await self._post(NOTIFY_PATH, document, **kwargs)

    async def notify_batch(self, document: object, **kwargs: object) -> httpx.Response:
        return await self._post(NOTIFY_BATCH_PATH, document, **kwargs)

    async def _post(self, path: str, document: object, **kwargs: object) -> httpx.Response:
        """POST `document` to the door's `path`, with the service key unless `headers` says."""
        headers = kwargs.pop("headers", key_headers())
        return await self.client.post(
            self.url + path,
            json=document,
            headers=headers,  # type: ignore[arg-type]
            **kwargs,  # type: ignore[arg-type]
        )

    async def status(self) -> httpx.Response:
        return await self.client.get(self.url + STATUS_PATH, headers=key_headers())

    async def chief_lines(self, outbox_id: str) -> int:
        assert self.chief is not None
        key = "chief-report:coop-notify:" + outbox_id
        messages = await self.chief.recent_messages(1000)
        return sum(1 for message in messages if message.external_request_id == key)


@asynccontextmanager
async def door_stack(
    folder: Path,
    *,
    owner: str | None = OWNER,
    host: str = "127.0.0.1",
    telegram: bool = True,
    settings: Mapping[str, str] | None = None,
    client_timeout_s: float = 10.0,
    faults: Sequence[Mapping[str, object]] = (),
    wall_clock: Callable[[], datetime] | None = None,
    flood_limits: bool = False,
    on_socket: bool = False,
) -> AsyncIterator[DoorStack]:
    """The door mounted in a host FastAPI app, as a host application would mount it, on
    loopback TCP or (`on_socket`) on the door's socket. `faults` are armed in the emulator
    before the sender starts (its getMe included)."""
    write_key(folder)
    emulator_app, emulator = create_emulator(
        token=BOT_TOKEN, log_path=folder / "telegram.jsonl", flood_limits=flood_limits
    )
    for document in faults:
        emulator.arm(parse_fault(dict(document)))
    async with serve_asgi(emulator_app) as emulator_url:
        extra = dict(settings or {})
        if telegram:
            extra |= {
                "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
                "TELEGRAM_CHAT_ID": CHAT_ID,
                "TELEGRAM_API_BASE": emulator_url + "/bot",
            }
        config = DoorConfig.from_env(door_env(folder, **extra))
        sender = None
        if config.telegram_configured:
            assert config.telegram_bot_token is not None
            assert config.telegram_chat_id is not None
            sender = BotSender(
                config.telegram_bot_token,
                config.telegram_chat_id,
                base_url=config.telegram_api_base,
                timeout_s=config.telegram_timeout_s,
            )
            await sender.start()
        try:
            async with _maybe_chief(folder, owner) as chief, AsyncExitStack() as stack:
                ringer = None
                if chief is not None and sender is not None:
                    ringer = build_ringer(chief, sender, config, wall_clock=wall_clock)
                    await stack.enter_async_context(running(ringer, config))
                service = DoorVerbs(
                    chief=chief,
                    ringer=ringer,
                    posture=posture_source(config.posture_file),
                    wall_clock=wall_clock,
                )
                if chief is not None and sender is not None and ringer is not None:
                    asks = build_asks(chief, sender, ringer, wall_clock=wall_clock)
                    await stack.enter_async_context(running(asks, config))
                    service.asks = asks
                app = FastAPI()
                app.include_router(make_router(config, service))
                sock = bind_private(str(config.socket_path)) if on_socket else None
                uds = None if sock is None else str(config.socket_path)
                transport = None if uds is None else httpx.AsyncHTTPTransport(uds=uds)
                async with (
                    serve_asgi(app, host=host, sock=sock) as url,
                    httpx.AsyncClient(timeout=client_timeout_s, transport=transport) as client,
                ):
                    yield DoorStack(
                        url,
                        client,
                        service,
                        chief,
                        emulator,
                        emulator_url,
                        folder,
                        uds or "",
                    )
        finally:
            if sender is not None:
                await sender.aclose()


@asynccontextmanager
async def _maybe_chief(folder: Path, owner: str | None) -> AsyncIterator[Chief | None]:
    if owner is None:
        yield None
        return
    async with Chief.open(ChiefConfig(db_path=folder / "chief.db", owner=owner)) as chief:
        yield chief
