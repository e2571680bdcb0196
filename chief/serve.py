"""`chief serve`: the notify door (chief.door) and the phone (chief.phone) wired into one service.

The door is served by FastAPI on uvicorn, on its Unix socket `COOP_DOOR_SOCKET`, bound 0600
in the private data folder by `plumbing.unix` (`/metrics` alone, keyless, on
127.0.0.1:`CHIEF_METRICS_PORT` for Prometheus, `chief.door.metrics`); the phone's tasks run in
its lifespan.

Start: read the Chief's and the door's settings (a wrong value, or a retired one such as
`CHIEF_PORT`, stops here, naming it), take the single-instance lock on `<chief.db>.serve.lock`
(a second door on the same chief.db refuses), bind the socket (a stale one is replaced, a live
one refused), then serve; on the way out the socket file is removed. The lifespan opens the
Telegram sender (one `Bot` kept open), the Chief, the sender task that drains the Telegram queue
(`chief.phone.ringer`, resuming what a restart left) and the ask task that performs the edits
settles owe (`chief.phone.asks`, the same); with no `CHIEF_OWNER` the door still starts and
answers 503 `owner_unconfigured`. With Telegram configured and an obeyed user known
(`DoorConfig.telegram_user_id`, in a numeric chat), it also starts the phone
(`chief.phone.updater`): the long poll for the owner's taps, replies and commands, with its own
connection to chief.db (updates handled, the /quiet override the sender obeys) and a link to the
ledger service (`chief.phone.engine_link`); a stop cancels its poll at once. The owner's taps and
replies are the door's answers (`chief.phone.answers`): recorded in chief.db, then forwarded to
the ledger by their own task, which resumes at the start what a restart left pending. SIGTERM
(any number of them) lets requests in flight finish (bounded), lets the sender finish and mark a
send in flight (bounded by TELEGRAM_TIMEOUT_S: a send still unanswered then stays in flight in
chief.db, and the next start repeats it once, marked), closes the Chief and the Bot, and exits
0.
Exit statuses: 0 after a clean stop, 1 when it could not start (lock held, port taken, chief.db
unusable), 2 for a wrong setting.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from fastapi import FastAPI

from chief.config import ChiefConfig
from chief.door.ack_route import make_ack_router
from chief.door.config import DoorConfig
from chief.door.metrics import DoorMetrics, instrument_door, metered
from chief.door.posture import posture_source
from chief.door.report_route import make_report_router
from chief.door.router import make_router
from chief.door.verbs import DoorVerbs
from chief.errors import ChiefConfigError, ChiefError
from chief.phone.answers import Answers
from chief.phone.asks import Asks
from chief.phone.commands import Commands
from chief.phone.commands_text import QuietOverride
from chief.phone.engine_link import EngineLink
from chief.phone.jobqueue import DueRings, Nagger
from chief.phone.loop import Loop, running_task
from chief.phone.reminders import Reminders
from chief.phone.ringer import Ringer
from chief.phone.second import SecondPerson
from chief.phone.updater import PhoneLoop, UpdateHandlers
from chief.phone.urgent import Urgent
from chief.telegram.inbound import BotPhone
from chief.telegram.pairing import read_pairing, write_pairing
from chief.telegram.sender import BotSender, build_sender
from plumbing.terminal import shown

if TYPE_CHECKING:
    from chief.conversation import Chief
    from chief.fallback.task import Fallback
    from chief.fallback_rules import FallbackSettings
    from chief.store import ChiefStore

log = structlog.get_logger("chief.door")

# After a stop, a send in flight gets the Telegram deadline plus this to finish and be marked.
STOP_MARGIN_S = 1.0


@dataclass
class PhoneParts:
    """What the phone's helpers are built from, once the phone runs: the Telegram seam, the
    ledger service's link, chief.db (the phone's own connection), the Chief, the sender and the
    asks."""

    phone: BotPhone
    engine: EngineLink
    store: ChiefStore
    chief: Chief
    ringer: Ringer
    asks: Asks
    #: the urgent reports (issue 28): "Got it" and replies acknowledge them
    urgent: Urgent | None = None


def create_app(
    door_config: DoorConfig,
    chief_config: ChiefConfig,
    *,
    wall_clock: Callable[[], datetime] | None = None,
    handlers: Callable[[PhoneParts], UpdateHandlers] | None = None,
) -> FastAPI:
    """The standalone door app; `app.state.door` is its `DoorVerbs` (`wall_clock`: tests).
    `handlers` (a test's) builds what answers the owner's taps and replies from the phone's
    parts; without it the door's answers (`chief.phone.answers`) take them. /requests asks again
    through the door's asks (`chief.phone.asks`)."""
    metrics = DoorMetrics()
    sender = build_sender(
        door_config.telegram_bot_token,
        door_config.telegram_chat_id,
        base_url=door_config.telegram_api_base,
        timeout_s=door_config.telegram_timeout_s,
    )
    if sender is not None and door_config.telegram_chat_from == "pairing":
        sender.keep_chat = pairing_keeper(door_config)
    service = DoorVerbs(
        chief=None,
        ringer=None,
        posture=posture_source(door_config.posture_file),
        wall_clock=wall_clock,
    )
    parts = _DoorParts(door_config, chief_config, service, sender, metrics, wall_clock, handlers)
    app = FastAPI(
        title="Coop notify door",
        version="1",
        lifespan=parts.lifespan,
        openapi_url=None,  # no unguarded route at all; tests read app.openapi() directly
        docs_url=None,
        redoc_url=None,
    )
    app.include_router(make_router(door_config, service))
    app.include_router(make_report_router(door_config, service))  # cron lines (chief report)
    app.include_router(make_ack_router(door_config, service))  # `chief ack N`
    instrument_door(app, service, door_config, metrics)  # GET /metrics, answers counted
    service.telegram_next_step = door_config.telegram_next_step
    app.state.door = service
    app.state.parts = parts  # its `phone` is the PhoneLoop while one runs
    return app


@dataclass
class _DoorParts:
    """What the door's lifespan opens and closes: the Telegram sender (one `Bot` kept open), the
    Chief, the sender task over the Chief's Telegram queue, and the phone; `service` sees the
    Chief and the task while they run."""

    door_config: DoorConfig
    chief_config: ChiefConfig
    service: DoorVerbs
    sender: BotSender | None
    metrics: DoorMetrics
    wall_clock: Callable[[], datetime] | None
    handlers: Callable[[PhoneParts], UpdateHandlers] | None = None
    #: the phone's poller while it runs
    phone: PhoneLoop | None = None
    #: the nag task (reminders, urgent repeats) while it runs
    nags: Nagger | None = None
    #: why the lifespan could not start (the Chief's database unusable), for the one line
    start_failed: str | None = None

    @asynccontextmanager
    async def lifespan(self, _: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            try:
                await self._start(stack)
            except ChiefError as exc:
                # Said once, by `chief serve` as its one line (uvicorn's own words held back).
                self.start_failed = str(exc)
                raise
            posture = self.door_config.posture_file
            log.info(
                "door.started",
                db_path=str(self.chief_config.db_path),
                owner_configured=self.service.chief is not None,
                telegram_configured=self.sender is not None,
                telegram_chat=self.door_config.telegram_chat_id,
                telegram_chat_from=self.door_config.telegram_chat_from,
                posture_file=None if posture is None else str(posture),
                **quiet_hours_fields(self.door_config),
            )
            try:
                yield
            finally:
                self.service.chief = None
                for summary in self.service.refusals.flush():  # what the minute had not said
                    log.warning("door.refused", **summary.fields())
                log.info("door.stopping")

    async def _start(self, stack: AsyncExitStack) -> None:
        """What the lifespan opens before the door is started, on `stack`."""
        if self.sender is not None:
            await self.sender.start()
            stack.push_async_callback(self.sender.aclose)
        say_telegram_setup(self.door_config)
        if self.chief_config.owner is None:
            log.warning("door.owner_unconfigured", hint="set CHIEF_OWNER and restart")
        else:
            await self._open_chief(stack)

    async def _open_chief(self, stack: AsyncExitStack) -> None:
        """Open the Chief on `stack` and, with Telegram configured, start its sender task."""
        from chief.conversation import Chief  # the store and its drivers load at start only

        chief = await stack.enter_async_context(Chief.open(self.chief_config))
        self.service.chief = chief
        if self.sender is not None:
            from chief.store import ChiefStore

            # The phone's own connection: updates handled and the /quiet override (which the sender
            # obeys from the start, the phone or not).
            inbox = await stack.enter_async_context(ChiefStore.open(self.chief_config.db_path))
            quiet = QuietOverride((await inbox.inbox_state()).quiet_until)
            ringer = build_ringer(
                chief,
                self.sender,
                self.door_config,
                metrics=self.metrics,
                wall_clock=self.wall_clock,
                quiet=quiet,
            )
            await stack.enter_async_context(running(ringer, self.door_config))
            self.service.ringer = ringer
            asks = build_asks(chief, self.sender, ringer, wall_clock=self.wall_clock)
            await stack.enter_async_context(running(asks, self.door_config))
            self.service.asks = asks
            urgent = build_urgent(chief, self.door_config, asks, self.metrics)
            ringer.urgent_rung = urgent.rung
            self.service.urgent = urgent
            nags, reminders = build_nags(chief, ringer, wall_clock=self.wall_clock, urgent=urgent)
            await stack.enter_async_context(running(nags, self.door_config))
            self.nags = nags
            self.service.reminders = reminders
            urgent.nudge_nags = nags.nudge
            if self.door_config.fallback is not None:
                fallback = build_fallback(chief, self.door_config.fallback, ringer, self.metrics)
                await stack.enter_async_context(running(fallback, self.door_config))
                self.service.fallback = fallback
            await self._start_phone(stack, chief, ringer, inbox, asks)
        elif self.door_config.fallback is not None:
            log.warning(
                "door.fallback_idle",
                reason="the fallback channel stands in for Telegram, and Telegram is not "
                "configured: it sends nothing",
            )

    async def _start_phone(
        self, stack: AsyncExitStack, chief: Chief, ringer: Ringer, inbox: ChiefStore, asks: Asks
    ) -> None:
        """Start the phone when there is someone to obey (see the module docstring)."""
        config = self.door_config
        chat = config.telegram_chat_id or ""
        user_id = config.telegram_user_id
        if user_id is None or not chat.lstrip("-").isdigit() or config.telegram_bot_token is None:
            log.info("door.phone_off", reason="no obeyed user in a numeric chat")
            return
        phone = BotPhone(
            config.telegram_bot_token,
            base_url=config.telegram_api_base,
            timeout_s=config.telegram_timeout_s,
        )
        stack.push_async_callback(phone.aclose)
        link = EngineLink(config.service_socket, config.service_key)
        engine = await stack.enter_async_context(link.open())
        urgent = self.service.urgent
        parts = PhoneParts(phone, engine, inbox, chief, ringer, asks, urgent)
        commands = Commands(
            phone,
            engine=engine,
            store=inbox,
            quiet=ringer.quiet,
            telegram_queue=self._telegram_queue,
            asks=asks,
            # The nag task's nudge: reminders held by /quiet may ring now.
            quiet_changed=self.nags.nudge if self.nags is not None else lambda: None,
            urgent_lines=status_lines(urgent, self.service.fallback),
            quiet_hours=ringer.quiet_hours,
        )
        if self.handlers is not None:
            handlers = self.handlers(parts)
        else:
            handlers = await stack.enter_async_context(answering(parts))
        second = config.telegram_second
        poller = PhoneLoop(
            phone,
            inbox,
            chat_id=int(chat),
            user_id=user_id,
            commands=commands,
            handlers=handlers,
            on_stranger=self.metrics.count_stranger,
            on_member_again=ringer.owner_back,
            second=None if second is None else (second.user_id, second.chat_id),
            second_handlers=None if urgent is None else SecondPerson(urgent, phone),
        )
        await stack.enter_async_context(running(poller, config))
        self.phone = poller
        self.service.poll_conflict = lambda: poller.conflict

    async def _telegram_queue(self) -> dict[str, Any]:
        queue: dict[str, Any] = (await self.service.status())["telegram_queue"]
        return queue


def pairing_keeper(config: DoorConfig) -> Callable[[int], None]:
    """Where the door keeps the chat Telegram moved its group to, when the chat is the
    pairing's: the pairing file, rewritten with the new chat (its user and the rest kept) while
    it still names the chat the door started with; ChiefConfigError says what to do else."""
    path, started = config.pairing_file, config.telegram_pairing

    def keep(chat_id: int) -> None:
        current = read_pairing(path)
        if started is None or current is None or current.chat_id != started.chat_id:
            raise ChiefConfigError(
                f"the Telegram pairing file {path} no longer names chat {config.telegram_chat_id}"
                f": set TELEGRAM_CHAT_ID={chat_id} or pair again"
            )
        try:
            write_pairing(path, replace(current, chat_id=chat_id))
        except OSError as exc:
            raise ChiefConfigError(
                f"the Telegram pairing file {path} could not be rewritten ({exc.strerror}): "
                f"set TELEGRAM_CHAT_ID={chat_id} or pair again"
            ) from exc

    return keep


def quiet_hours_fields(config: DoorConfig) -> dict[str, Any]:
    """`door.started`'s quiet hours: the window, its zone, whether it holds now; `off`."""
    hours = config.telegram_quiet_hours
    if hours is None or not config.telegram_configured:
        return {"quiet_hours": "off"}
    return {
        "quiet_hours": hours.window,
        "quiet_hours_zone": hours.zone_name,
        "quiet_hours_in_force": hours.in_force(time.time()),
    }


def say_telegram_setup(config: DoorConfig) -> None:
    """Log, once at start, what the owner must know of the Telegram setup: a token without a
    chat (pair next), TELEGRAM_CHAT_ID overriding a pairing, nobody to obey."""
    if config.telegram_next_step is not None:
        log.warning("door.telegram_unpaired", hint=config.telegram_next_step)
        return
    if not config.telegram_configured:
        return
    pairing = config.telegram_pairing
    if config.telegram_chat_overrides_pairing and pairing is not None:
        log.info(
            "door.telegram_chat_overrides_pairing",
            chat_id=config.telegram_chat_id,
            paired_chat_id=pairing.chat_id,
            hint="TELEGRAM_CHAT_ID wins while it is set",
        )
    if config.telegram_user_id is None:
        log.warning(
            "door.telegram_inbound_off",
            chat_id=config.telegram_chat_id,
            reason="TELEGRAM_CHAT_ID is not a private chat and not the paired chat: no one is "
            "obeyed from Telegram",
        )


def build_ringer(
    chief: Chief,
    sender: BotSender,
    config: DoorConfig,
    *,
    metrics: DoorMetrics | None = None,
    wall_clock: Callable[[], datetime] | None = None,
    quiet: QuietOverride | None = None,
) -> Ringer:
    """The door's Telegram sender task over the queue in `chief`'s store (not started)."""
    options: dict[str, Any] = {} if wall_clock is None else {"wall_clock": wall_clock}
    return Ringer(
        chief.store,
        sender if metrics is None else metered(sender, metrics),
        chat_id=sender.chat_id,
        quiet_hours=config.telegram_quiet_hours,
        quiet=quiet,
        slow_after_s=config.telegram_timeout_s,
        **options,
    )


def build_asks(
    chief: Chief,
    sender: BotSender,
    ringer: Ringer,
    *,
    wall_clock: Callable[[], datetime] | None = None,
) -> Asks:
    """The door's ask task over `chief`'s store (not started): the settles' edits, `reask`."""
    options: dict[str, Any] = {} if wall_clock is None else {"wall_clock": wall_clock}
    return Asks(chief.store, sender, ringer, **options)


def build_urgent(chief: Chief, config: DoorConfig, asks: Asks, metrics: DoorMetrics) -> Urgent:
    """The door's urgent reports over `chief`'s store: the nag task's urgent source, and what
    acknowledges them."""
    if config.urgent.test_short:
        log.warning(
            "door.urgent_test_bounds",
            rering_s=config.urgent.rering_s,
            escalate_s=config.urgent.escalate_s,
            note="test only",
        )
    second = config.telegram_second
    return Urgent(
        chief.store,
        chief,
        config.urgent,
        edits_queued=asks.nudge,
        count=metrics.count_urgent,
        second_chat=None if second is None else str(second.chat_id),
        escalated=metrics.count_escalation,
    )


def build_fallback(
    chief: Chief, settings: FallbackSettings, ringer: Ringer, metrics: DoorMetrics
) -> Fallback:
    """The door's fallback task over `chief`'s store (not started): it watches `ringer`."""
    from chief.fallback.channel import AppriseChannel  # Apprise loads only when configured
    from chief.fallback.task import Fallback
    from chief.fallback_rules import carries_password

    if settings.test_short:
        log.warning("door.fallback_test_bounds", after_s=settings.after_s, note="test only")
    if settings.urls_from == "CHIEF_FALLBACK_URLS" and any(map(carries_password, settings.urls)):
        log.warning(
            "door.fallback_password_in_environment",
            hint="a fallback URL carries a password: put the URLs in a 0600 file and name it "
            "in CHIEF_FALLBACK_URLS_FILE instead",
        )
    log.info(
        "door.fallback_configured",
        urls=len(settings.urls),
        urls_from=settings.urls_from,
        after_s=settings.after_s,
        max_per_hour=settings.max_per_hour,
    )
    return Fallback(
        chief.store,
        AppriseChannel(settings.urls),
        settings,
        telegram_failing(ringer),
        telegram_queued=ringer.nudge,
        count=metrics.count_fallback,
        escalated=metrics.count_escalation,
    )


def status_lines(
    urgent: Urgent | None, fallback: Fallback | None
) -> Callable[[], Awaitable[list[str]]] | None:
    """/status's lines after the counts: the urgent reports', then the fallback channel's."""
    parts = [part for part in (urgent, fallback) if part is not None]
    if not parts:
        return None

    async def lines() -> list[str]:
        return [line for part in parts for line in await part.phone_lines()]

    return lines


def telegram_failing(ringer: Ringer) -> Callable[[], str | None]:
    """Why Telegram cannot deliver now, in words, as the sender knows it (None: it delivers):
    its last failed send (a refusal, an unreachable Telegram, a send in doubt) or its failed
    getMe, else a send that has waited past the Telegram deadline for its answer."""

    def why() -> str | None:
        if ringer.last_error is not None:
            return ringer.last_error
        waited_s = ringer.sending_s()
        if waited_s is not None and waited_s > ringer.slow_after_s:
            return f"a send has waited {waited_s:.0f} s for Telegram's answer"
        return None

    return why


def build_nags(
    chief: Chief,
    ringer: Ringer,
    *,
    wall_clock: Callable[[], datetime] | None = None,
    urgent: Urgent | None = None,
) -> tuple[Nagger, Reminders]:
    """The door's nag task over `chief`'s store (not started): each kind of ring that comes
    back at a due time is one source; a ring queued nudges the sender. An ask rung nudges it
    (its reminders are scheduled with its sent mark), and so does the owner's /quiet."""
    reminders = Reminders(chief.store, quiet_hours=ringer.quiet_hours, quiet=ringer.quiet)
    sources: list[DueRings] = [reminders]
    if urgent is not None:
        sources.append(urgent)
    if wall_clock is None:
        nags = Nagger(sources, ringer.nudge)
    else:
        clock = wall_clock
        nags = Nagger(sources, ringer.nudge, clock=lambda: clock().timestamp())
    ringer.ask_rung = nags.nudge
    return nags, reminders


@asynccontextmanager
async def answering(parts: PhoneParts) -> AsyncIterator[Answers]:
    """The owner's answers (`chief.phone.answers`) on the phone's connection to chief.db, their
    forwarder task running for the block (a pending answer left by the last run goes first);
    on exit it is cancelled: an answer in flight stays pending, and the next start sends it
    again under the same key."""
    from chief.store.answers import asks_button, asks_request

    answers = Answers(
        parts.store,
        parts.phone,
        parts.engine,
        asks_button,
        asks_request,
        edits_queued=parts.asks.nudge,
        urgent=parts.urgent,
    )
    async with anyio.create_task_group() as tasks:
        await tasks.start(answers.run)
        try:
            yield answers
        finally:
            tasks.cancel_scope.cancel()


def running(task: Loop, config: DoorConfig) -> AbstractAsyncContextManager[Loop]:
    """Run one of the door's tasks (the sender, the ask task, the phone) for the block; on exit
    let its turn in flight finish (a send and its mark, an edit, an update being handled; a
    poll is cancelled at once), bounded by the Telegram deadline, then stop it."""
    return running_task(task, config.telegram_timeout_s + STOP_MARGIN_S)


def serve_bound(
    door_config: DoorConfig, chief_config: ChiefConfig, sockets: list[socket.socket]
) -> int:
    """Serve the door on the sockets `chief.serve_cli` bound under the serve lock (the Unix
    socket, then `/metrics`' when there is one) until stopped. A Chief it cannot open is one line
    (`plumbing.listening`'s shape), before any line saying it started."""
    from chief.door.metrics import metrics_app
    from chief.loopback_http import Listener, run_servers

    app = create_app(door_config, chief_config)
    listeners = [Listener(app, "door.listening", sockets=sockets[:1])]
    if door_config.metrics_port is not None:
        scrape = metrics_app(door_config, app.state.door, app.state.metrics)
        listeners.append(
            Listener(scrape, "door.metrics_listening", sockets=sockets[1:], lifespan="off")
        )
    if not run_servers(listeners):
        failed = app.state.parts.start_failed
        said = failed or "the door did not start; see the log above"
        print(shown(f"chief serve: {said}"), file=sys.stderr)
        return 1
    log.info("door.stopped")
    return 0
