"""The settings of `chief serve` (the door's, and who the phone rings and obeys), read once at
start from the environment into a frozen `DoorConfig`.

    COOP_DOOR_SOCKET       <COOP_HOME>/door.sock   the Unix socket `chief serve` serves the
                                           door on (`plumbing.door`); its folder must be the
                                           door's user's and private to writes
    CHIEF_METRICS_PORT     8765            the loopback TCP port of `/metrics` alone (read-only,
                                           keyless, for Prometheus): 0 any free port (logged at
                                           start), off none
    COOP_SERVICE_KEY_FILE  <COOP_HOME>/service.key   the shared service key, mode 0600
    CHIEF_ALLOWED_PEERS    127.0.0.1,::1   TCP peer addresses the guard lets in (`/metrics`, and
                                           the door's routes in a host application on TCP)
    CHIEF_POSTURE_FILE     unset: always `normal`    JSON {"state": "normal|blocked|locked"}
    TELEGRAM_BOT_TOKEN     unset: Telegram not configured
    TELEGRAM_CHAT_ID       unset: the pairing's chat   the owner's chat (numeric id or @name);
                                           set, it wins over the pairing
    TELEGRAM_API_BASE      https://api.telegram.org/bot   the emulator's: http://127.0.0.1:P/bot
    TELEGRAM_TIMEOUT_S     10              the Telegram deadline: getMe and a send's connect and
                                           write; past it a send still answered is only slow,
                                           awaited up to 6 x this (sender.LATE_REPLY_FACTOR);
                                           at most COOP_CLIENT_TIMEOUT_S - 2 s - 1 s (12 s)
    COOP_CLIENT_TIMEOUT_S  15              the engine's client timeout, read only for that check
    TELEGRAM_QUIET_HOURS   unset: off      e.g. 22:00-07:00: messages go out silently inside it
    TELEGRAM_QUIET_TZ      local time      the owner's IANA time zone for the window (Europe/Rome)
    CHIEF_NOTIFY_BATCH_MAX 64              rows one notify-batch request may carry (1..256);
                                           a larger batch is refused 422
    CHIEF_NOTIFY_BODY_MAX_BYTES  unset         the most bytes the door reads of one notify or
                                           batch body (1024..16 MiB); a larger one is refused
                                           413. Unset: 1 MiB a notify, 64 kB a row a batch
    COOP_SERVICE_SOCKET    <COOP_HOME>/service.sock   the ledger service's (`coop serve`) Unix
                                           socket the phone's commands ask, with the service
                                           key, once it is proved private (EngineLink); the
                                           TCP era's COOP_SERVICE_URL is refused in one line
    CHIEF_URGENT_RERING_S  60              seconds between an urgent report's rings (>= 30)
    CHIEF_URGENT_EXPIRE_S  3600            when it stops ringing unacknowledged (<= 3 h)
    CHIEF_ESCALATE_AFTER_S 600             when an unacknowledged urgent report rings the second
                                           person too (rung 2 of its ladder; >= 60)
    CHIEF_TEST_URGENT_SHORT unset          TEST ONLY: 1 allows shorter ones (chief.urgent_rules)
    CHIEF_FALLBACK_URLS    unset: none     Apprise URLs of the fallback channel (rung 3), or
    CHIEF_FALLBACK_URLS_FILE               a 0600 file of them; CHIEF_FALLBACK_AFTER_S (300)
    CHIEF_FALLBACK_MAX_PER_HOUR            and CHIEF_FALLBACK_MAX_PER_HOUR (12): see
                                           chief.fallback_rules

Who the door rings and obeys. `chief telegram pair` writes `<COOP_HOME>/telegram-pairing.json`
(`chief.telegram.pairing`): the owner's private chat and user. Without `TELEGRAM_CHAT_ID` the
pairing gives both. With it, `TELEGRAM_CHAT_ID` wins for the chat (the door logs that it
overrides a pairing), and the obeyed user is the pairing's user when the pairing's chat is that
chat, else the chat id itself when it is a positive integer (a private chat's id is its user's
id), else nobody (inbound off, said once in the log). `TELEGRAM_BOT_TOKEN` with neither: the door
starts, says `chief telegram pair` is the next step, and rings nothing. `TELEGRAM_CHAT_ID`
without a token is a wrong setting. The pairing file is read only when a token is set; a broken
one stops the door, naming it.

The second person (issue 35). `chief telegram pair --second` writes
`<COOP_HOME>/telegram-pairing-second.json` the same way: one more private chat and user, rung at
rung 2 of an urgent report's ladder, obeyed for "Got it", a reply to an urgent ring, /help and
/status only. It is read only when a token is set and an owner is obeyed; one that names the
owner's chat or user stops the door, naming it (it would ring the owner twice).

`COOP_HOME` defaults to `$XDG_DATA_HOME/coop` (or `~/.local/share/coop`). A wrong value raises
`DoorError` naming the setting, and `chief serve` stops before it binds anything; so does a
retired setting that named a TCP door (`CHIEF_PORT`, `CHIEF_HOST`, `COOP_DOOR_URL`: one line
saying what to set instead). The key is read
once here: the guard compares callers with its SHA-256 digest, and the door keeps the key itself
only to present it to the ledger service (`chief.phone.engine_link`), the reverse way; rotating
the key means restarting the door.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import os
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from urllib.parse import urlsplit

from chief.errors import ChiefConfigError, DoorError
from chief.fallback import settings as fallback_settings
from chief.fallback_rules import FallbackSettings
from chief.phone.pacing import QuietHours
from chief.telegram.pairing import (
    PAIRING_FILE_NAME,
    SECOND_PAIRING_FILE_NAME,
    Pairing,
    read_pairing,
)
from chief.urgent_rules import UrgentBounds, bounds_from_env
from plumbing import door as door_address
from plumbing import files, home, service, settings
from plumbing.keyfile import read_key, service_key_file
from plumbing.loopback import LOOPBACK_PEERS
from plumbing.wire import CLIENT_TIMEOUT_S

# The default peers are `plumbing.loopback.LOOPBACK_PEERS`; the key file and its rule are
# `plumbing.keyfile`'s, the door's socket `plumbing.door`'s, the engine's client timeout
# `plumbing.wire`'s: each written once.
METRICS_HOST = "127.0.0.1"
DEFAULT_METRICS_PORT = 8765
DEFAULT_ALLOWED_PEERS = tuple(sorted(LOOPBACK_PEERS))
DEFAULT_TELEGRAM_API_BASE = "https://api.telegram.org/bot"
# The engine's client gives up after COOP_CLIENT_TIMEOUT_S (15 s unless set; the door reads the
# same setting) and the report wait takes up to REPORT_WAIT_S of that: a Telegram call must end,
# with a margin, before the engine gives up, or the engine retries a send still in flight.
DEFAULT_TELEGRAM_TIMEOUT_S = 10.0
DEFAULT_ENGINE_CLIENT_TIMEOUT_S = CLIENT_TIMEOUT_S
# How long a notify waits for its line to land in the Chief (the rest lands when it is free).
REPORT_WAIT_S = 2.0
# What the door keeps between its last possible answer and the engine's timeout.
ANSWER_MARGIN_S = 1.0
# Rows per notify-batch request: the default, and the most the setting allows (a batch's body
# is buffered whole, up to ~64 kB a row, and a batch is one chief.db transaction).
DEFAULT_NOTIFY_BATCH_MAX = 64
NOTIFY_BATCH_MAX_LIMIT = 256
# The body limit an operator may set (a proxy's in front of the door, say): at least a short
# row's body, at most what the largest batch may take by default (256 rows of 64 kB).
MIN_NOTIFY_BODY_BYTES = 1024
MAX_NOTIFY_BODY_BYTES = 16 * 1024 * 1024


def data_home(env: Mapping[str, str]) -> Path:
    """The data folder, by the floor's one rule (`plumbing.home.data_folder`)."""
    return Path(home.data_folder(env))


