"""The fallback task (chief.fallback.task) in-process, on a real chief.db and a real Apprise
channel whose mail server refuses connections (a loopback port nobody listens on): the send is
counted `failed`, deferred and said once; the door status's part carries the last error, and
`coop status` shows it and `--check` names it (engine.status, engine.cli.render)."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from chief.fallback.channel import AppriseChannel
from chief.fallback.task import Fallback
from chief.fallback_rules import FAILED, FallbackSettings
from chief.model import Extras
from chief.phone.loop import running_task
from chief.store import ChiefStore, ReportRow
from engine.cli.render import fallback_lines
from engine.status import fallback_problems
from tests.support.waiting import wait_until

WHY = "Telegram refuses the messages (403 Forbidden: bot was blocked by the user)"


def refusing_port() -> int:
    """A loopback port nobody listens on (bound, then closed: the kernel refuses a connect)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(60)
async def test_a_fallback_that_cannot_send_is_counted_said_once_and_named_by_the_check(
    tmp_path: Path,
) -> None:
    port = refusing_port()
    url = f"mailto://coop@localhost?smtp=127.0.0.1&port={port}&mode=insecure&to=o@example.org"
    settings = FallbackSettings((url,), "CHIEF_FALLBACK_URLS", after_s=0.5, max_per_hour=12)
    counted: list[str] = []
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        chief_id = await store.resolve_chief("owner")
        outbox_id = "d-" + uuid.uuid4().hex
        row = ReportRow("chief-report:coop-notify:" + outbox_id, "URGENT: the freezer is warm",
                        outbox_id, None, Extras(None, urgent=True))  # fmt: skip
        await store.accept_reports(chief_id, [row], queue_telegram=True)
        task = Fallback(store, AppriseChannel(settings.urls), settings, lambda: WHY,
                        count=counted.append)  # fmt: skip
        with capture_logs() as logs:
            async with running_task(task, 10.0):
                await wait_until(lambda: FAILED in counted, timeout_s=30, what="a failed send")
                status = await task.status()
        assert status["last_error"]
        assert status["waiting"] == 2  # the notice and the report, both kept
        assert status["telegram_failing_why"] == WHY
        said = [e for e in logs if e["event"] == "door.fallback_send_failed"]
        assert len(said) == 1
    door = {"fallback": status}
    (problem,) = fallback_problems(door)
    assert problem.startswith("the fallback channel fails (2 waiting): ")
    (line,) = fallback_lines(door)
    assert line.startswith("fallback: Telegram failing since ")
    assert "0 sent, 2 waiting; last error: " in line
    assert fallback_problems({"fallback": {"configured": False}}) == []
