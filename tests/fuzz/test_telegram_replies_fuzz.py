"""Every answer the Bot API seam could get, for every method the door calls (issue 26, "close the
class"): the real `BotSender` and `BotPhone` (python-telegram-bot's `Bot` on the project's
request seam) against a local uvicorn that answers whatever Hypothesis draws, a status and a
body: a readable `ok: true` envelope around any result (a Message or a User with a field
dropped or changed, a `date` in milliseconds, null, any JSON), an envelope without `ok` or
`result`, an empty body, HTML, bytes, and Telegram's refusals.

What must hold for each:
- the call returns or raises `TelegramUnavailable`, nothing else, within its bound; a door's
  start (`BotSender.start`) never raises;
- `ok: true` on a 2xx means Telegram took the request: a sendMessage is sent (its message id,
  or None when it cannot be read), an edit, a toast, the commands are done;
- a 2xx that is not a readable envelope leaves a sendMessage in doubt (it may have rung);
  a refusal (not 2xx) never is;
- an unreadable getMe or getUpdates is `TelegramUnavailable`, never a crash;
- python-telegram-bot logs no traceback for any of them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chief.errors import TelegramUnavailable
from chief.telegram.emulator import BOT_USER
from chief.telegram.inbound import BotPhone
from chief.telegram.sender import BotSender
from tests.support.asgi import serve_asgi_in_thread

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOKEN = "123456:fuzz-token"
CALL_BOUND_S = 10.0
EXAMPLES = 120
HTML = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
# `reply` is the phone's sendMessage (an answer to a command), beside the sender's.
METHODS = (
    "getMe",
    "sendMessage",
    "reply",
    "editMessageText",
    "answerCallbackQuery",
    "setMyCommands",
    "getUpdates",
)
MESSAGE: dict[str, Any] = {
    "message_id": 7,
    "date": 1_700_000_000,
    "chat": {"id": 4242, "type": "private", "first_name": "Owner"},
    "from": BOT_USER,
    "text": "hello",
}

Answer = tuple[int, bytes, str]


class PlannedBotApi:
    """An ASGI Bot API that answers each method as planned (getMe readably unless planned)."""

    def __init__(self) -> None:
        self.planned: dict[str, Answer] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body", False):
            pass
        method = scope["path"].rsplit("/", 1)[-1]
        status, body, content_type = self.planned.get(method, _readable(method))
        headers = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _readable(method: str) -> Answer:
    result: Any = {"getMe": BOT_USER, "getUpdates": []}.get(method, True)
    return 200, json.dumps({"ok": True, "result": result}).encode(), "application/json"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)


@st.composite
def changed(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """`base` with a few fields dropped or replaced (a `date` in milliseconds among them)."""
    shaped = dict(base)
    for key in draw(st.lists(st.sampled_from(sorted(base)), max_size=3, unique=True)):
        what = draw(st.sampled_from(["drop", "json", "ms"]))
        if what == "drop":
            del shaped[key]
        elif what == "json":
            shaped[key] = draw(JSON)
        elif isinstance(shaped[key], int):
            shaped[key] = shaped[key] * 1000
    return shaped


RESULTS = st.one_of(
    changed(MESSAGE),
    changed(BOT_USER),
    st.lists(
        st.builds(lambda n, m: {"update_id": n, "message": m}, st.integers(), changed(MESSAGE)),
        max_size=2,
    ),
    JSON,
)


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    status = draw(st.sampled_from([200, 200, 200, 200, 201, 400, 401, 403, 404, 409, 429, 502]))
    kind = draw(st.sampled_from(["ok", "ok", "ok", "envelope", "empty", "html", "bytes", "json"]))
    if kind == "ok":
        body = json.dumps({"ok": True, "result": draw(RESULTS)}).encode()
    elif kind == "envelope":  # a Bot API object, but not a readable answer
        envelope = draw(st.dictionaries(st.sampled_from(["ok", "result", "description"]), JSON))
        body = json.dumps(envelope).encode()
    elif kind == "json":
        body = json.dumps(draw(JSON)).encode()
    else:
        body = {"empty": b"", "html": HTML}.get(kind) or draw(st.binary(max_size=40))
    return status, body, "text/html" if kind == "html" else "application/json"


def accepted(answer: Answer) -> bool:
    """A 2xx whose body is the Bot API's `{"ok": true, "result": ...}`."""
    status, body, _ = answer
    try:
        document = json.loads(body)
    except ValueError:
        return False
    return (
        200 <= status <= 299
        and isinstance(document, dict)
        and document.get("ok") is True
        and "result" in document
    )


def in_doubt(answer: Answer) -> bool:
    """A 2xx that is not a readable envelope: the request went out, its outcome is unknown."""
    return 200 <= answer[0] <= 299 and not accepted(answer)


class _Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


@pytest.fixture(scope="module")
def bot_api() -> Iterator[tuple[PlannedBotApi, str]]:
    api = PlannedBotApi()
    with serve_asgi_in_thread(api, lifespan="off") as url:  # type: ignore[arg-type]
        yield api, url + "/bot"


async def drive(method: str, base_url: str) -> Any:
    """Call `method` through the seam the door uses for it; what it returned."""
    with anyio.fail_after(CALL_BOUND_S):
        if method in ("getMe", "sendMessage", "editMessageText"):
            sender = BotSender(TOKEN, "4242", base_url=base_url, timeout_s=CALL_BOUND_S / 4)
            try:
                return await _send(sender, method)
            finally:
                await sender.aclose()
        phone = BotPhone(TOKEN, base_url=base_url, timeout_s=CALL_BOUND_S / 4)
        try:
            if method == "reply":
                return await phone.reply(4242, "the status", reply_to=3)
            if method == "answerCallbackQuery":
                return await phone.answer_callback("q1", "done")
            if method == "setMyCommands":
                return await phone.set_commands([("status", "the status")])
            return await phone.get_updates(None, 0)
        finally:
            await phone.aclose()


async def _send(sender: BotSender, method: str) -> Any:
    if method == "getMe":
        await sender.start()  # never raises: the door starts whatever getMe answers
        return await sender.send("a report")
    if method == "sendMessage":
        return await sender.send("a report", buttons=[[("approve", "a:1")]])
    return await sender.edit(4242, 7, "settled")


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
@given(method=st.sampled_from(METHODS), answer=answers())
def test_every_answer_to_every_method_is_contained(
    bot_api: tuple[PlannedBotApi, str], method: str, answer: Answer
) -> None:
    api, base_url = bot_api
    api.planned = {"sendMessage" if method == "reply" else method: answer}
    tracebacks = _Tracebacks()
    logging.getLogger("telegram").addHandler(tracebacks)
    try:
        result = anyio.run(drive, method, base_url)
        failure = None
    except TelegramUnavailable as exc:
        result, failure = None, exc
    finally:
        logging.getLogger("telegram").removeHandler(tracebacks)
    assert not tracebacks.records, [r.getMessage() for r in tracebacks.records]
    if method in ("getMe", "getUpdates"):
        assert failure is None or not failure.in_doubt, failure
        return
    if accepted(answer):
        assert failure is None, f"Telegram took it (ok: true), the door says {failure}"
        if method in ("sendMessage", "reply"):
            document = json.loads(answer[1])["result"]
            known = document.get("message_id") if isinstance(document, dict) else None
            expected = (
                known
                if isinstance(known, int) and not isinstance(known, bool) and known > 0
                else None
            )
            assert result == expected
        return
    if method == "sendMessage":
        assert failure is not None
        assert failure.in_doubt == in_doubt(answer), (answer, failure)