@dataclass(frozen=True)
class DoorConfig:
    """The notify door's settings (see the module docstring for each one and its default)."""

    #: `COOP_DOOR_SOCKET`: the Unix socket `chief serve` serves the door on.
    socket_path: Path
    #: `CHIEF_METRICS_PORT`: the loopback port of `/metrics` (0 picks a free one and logs it;
    #: None: no TCP listener at all).
    metrics_port: int | None
    #: `COOP_SERVICE_KEY_FILE`: where the service key was read from.
    service_key_file: Path
    #: SHA-256 of the service key, what the guard compares callers' keys with.
    service_key_digest: bytes = field(repr=False)
    #: `CHIEF_ALLOWED_PEERS`: peer addresses the guard lets in.
    allowed_peers: frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address]
    #: `CHIEF_POSTURE_FILE`: the posture source; None means the posture is always `normal`.
    posture_file: Path | None
    #: `TELEGRAM_BOT_TOKEN`: the bot's token, None when Telegram is not configured.
    telegram_bot_token: str | None = field(repr=False)
    #: `TELEGRAM_CHAT_ID`, else the pairing's chat: the owner's chat (None: nothing rings).
    telegram_chat_id: str | None
    #: `TELEGRAM_API_BASE`: the Bot API base URL the token is appended to.
    telegram_api_base: str
    #: `TELEGRAM_TIMEOUT_S`: the Telegram deadline (a sendMessage that went out is awaited
    #: up to `LATE_REPLY_FACTOR` times it).
    telegram_timeout_s: float
    #: `<COOP_HOME>/telegram-pairing.json`: the pairing `chief telegram pair` writes.
    pairing_file: Path
    #: Who is obeyed from Telegram (the rules in the module docstring); None: inbound off.
    telegram_user_id: int | None = None
    #: The pairing read at start (None: none, or no token to read it for).
    telegram_pairing: Pairing | None = None
    #: Why the door rings `telegram_chat_id`: "TELEGRAM_CHAT_ID" or "pairing" (None: no chat).
    telegram_chat_from: str | None = None
    #: `TELEGRAM_QUIET_HOURS` in `TELEGRAM_QUIET_TZ`: when messages go out silently (None: off).
    telegram_quiet_hours: QuietHours | None = None
    #: `CHIEF_NOTIFY_BATCH_MAX`: the most rows one notify-batch request may carry.
    notify_batch_max: int = DEFAULT_NOTIFY_BATCH_MAX
    #: `CHIEF_NOTIFY_BODY_MAX_BYTES`: the most bytes read of one notify body (None: the route's
    #: own limit).
    notify_body_max_bytes: int | None = None
    #: `COOP_SERVICE_SOCKET`: the ledger service's (`coop serve`) Unix socket, which the
    #: phone's commands ask (`from_env` derives `<COOP_HOME>/service.sock` when unset).
    service_socket: str = ""
    #: the service key itself, presented to the ledger service (never logged, never shown).
    service_key: str = field(default="", repr=False)
    #: `CHIEF_URGENT_RERING_S`, `CHIEF_URGENT_EXPIRE_S` (and the test-only
    #: `CHIEF_TEST_URGENT_SHORT`): how often an urgent report rings again, and for how long.
    urgent: UrgentBounds = field(default_factory=UrgentBounds)
    #: `<COOP_HOME>/telegram-pairing-second.json`: the second person (None: nobody paired)
    telegram_second: Pairing | None = None
    #: `CHIEF_FALLBACK_URLS` (or `_FILE`), `CHIEF_FALLBACK_AFTER_S`, `CHIEF_FALLBACK_MAX_PER_HOUR`:
    #: the fallback channel (None: none configured).
    fallback: FallbackSettings | None = None

    @property
    def telegram_configured(self) -> bool:
        return self.telegram_bot_token is not None and self.telegram_chat_id is not None

    @property
    def telegram_next_step(self) -> str | None:
        """What to do before Telegram rings, when a token is set and no chat is (else None)."""
        if self.telegram_bot_token is None or self.telegram_chat_id is not None:
            return None
        return (
            "not paired: TELEGRAM_BOT_TOKEN is set but no chat is; stop the door, run "
            "`chief telegram pair`, then start the door"
        )

    @property
    def telegram_chat_overrides_pairing(self) -> bool:
        """TELEGRAM_CHAT_ID names another chat than the pairing's (it wins)."""
        pairing = self.telegram_pairing
        return pairing is not None and self.telegram_chat_id != str(pairing.chat_id)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DoorConfig:
        """Read and check every setting; raise `DoorError` naming the first wrong one."""
        env = os.environ if environ is None else environ
        retired = door_address.retired_setting(env)
        if retired is not None:
            raise DoorError(retired)
        key_file = Path(service_key_file(env))
        token = env.get("TELEGRAM_BOT_TOKEN", "").strip() or None
        chat_id = env.get("TELEGRAM_CHAT_ID", "").strip() or None
        if token is None and chat_id is not None:
            raise DoorError(
                "TELEGRAM_CHAT_ID is set but TELEGRAM_BOT_TOKEN is not; set the bot's token "
                "too, or unset both"
            )
        pairing_path = pairing_file(env)
        pairing = _pairing(pairing_path) if token is not None else None
        chat_id, user_id = obeyed(chat_id, pairing)
        second = _second(env, chat_id, user_id) if token is not None else None
        posture = env.get("CHIEF_POSTURE_FILE", "").strip()
        key = read_service_key(key_file)
        urgent = bounds_from_env(env)
        return cls(
            socket_path=Path(door_address.socket_path(env)),
            metrics_port=_metrics_port(env.get("CHIEF_METRICS_PORT", "")),
            service_key_file=key_file,
            service_key_digest=hashlib.sha256(key.encode("utf-8")).digest(),
            allowed_peers=_peers(env.get("CHIEF_ALLOWED_PEERS", ",".join(DEFAULT_ALLOWED_PEERS))),
            posture_file=Path(posture).expanduser() if posture else None,
            telegram_bot_token=token,
            telegram_chat_id=chat_id,
            telegram_api_base=_api_base(env.get("TELEGRAM_API_BASE", DEFAULT_TELEGRAM_API_BASE)),
            telegram_timeout_s=_timeout(
                env.get("TELEGRAM_TIMEOUT_S", str(DEFAULT_TELEGRAM_TIMEOUT_S)),
                env.get("COOP_CLIENT_TIMEOUT_S", str(DEFAULT_ENGINE_CLIENT_TIMEOUT_S)),
            ),
            pairing_file=pairing_path,
            telegram_user_id=user_id,
            telegram_pairing=pairing,
            telegram_chat_from=chat_source(env, chat_id),
            telegram_quiet_hours=_quiet_hours(
                env.get("TELEGRAM_QUIET_HOURS", ""), env.get("TELEGRAM_QUIET_TZ", "")
            ),
            notify_batch_max=_batch_max(
                env.get("CHIEF_NOTIFY_BATCH_MAX", str(DEFAULT_NOTIFY_BATCH_MAX))
            ),
            notify_body_max_bytes=_body_max(env.get("CHIEF_NOTIFY_BODY_MAX_BYTES", "")),
            service_socket=_service_socket(env),
            service_key=key,
            urgent=urgent,
            telegram_second=second,
            fallback=fallback_settings.from_env(env, test_short=urgent.test_short),
        )


