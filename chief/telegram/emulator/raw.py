"""The emulator delivers any update a test writes (`POST /emulator/owner/raw`): the shapes the
Bot API can deliver but the owner's control endpoints never make (a callback query without a
message or with forged data, an edited message, a channel post, a message without a sender,
kinds the emulator does not know). Kept apart from `owner`, which plays a person faithfully."""

from __future__ import annotations

from typing import Any

import structlog

from chief.telegram.emulator.state import EmulatorState

log = structlog.get_logger("chief.telegram.emulator")


def raw(state: EmulatorState, document: dict[str, Any]) -> dict[str, Any]:
    """`{"update": {...}}`: queue that object as is, under the next update id (an `update_id`
    it carries is replaced), delivered whatever `allowed_updates` says (Telegram too delivers
    an update made before a getUpdates narrowed the kinds). A callback query's `id`, when it is
    a string, can be answered once by answerCallbackQuery, as a pressed button's can."""
    body = document.get("update")
    if not isinstance(body, dict):
        raise ValueError("update must be a JSON object")
    body = {key: value for key, value in body.items() if key != "update_id"}
    query = body.get("callback_query")
    if isinstance(query, dict) and isinstance(query.get("id"), str):
        state.callback_queries.setdefault(query["id"], False)
    update = state.updates.add(body, raw=True)
    log.info("emulator.owner_raw", update=update["update_id"], kinds=sorted(body))
    return {"update_id": update["update_id"]}
