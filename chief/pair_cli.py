"""`chief telegram pair` and `chief telegram unpair` (parsed by `chief.cli`).

pair: with TELEGRAM_BOT_TOKEN set, and the door (`chief serve`) not running on this chief.db
(it holds the serve lock and reads the bot's updates; Telegram allows one reader, so pairing
takes the same lock for its wait), it checks the token (getMe), prints the bot's @name, a
one-time code and the words to send, and waits for `/start CODE` in a private chat with the bot
(`chief.telegram.pair`), with a countdown on stderr. Exit 0 paired; 1 timed out, a bad token,
Telegram unreachable, the door running; 2 a wrong setting; 130 Ctrl-C (nothing paired). Each
failure is one line on stderr, and the token is never printed.

unpair: removes the pairing file and says what it removed (or that nothing was paired); exit 0.

`--second` (issue 35) pairs, or unpairs, the second person the same way, in their own file
(`telegram-pairing-second.json`): a /start CODE from the owner's own user is refused (it would
ring the owner twice); the owner's pairing is left as it is.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping

import anyio

from chief.config import ChiefConfig
from chief.door.config import PairSettings, obeyed, pairing_file
from chief.errors import ChiefConfigError, ChiefError, TelegramUnavailable
from chief.serve_lock import REPORT_HOLD_POLL_S, REPORT_HOLD_WAIT_S, REPORT_HOLDER, ServeLock
from chief.telegram.pair import SECOND_PAIRED_WORDS, Countdown, PairingSession
from chief.telegram.pairing import Pairing, read_pairing, remove_pairing
from plumbing.terminal import shown

PAIR = "chief telegram pair"
UNPAIR = "chief telegram unpair"
PAIR_HOLDER = "chief telegram pair"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
CLOSE_BOUND_S = 2.0


def _fail(prog: str, words: str, code: int = EXIT_FAILED) -> int:
    print(shown(f"{prog}: {words}"), file=sys.stderr)
    return code


def pair(timeout_s: float, *, second: bool = False) -> int:
    try:
        settings = PairSettings.from_env(second=second)
        db_path = ChiefConfig.from_env().db_path
        owner = _owner_user(os.environ) if second else None
    except ChiefError as exc:
        return _fail(PAIR, str(exc), EXIT_USAGE)
    lock = ServeLock(db_path, holder=PAIR_HOLDER)
    try:
        refusal = _take(lock)
    except ChiefError as exc:  # the lock file cannot be opened (a link planted there)
        return _fail(PAIR, str(exc))
    if refusal is not None:
        return _fail(PAIR, refusal)
    try:
        if settings.chat_setting is not None:
            print(
                shown(
                    f"{PAIR}: note: TELEGRAM_CHAT_ID={settings.chat_setting} is set, and it wins "
                    "over the pairing while it is set (unset it to use the pairing)"
                ),
                flush=True,
            )
        paired, last_error = anyio.run(_session, settings, timeout_s, second, owner)
    except KeyboardInterrupt:
        return _fail(PAIR, "interrupted; nothing paired", EXIT_INTERRUPTED)
    except TelegramUnavailable as exc:
        return _fail(PAIR, f"{exc}; nothing paired")
    except BrokenPipeError:
        raise  # the reader of the output went away: the entry point ends quietly (to_reader)
    except OSError as exc:
        return _fail(PAIR, f"the pairing could not be saved in {settings.pairing_file} ({exc})")
    finally:
        lock.release()
    if paired is None:
        failed = f" (the last poll failed: {last_error})" if last_error else ""
        return _fail(
            PAIR,
            f"no /start with the code came within {timeout_s:g} s{failed}; nothing paired — "
            "run it again",
        )
    # who() is the names Telegram gave: printed escaped, as everything received is.
    print(shown(f"{PAIR}: paired with {paired.who()}; saved in {settings.pairing_file}"))
    if second:
        print(
            "Start the door (`chief serve`): an urgent report nobody acknowledges in time "
            "(CHIEF_ESCALATE_AFTER_S) now rings that chat too."
        )
        return EXIT_OK
    print("Start the door (`chief serve`): Coop's messages now come to that chat.")
    return EXIT_OK


def _take(lock: ServeLock) -> str | None:
    """Take the serve lock for the wait; the refusal's words when someone else holds it (a
    `chief report` landing its line is waited for, as the door waits for it)."""
    deadline = time.monotonic() + REPORT_HOLD_WAIT_S
    while not lock.try_acquire():
        holder = lock.current_holder()
        if holder.endswith(" " + REPORT_HOLDER) and time.monotonic() < deadline:
            time.sleep(REPORT_HOLD_POLL_S)
            continue
        pid, _, what = holder.partition(" ")
        if what == PAIR_HOLDER:
            return f"another `{PAIR}` (pid {pid}) is waiting; let it finish or stop it"
        return (
            f"the door (`chief serve`, pid {pid}) is running on {lock.path.parent}: it reads "
            "the bot's updates, and Telegram lets one reader take them. Stop the door, run "
            f"`{PAIR}`, then start the door"
        )
    return None


def _owner_user(env: Mapping[str, str]) -> int | None:
    """The owner's user id as the door obeys it (their pairing, or TELEGRAM_CHAT_ID)."""
    chat = env.get("TELEGRAM_CHAT_ID", "").strip() or None
    return obeyed(chat, read_pairing(pairing_file(env)))[1]


async def _session(
    settings: PairSettings, timeout_s: float, second: bool = False, owner: int | None = None
) -> tuple[Pairing | None, str | None]:
    """The pairing (None: none within `timeout_s`) and the last failed poll's words; with
    `second`, the owner's user (`owner`) is refused as the second person."""
    session = PairingSession(
        settings.token, api_base=settings.api_base, timeout_s=settings.timeout_s
    )
    if second:
        session.paired_words = SECOND_PAIRED_WORDS
    countdown = Countdown(sys.stderr, PAIR)
    try:
        name = await session.start()
        print(shown(f"Bot: {name}"))
        print(shown(f"In Telegram, open a private chat with {name} and send:"))
        print()
        print(f"    /start {session.code}")
        print()
        print(f"Waiting up to {timeout_s:g} s (Ctrl-C to stop).", flush=True)
        deadline = time.monotonic() + timeout_s
        paired = await session.wait(deadline, settings.pairing_file, countdown.tick, not_user=owner)
        return paired, session.last_error
    finally:
        countdown.finish()
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_BOUND_S):
            await session.aclose()


def unpair(*, second: bool = False) -> int:
    path = pairing_file(os.environ, second=second)
    try:
        pairing = read_pairing(path)
    except ChiefConfigError:
        pairing = None  # a broken file: removed all the same
    try:
        removed = remove_pairing(path)
    except ChiefError as exc:
        return _fail(UNPAIR, str(exc))
    if not removed:
        print(shown(f"{UNPAIR}: nothing was paired (no {path})"))
        return EXIT_OK
    who = f" with {pairing.who()}" if pairing is not None else " (it was not readable)"
    if second:
        print(
            shown(
                f"{UNPAIR}: removed the second person's pairing{who} ({path}); restart the "
                "door: urgent reports ring the owner alone"
            )
        )
        return EXIT_OK
    print(
        shown(
            f"{UNPAIR}: removed the pairing{who} ({path}); restart the door: it rings nothing "
            "until you pair again or set TELEGRAM_CHAT_ID"
        )
    )
    return EXIT_OK