@dataclass(frozen=True)
class PairSettings:
    """What `chief telegram pair` reads: the bot's token, the Bot API, the Telegram deadline,
    where the pairing goes, and `TELEGRAM_CHAT_ID` (which wins over a pairing while set)."""

    token: str = field(repr=False)
    api_base: str
    timeout_s: float
    pairing_file: Path
    chat_setting: str | None

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, *, second: bool = False
    ) -> PairSettings:
        """Read and check them; DoorError naming the first wrong one (no token included).
        `second`: the second person's pairing file."""
        env = os.environ if environ is None else environ
        token = env.get("TELEGRAM_BOT_TOKEN", "").strip()
        if not token:
            raise DoorError(
                "TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather in Telegram, "
                "export its token as TELEGRAM_BOT_TOKEN, then run `chief telegram pair` again"
            )
        return cls(
            token=token,
            api_base=_api_base(env.get("TELEGRAM_API_BASE", DEFAULT_TELEGRAM_API_BASE)),
            timeout_s=_timeout(
                env.get("TELEGRAM_TIMEOUT_S", str(DEFAULT_TELEGRAM_TIMEOUT_S)),
                env.get("COOP_CLIENT_TIMEOUT_S", str(DEFAULT_ENGINE_CLIENT_TIMEOUT_S)),
            ),
            pairing_file=pairing_file(env, second=second),
            chat_setting=None if second else env.get("TELEGRAM_CHAT_ID", "").strip() or None,
        )


