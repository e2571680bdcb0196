"""A local Telegram Bot API emulator for tests and demos (`chief telegram-emulator`, loopback).

It answers the calls python-telegram-bot makes, the way the real Bot API does (`{"ok": true,
"result": ...}`, errors as `{"ok": false, "error_code": n, "description": ...}`), each checked
as Telegram checks it (`methods`, `shapes`):

- `getMe`, and harmless `close`/`logOut`/`deleteMyCommands`;
- `setWebhook` (`url`), `deleteWebhook`, `getWebhookInfo`: while a webhook is set, getUpdates
  answers `409 Conflict: can't use getUpdates method while webhook is active; use deleteWebhook
  to delete the webhook first` (the emulator never calls the webhook);
- a group upgraded to a supergroup (`POST /emulator/chats/migrate` below): every sendMessage,
  editMessageText or editMessageReplyMarkup to the group's id answers `400 Bad Request: group
  chat was upgraded to a supergroup chat` with `"parameters": {"migrate_to_chat_id": NEW}`, as
  the Bot API answers (tdlib/telegram-bot-api, Client.cpp; python-telegram-bot raises
  `ChatMigrated` with `new_chat_id`); the supergroup's id takes messages as any chat;
- `sendMessage`, keeping `reply_markup` (an inline keyboard's `callback_data` is 1..64 bytes,
  else `400 Bad Request: BUTTON_DATA_INVALID`) and `reply_to_message_id`/`reply_parameters`;
  every message gets a `message_id` counted per chat (the bot's and the users' together);
- `getUpdates` with `offset` (confirms every update below it, delivered or not, as Telegram
  does; a replayed one once delivered again), `limit` (1..100),
  `timeout` (a long poll: at once when updates wait, else when one arrives, the caller hangs up
  or the timeout passes, at most 50 s) and `allowed_updates`; a second getUpdates while one
  polls answers `409 Conflict: terminated by other getUpdates request; ...` (`updates`);
- `answerCallbackQuery` (`text` 0..200 characters; an unknown or answered query id: `400 Bad
  Request: query is too old and response timeout expired or query ID is invalid`);
- `editMessageText` and `editMessageReplyMarkup` (`400 Bad Request: message to edit not
  found`, `400 Bad Request: message is not modified: ...` when nothing changes; an edit without
  `reply_markup` removes the inline keyboard, as in Telegram);
- `setMyCommands` (1..100 of `{"command": [a-z0-9_]{1,32}, "description": 1..256}`, else
  `BOT_COMMAND_INVALID`, `BOT_COMMAND_DESCRIPTION_INVALID`, `BOT_COMMANDS_TOO_MUCH`) and
  `getMyCommands`.

Bodies may be form-encoded (what PTB sends; structured parameters as JSON text) or JSON. PTB's
base URL is `http://127.0.0.1:P/bot`.

Every message the bot sends is kept: `GET /emulator/messages` answers them as JSON (each with
`message_id`, `chat_id`, `text`, `disable_notification`, `received_at`, its current
`reply_markup`, `edits`: the earlier texts and markups, and `reply_to_message_id`), and with
`--log` each is appended as one JSON line (with its receipt time). The line and the
`emulator.message` log event are written just after the answer is sent, so the sender does not
wait for them. The receipt file is opened at the first receipt and kept open (an open and a
close per message cost the emulator more than the message itself); each line is flushed as it
is written, so a reader sees it at once, and the file is closed when the emulator shuts down
(its lifespan). A file renamed away meanwhile keeps receiving lines: rotate it by copying and
truncating.

Guarded like the door (`guard`): a loopback peer, one loopback Host, no browser or proxy
header, no `Sec-Fetch-Site: cross-site`, and a POST to a control endpoint says `Content-Type:
application/json` (a form or text/plain: 415), so no web page drives or reads it through
loopback; refusals are summed up in one `emulator.refused` line per reason at most a minute.
The receipt file is created 0600 (`plumbing.files`), never through a link.

Control endpoints, for tests and demos (JSON in, JSON out; a request that cannot be played is
400 with its reason):

- `POST /emulator/owner/text` `{"chat_id", "user_id", "text", "reply_to_message_id"?,
  "username"?, "first_name"?}` -> `{"update_id", "message_id"}`: a message from that user in
  that chat (private when chat_id == user_id), with a `bot_command` entity for a leading
  `/command`, delivered by getUpdates (`owner`);
- `POST /emulator/owner/press` `{"chat_id", "user_id", "message_id"?, "text"? | "index"?}` ->
  `{"update_id", "callback_query_id", "data"}`: press a button (by label, or by index row by
  row) on a bot message as it is now; without `message_id`, on the chat's newest bot message
  that has such a button (none: 400 `chat 1 has no bot message with a button 'approve'`);
- `POST /emulator/owner/replay` `{"update_id"}`: deliver that update again, the same object;
- `POST /emulator/owner/block` `{"chat_id", "user_id", "blocked": true | false}` ->
  `{"update_id"}`: the user blocks (unblocks) the bot in that chat: while blocked every write
  to it answers `403 Forbidden: bot was blocked by the user`; each change queues the
  `my_chat_member` update Telegram sends (the bot's status `kicked` or `member`);
- `POST /emulator/owner/raw` `{"update": {...}}` -> `{"update_id"}`: deliver any update object
  as is, under the next update id (one it carries is replaced) and past the `allowed_updates`
  filter: what the Bot API can deliver and the endpoints above never make (forged
  `callback_data`, a callback query without `message`, an edited message, a channel post, a
  message without `from`, an unknown kind); a string `callback_query.id` can be answered
  (`raw`);
- `GET /emulator/callback_answers`: every answerCallbackQuery (`callback_query_id`, `text`,
  `show_alert`, `at`); `GET /emulator/commands`: the last setMyCommands list;
  `GET /emulator/updates`: the ids of the updates not yet confirmed (`pending`), whether a
  long poll waits (`polling`) and the next update's id (`next_id`);
- `POST /emulator/updates/next_id` `{"next_update_id": N}` -> `{"next_update_id", "was"}`: the
  next update is numbered N, below the last one if asked: Telegram's ids jump (at random after
  a week without updates), and a restarted emulator counts from 1 again;
- `POST /emulator/chats/migrate` `{"chat_id": GROUP, "to_chat_id"?: SUPERGROUP}` -> `{"ok",
  "chat_id", "to_chat_id"}`: the group (a negative id) becomes a supergroup (by default `-100`
  and the group's digits, as Telegram numbers them); 400 for a private chat's id;
- `POST /emulator/faults` `{"mode": "429" | "5xx" | "delay" | "unauthorized" |
  "chat_not_found" | "bot_blocked" | "conflict", "count": N, "retry_after": s, "status": 5xx,
  "delay_s": s, "methods": ["sendMessage"]}`: the next N matching calls answer 429 with
  `parameters.retry_after` (nothing kept), a 5xx (nothing kept), or are kept and then answered
  only after `delay_s` (past the client's timeout, a message that was still received); the
  last three are Telegram's permanent refusals, as the Bot API answers them (nothing kept):
  `401 Unauthorized` (a bad token; arm it on getMe too, as Telegram refuses every method),
  `400 Bad Request: chat not found`, `403 Forbidden: bot was blocked by the user`; `conflict`
  (arm it on getUpdates) answers `409 Conflict: terminated by other getUpdates request; ...`,
  another reader of the bot's updates;
  with `"replace": true` the armed faults are forgotten in the same step, so a test switching
  Telegram from one failure to another leaves no moment in which a send succeeds;
- `POST /emulator/replies` `{"shape": "no_is_bot" | "date_ms" | "result_null" |
  "no_message_id" | "empty" | "html" | "at_once", "methods": ["getMe", ...], "count": N,
  "replace"?}`: the next N calls of those methods answer what a client cannot read (the method
  runs first, so Telegram took it; a getUpdates answers at once, confirming nothing) (`replies`);
  `{"clear": true}` forgets them; `GET` lists the armed shapes;
- `GET /emulator/calls`: how many API calls each method received, and `too_many_requests`;
- `--flood-limits` (off by default): Telegram's flood control, about 1 message/s per private
  chat with a burst of 3, 20/min per group chat (negative ids), 30/s overall; past them a
  sendMessage answers `429` with `parameters.retry_after` and `Too Many Requests: retry after N`;
- `POST /emulator/reset`: forget messages, updates, callback queries and answers, commands,
  calls, faults, the webhook and the migrated groups (the JSON lines file is kept; message and
  update ids keep counting, as Telegram's do).

In-process: `create_emulator()` returns the ASGI app and its `EmulatorState`.
"""

from chief.telegram.emulator.app import DEFAULT_PORT, create_emulator, main
from chief.telegram.emulator.shapes import BOT_USER, MAX_MESSAGE_UTF16_UNITS
from chief.telegram.emulator.state import EmulatorState, Fault, FloodLimits, parse_fault

__all__ = [
    "BOT_USER",
    "DEFAULT_PORT",
    "MAX_MESSAGE_UTF16_UNITS",
    "EmulatorState",
    "Fault",
    "FloodLimits",
    "create_emulator",
    "main",
    "parse_fault",
]
