"""The owner's phone in tests: the Bot API emulator's control endpoints played as a person.

    owner = EmulatorOwner(emulator_url)                 # sync: e2e tests, processes
    sent = owner.text(4242, 4242, "/start 123456")      # {"update_id", "message_id"}
    owner.press(4242, 4242, message_id, text="approve") # {"update_id", "callback_query_id", "data"}
    owner.press(4242, 4242, text="approve")             # the newest bot message with that button
    owner.replay(sent["update_id"])
    owner.restart_ids(1)                                # the next update is numbered 1
    owner.messages(); owner.callback_answers(); owner.commands(); owner.pending_updates()
    owner.wait_for(lambda o: o.messages(), timeout_s=5)  # bounded, returns the first truthy value

`AsyncEmulatorOwner` is the same for a test whose emulator runs in its own event loop
(`serve_asgi`): a blocking call there would stall the emulator it waits for. A refused control
request raises `AssertionError` with the emulator's reason (use `expect=400` to read it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from tests.support.waiting import wait_until, wait_until_sync

T = TypeVar("T")
CONTROL_TIMEOUT_S = 10.0


def _text_body(
    chat_id: int,
    user_id: int,
    text: str,
    reply_to_message_id: int | None,
    username: str | None,
    first_name: str | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"chat_id": chat_id, "user_id": user_id, "text": text}
    optional = {
        "reply_to_message_id": reply_to_message_id,
        "username": username,
        "first_name": first_name,
    }
    return body | {name: value for name, value in optional.items() if value is not None}


def _press_body(
    chat_id: int, user_id: int, message_id: int | None, text: str | None, index: int | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"chat_id": chat_id, "user_id": user_id}
    if message_id is not None:
        body["message_id"] = message_id
    if text is not None:
        body["text"] = text
    if index is not None:
        body["index"] = index
    return body


def _answer(response: httpx.Response, expect: int) -> dict[str, Any]:
    assert response.status_code == expect, f"{response.request.url}: {response.text}"
    document: dict[str, Any] = response.json()
    return document


class EmulatorOwner:
    """The control endpoints over a blocking client (the emulator runs elsewhere)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(
            base_url=self.base_url, timeout=CONTROL_TIMEOUT_S, trust_env=False
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> EmulatorOwner:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _post(self, path: str, body: dict[str, Any], expect: int) -> dict[str, Any]:
        return _answer(self._client.post(path, json=body), expect)

    def _get(self, path: str) -> dict[str, Any]:
        return _answer(self._client.get(path), 200)

    def text(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        reply_to_message_id: int | None = None,
        username: str | None = None,
        first_name: str | None = None,
        expect: int = 200,
    ) -> dict[str, Any]:
        body = _text_body(chat_id, user_id, text, reply_to_message_id, username, first_name)
        return self._post("/emulator/owner/text", body, expect)

    def press(
        self,
        chat_id: int,
        user_id: int,
        message_id: int | None = None,
        *,
        text: str | None = None,
        index: int | None = None,
        expect: int = 200,
    ) -> dict[str, Any]:
        body = _press_body(chat_id, user_id, message_id, text, index)
        return self._post("/emulator/owner/press", body, expect)

    def replay(self, update_id: int, *, expect: int = 200) -> dict[str, Any]:
        return self._post("/emulator/owner/replay", {"update_id": update_id}, expect)

    def messages(self) -> list[dict[str, Any]]:
        return list(self._get("/emulator/messages")["messages"])

    def callback_answers(self) -> list[dict[str, Any]]:
        return list(self._get("/emulator/callback_answers")["callback_answers"])

    def commands(self) -> list[dict[str, str]]:
        return list(self._get("/emulator/commands")["commands"])

    def pending_updates(self) -> list[int]:
        return list(self._get("/emulator/updates")["pending"])

    def polling(self) -> bool:
        """Whether a long poll waits at the emulator now."""
        return bool(self._get("/emulator/updates")["polling"])

    def next_update_id(self) -> int:
        return int(self._get("/emulator/updates")["next_id"])

    def restart_ids(self, next_update_id: int, *, expect: int = 200) -> dict[str, Any]:
        """Number the next update `next_update_id` (ids may go down, as Telegram's do)."""
        body = {"next_update_id": next_update_id}
        return self._post("/emulator/updates/next_id", body, expect)

    def reset(self) -> None:
        self._post("/emulator/reset", {}, 200)

    def wait_for(
        self, predicate: Callable[[EmulatorOwner], T], timeout_s: float = 10.0, what: str = ""
    ) -> T:
        """The first truthy `predicate(self)`, or AssertionError after `timeout_s`."""
        return wait_until_sync(lambda: predicate(self), timeout_s=timeout_s, what=what)


class AsyncEmulatorOwner:
    """The same control endpoints over an async client (the emulator in the test's loop)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url, timeout=CONTROL_TIMEOUT_S, trust_env=False
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> AsyncEmulatorOwner:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _post(self, path: str, body: dict[str, Any], expect: int) -> dict[str, Any]:
        return _answer(await self._client.post(path, json=body), expect)

    async def _get(self, path: str) -> dict[str, Any]:
        return _answer(await self._client.get(path), 200)

    async def text(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        reply_to_message_id: int | None = None,
        username: str | None = None,
        first_name: str | None = None,
        expect: int = 200,
    ) -> dict[str, Any]:
        body = _text_body(chat_id, user_id, text, reply_to_message_id, username, first_name)
        return await self._post("/emulator/owner/text", body, expect)

    async def press(
        self,
        chat_id: int,
        user_id: int,
        message_id: int | None = None,
        *,
        text: str | None = None,
        index: int | None = None,
        expect: int = 200,
    ) -> dict[str, Any]:
        body = _press_body(chat_id, user_id, message_id, text, index)
        return await self._post("/emulator/owner/press", body, expect)

    async def replay(self, update_id: int, *, expect: int = 200) -> dict[str, Any]:
        return await self._post("/emulator/owner/replay", {"update_id": update_id}, expect)

    async def messages(self) -> list[dict[str, Any]]:
        return list((await self._get("/emulator/messages"))["messages"])

    async def callback_answers(self) -> list[dict[str, Any]]:
        return list((await self._get("/emulator/callback_answers"))["callback_answers"])

    async def commands(self) -> list[dict[str, str]]:
        return list((await self._get("/emulator/commands"))["commands"])

    async def pending_updates(self) -> list[int]:
        return list((await self._get("/emulator/updates"))["pending"])

    async def restart_ids(self, next_update_id: int, *, expect: int = 200) -> dict[str, Any]:
        body = {"next_update_id": next_update_id}
        return await self._post("/emulator/updates/next_id", body, expect)

    async def reset(self) -> None:
        await self._post("/emulator/reset", {}, 200)

    async def wait_for(
        self,
        predicate: Callable[[AsyncEmulatorOwner], Any],
        timeout_s: float = 10.0,
        what: str = "",
    ) -> Any:
        """The first truthy `predicate(self)` (sync or async), or AssertionError after
        `timeout_s`."""
        return await wait_until(lambda: predicate(self), timeout_s=timeout_s, what=what)