def pairing_file(env: Mapping[str, str], *, second: bool = False) -> Path:
    """Where `chief telegram pair` writes the pairing: `<COOP_HOME>/telegram-pairing.json`, or
    the second person's (`--second`): `<COOP_HOME>/telegram-pairing-second.json`."""
    return data_home(env) / (SECOND_PAIRING_FILE_NAME if second else PAIRING_FILE_NAME)


def _second(env: Mapping[str, str], chat_id: str | None, user_id: int | None) -> Pairing | None:
    """The second person's pairing, when one is paired and an owner is obeyed (else nobody
    could acknowledge beside them); `DoorError` when it is broken or names the owner."""
    path = pairing_file(env, second=True)
    second = _pairing(path)
    if second is None or user_id is None:
        return None
    if str(second.chat_id) == chat_id or second.user_id == user_id:
        raise DoorError(
            f"the second person's pairing {path} names the owner's chat or user; pair another "
            "person with `chief telegram pair --second`, or remove it with "
            "`chief telegram unpair --second`"
        )
    return second


def chat_source(env: Mapping[str, str], chat_id: str | None) -> str | None:
    """Where the door's chat `chat_id` came from: the setting wins over the pairing."""
    if chat_id is None:
        return None
    return "TELEGRAM_CHAT_ID" if env.get("TELEGRAM_CHAT_ID", "").strip() else "pairing"


