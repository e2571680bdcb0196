"""The Bot API emulator's receipt file (`--log`): opened once and kept open while the emulator
serves (not opened and closed per message), each line flushed as it is written so a reader sees
it at once, and closed when the emulator shuts down. Checked on a real uvicorn with the real
python-telegram-bot client, by looking at this process's open files in /proc."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chief.telegram.emulator import create_emulator
from chief.telegram.sender import BotSender
from tests.support.asgi import serve_asgi
from tests.support.door import BOT_TOKEN, CHAT_ID
from tests.support.procs import fd_targets
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


def open_handles(path: Path) -> int:
    """How many of this process's file descriptors point at `path`."""
    target = os.path.realpath(path)
    return fd_targets().count(target)


def lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["text"] for line in path.read_text().splitlines() if line.strip()]


async def test_emulator_keeps_its_receipt_file_open_and_closes_it_at_shutdown(
    tmp_path: Path,
) -> None:
    log_path = tmp_path / "received.jsonl"
    app, _ = create_emulator(token=BOT_TOKEN, log_path=log_path)
    async with serve_asgi(app, lifespan="on") as url:
        sender = BotSender(BOT_TOKEN, CHAT_ID, base_url=url + "/bot", timeout_s=5.0)
        await sender.start()
        try:
            for index in range(3):
                await sender.send(f"receipt {index}")
                # Flushed per line: a reader sees each receipt without the emulator stopping.
                await wait_until(
                    lambda count=index + 1: len(lines(log_path)) == count,
                    timeout_s=5,
                    what=f"receipt line {index + 1}",
                )
                # Kept open between messages: one handle, the same across sends.
                assert open_handles(log_path) == 1
        finally:
            await sender.aclose()
    assert open_handles(log_path) == 0
    assert lines(log_path) == ["receipt 0", "receipt 1", "receipt 2"]