def obeyed(chat_setting: str | None, pairing: Pairing | None) -> tuple[str | None, int | None]:
    """The chat the door rings and the user it obeys, from `TELEGRAM_CHAT_ID` and the pairing
    (the rules in the module docstring)."""
    if chat_setting is None:
        if pairing is None:
            return None, None
        return str(pairing.chat_id), pairing.user_id
    if pairing is not None and str(pairing.chat_id) == chat_setting:
        return chat_setting, pairing.user_id
    user_id = settings.whole_number(chat_setting)  # ASCII digits: a private chat is its user
    if user_id is not None and user_id > 0:
        return chat_setting, user_id
    return chat_setting, None


def _pairing(path: Path) -> Pairing | None:
    try:
        return read_pairing(path)
    except ChiefConfigError as exc:
        raise DoorError(str(exc)) from exc


def read_service_key(path: Path) -> str:
    """The key in `path` (`plumbing.keyfile.read_key`: this user's alone, one short line):
    another user's key would let them in, or be theirs. Its refusal worded as a `DoorError`."""
    try:
        return read_key(path, "COOP_SERVICE_KEY_FILE")
    except files.NotPrivate as exc:
        raise DoorError(str(exc)) from exc
    except OSError as exc:
        raise DoorError(f"{exc}; create it with a random key and `chmod 600` it") from exc
    except ValueError as exc:
        raise DoorError(str(exc)) from exc


def _metrics_port(raw: str) -> int | None:
    """`CHIEF_METRICS_PORT`: ASCII digits 0..65535 (blank: the default), or `off`."""
    text = raw.strip()
    if not text:
        return DEFAULT_METRICS_PORT
    if text == "off":
        return None
    read = settings.whole_number(text)
    port = -1 if read is None else read
    if not 0 <= port <= 65535:
        raise DoorError(
            f"CHIEF_METRICS_PORT={raw!r} must be a port number (0..65535, 0 for any) or off"
        )
    return port


def _peers(raw: str) -> frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    peers = set()
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        try:
            peers.add(ipaddress.ip_address(item))
        except ValueError as exc:
            raise DoorError(
                f"CHIEF_ALLOWED_PEERS names {item!r}, which is not an IP address "
                "(a comma-separated list such as 127.0.0.1,::1)"
            ) from exc
    if not peers:
        raise DoorError("CHIEF_ALLOWED_PEERS is empty; leave it unset for 127.0.0.1,::1")
    return frozenset(peers)


def _batch_max(raw: str) -> int:
    value = settings.whole_number(raw) or 0
    if not 1 <= value <= NOTIFY_BATCH_MAX_LIMIT:
        raise DoorError(
            f"CHIEF_NOTIFY_BATCH_MAX={raw!r} must be a whole number of rows in "
            f"1..{NOTIFY_BATCH_MAX_LIMIT} (default {DEFAULT_NOTIFY_BATCH_MAX})"
        )
    return value


def _body_max(raw: str) -> int | None:
    if not raw.strip():
        return None
    value = settings.whole_number(raw) or 0
    if not MIN_NOTIFY_BODY_BYTES <= value <= MAX_NOTIFY_BODY_BYTES:
        raise DoorError(
            f"CHIEF_NOTIFY_BODY_MAX_BYTES={raw!r} must be a whole number of bytes in "
            f"{MIN_NOTIFY_BODY_BYTES}..{MAX_NOTIFY_BODY_BYTES}, or unset"
        )
    return value


def _api_base(raw: str) -> str:
    base = raw.strip()
    try:
        # A port past 65535 is not an error to the client: the socket layer takes it modulo 65536.
        urlsplit(base).port  # noqa: B018 - raises ValueError out of range
    except ValueError:
        base = ""
    if not base.startswith(("http://", "https://")):
        raise DoorError(
            f"TELEGRAM_API_BASE={raw!r} must be an http(s) URL such as "
            f"{DEFAULT_TELEGRAM_API_BASE} or http://127.0.0.1:8081/bot"
        )
    return base


def _service_socket(env: Mapping[str, str]) -> str:
    """`COOP_SERVICE_SOCKET` (an absolute path), else `service.sock` in the data folder
    (`plumbing.service`, as `coop serve` derives it); the TCP era's `COOP_SERVICE_URL` is
    refused, naming what to set instead (the service key must never go to a port whoever
    listens first receives)."""
    if env.get("COOP_SERVICE_URL", "").strip():
        raise DoorError(
            "COOP_SERVICE_URL is no longer read: coop serve listens on a Unix socket; set "
            "COOP_SERVICE_SOCKET (default <COOP_HOME>/service.sock) and remove COOP_SERVICE_URL"
        )
    try:
        return service.socket_path(env)
    except ValueError as exc:
        raise DoorError(str(exc)) from None


def _timeout(raw: str, engine_raw: str) -> float:
    read = settings.decimal(engine_raw)
    engine_s = -1.0 if read is None else read
    if not 0 < engine_s < math.inf:  # false for nan; infinity would lift the bound below
        raise DoorError(
            f"COOP_CLIENT_TIMEOUT_S={engine_raw!r} must be a positive number of seconds (the "
            "door checks TELEGRAM_TIMEOUT_S against it)"
        )
    limit_s = engine_s - REPORT_WAIT_S - ANSWER_MARGIN_S
    read = settings.decimal(raw)
    value = -1.0 if read is None else read
    if not 0 < value <= limit_s:
        raise DoorError(
            f"TELEGRAM_TIMEOUT_S={raw!r} must be a number of seconds in (0, {limit_s:g}]: the "
            f"door must answer before the engine's client gives up (COOP_CLIENT_TIMEOUT_S="
            f"{engine_s:g} s, less {REPORT_WAIT_S:g} s of report wait and {ANSWER_MARGIN_S:g} s "
            "of margin)"
        )
    return value


def _quiet_hours(raw: str, zone_raw: str) -> QuietHours | None:
    zone: tzinfo | None = None
    if zone_raw.strip():
        try:
            zone = zoneinfo.ZoneInfo(zone_raw.strip())
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise DoorError(
                f"TELEGRAM_QUIET_TZ={zone_raw!r} is not a known time zone (an IANA name such as "
                "Europe/Rome; unset for the machine's local time)"
            ) from exc
    if not raw.strip():
        return None
    return QuietHours.parse(raw, zone)
