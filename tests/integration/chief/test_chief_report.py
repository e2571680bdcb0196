"""report(): durable first, one drainer, bounded waits, never inside a turn, lands once."""

from __future__ import annotations

import random

import anyio
import pytest
from structlog.testing import capture_logs

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.errors import ChiefConfigError, ChiefInputError
from tests.integration.chief.conftest import execute, query

SOURCE = "coop-notify:41"
KEY = "chief-report:" + SOURCE


async def test_same_source_reported_five_times_in_sequence_lands_one_message(
    chief_config: ChiefConfig,
) -> None:
    async with Chief.open(chief_config) as chief:
        ids = [await chief.report("todo #41 done", SOURCE, wait=None) for _ in range(5)]
    assert len(set(ids)) == 1
    assert ids[0] is not None
    assert query(
        chief_config.db_path, "SELECT id FROM messages WHERE external_request_id = ?", (KEY,)
    ) == [(ids[0],)]
    assert query(chief_config.db_path, "SELECT COUNT(*) FROM chief_report_outbox") == [(1,)]


@pytest.mark.parametrize("turn_held", [False, True], ids=["chief-free", "during-a-turn"])
async def test_same_source_reported_five_times_concurrently_returns_one_id(
    chief_config: ChiefConfig, turn_held: bool
) -> None:
    ids: list[int | None] = []

    async def report(chief: Chief) -> None:
        ids.append(await chief.report("todo #41 done", SOURCE, wait=None))

    async with Chief.open(chief_config) as chief, anyio.create_task_group() as tasks:
        if turn_held:
            async with chief.turn():
                for _ in range(5):
                    tasks.start_soon(report, chief)
                # All five are queued behind the turn before it ends.
                await _wait_for(lambda: chief.undelivered_count(), 1)
        else:
            for _ in range(5):
                tasks.start_soon(report, chief)
    assert len(ids) == 5
    assert len(set(ids)) == 1
    assert ids[0] is not None
    assert query(chief_config.db_path, "SELECT COUNT(*) FROM messages") == [(1,)]


async def test_report_during_a_turn_returns_none_then_lands_after_the_reply(
    chief_config: ChiefConfig,
) -> None:
    async with Chief.open(chief_config) as chief:
        async with chief.turn():
            user_id = await chief.append_message("user", "how is the build going?")
            assert await chief.report("todo #41 done", SOURCE, wait=0.05) is None
            assert await chief.undelivered_count() == 1
            reply_id = await chief.append_message("assistant", "still compiling")
        landed = await chief.report("todo #41 done", SOURCE, wait=None)
        assert await chief.undelivered_count() == 0
    assert landed is not None
    assert user_id < reply_id < landed
    rows = query(chief_config.db_path, "SELECT role, turn_kind, origin FROM messages ORDER BY id")
    assert rows == [
        ("user", "chat", "user"),
        ("assistant", "chat", "user"),
        ("assistant", "coop", "scheduled_task"),
    ]


async def test_a_waiter_cancelled_while_a_turn_is_held_does_not_stop_the_landing(
    chief_config: ChiefConfig,
) -> None:
    async with Chief.open(chief_config) as chief:
        async with chief.turn():
            with anyio.move_on_after(0.05) as scope:
                await chief.report("backup finished", "cron:backup", wait=None)
            assert scope.cancelled_caught
        await chief.resume_reports()
        assert await chief.undelivered_count() == 0
    assert query(chief_config.db_path, "SELECT turn_kind, content FROM messages") == [
        ("cron", "backup finished")
    ]


async def test_200_reports_from_20_sources_land_once_in_outbox_order_never_inside_a_turn(
    chief_config: ChiefConfig,
) -> None:
    rng = random.Random(20)
    sources, per_source, turns = 20, 10, 40

    async def chat(chief: Chief) -> None:
        for n in range(turns):
            async with chief.turn():
                await chief.append_message("user", f"question {n}")
                # Yield a few times inside the turn so reports arrive while it is held.
                for _ in range(rng.randint(0, 4)):
                    await anyio.sleep(0)
                await chief.append_message("assistant", f"answer {n}")
            await anyio.sleep(0)

    async def source(chief: Chief, s: int) -> None:
        prefix = "coop-notify" if s % 2 == 0 else "cron"
        for i in range(per_source):
            source_id = f"{prefix}:{s}-{i}"
            await chief.report(f"line {s}-{i}", source_id, wait=rng.choice([None, 0.0, 0.01]))
            if rng.random() < 0.3:  # a client retry of the same line
                await chief.report(f"line {s}-{i}", source_id, wait=0.0)

    async with Chief.open(chief_config) as chief:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(chat, chief)
            for s in range(sources):
                tasks.start_soon(source, chief, s)
        await chief.resume_reports()
        assert await chief.undelivered_count() == 0

    db = chief_config.db_path
    outbox = query(db, "SELECT source_key, message_id FROM chief_report_outbox ORDER BY rowid")
    assert len(outbox) == sources * per_source
    landed_ids = [message_id for _, message_id in outbox]
    assert landed_ids == sorted(landed_ids), "reports must land in outbox order"
    messages = query(
        db,
        "SELECT id, role, turn_kind, origin, external_request_id, content "
        "FROM messages ORDER BY id",
    )
    reports = [m for m in messages if m[4] is not None]
    assert sorted(m[4] for m in reports) == sorted(key for key, _ in outbox)
    assert {m[0] for m in reports} == set(landed_ids)
    for _, role, kind, origin, key, _ in reports:
        assert (role, origin) == ("assistant", "scheduled_task")
        assert kind == ("coop" if key.startswith("chief-report:coop-notify:") else "cron")
    chat_lines = [m for m in messages if m[4] is None]
    assert len(chat_lines) == 2 * turns
    for index, (_, role, _, _, _, content) in enumerate(messages):
        if role == "user":
            reply = messages[index + 1]
            n = content.removeprefix("question ")
            assert (reply[1], reply[2], reply[5]) == ("assistant", "chat", f"answer {n}")


FAILING_TRIGGERS = {
    "on-append": """CREATE TRIGGER test_fail BEFORE INSERT ON messages
        BEGIN SELECT RAISE(ABORT, 'injected: disk gave up'); END""",
    # Fails after the message row was inserted: proves append and record share a transaction.
    "on-record": """CREATE TRIGGER test_fail BEFORE UPDATE ON chief_report_outbox
        BEGIN SELECT RAISE(ABORT, 'injected: disk gave up'); END""",
}


@pytest.mark.parametrize("failing", sorted(FAILING_TRIGGERS))
@pytest.mark.parametrize("nudge", ["next-report", "resume"])
async def test_drainer_failure_keeps_the_row_and_the_next_nudge_lands_it(
    chief_config: ChiefConfig, failing: str, nudge: str
) -> None:
    db = chief_config.db_path
    async with Chief.open(chief_config) as chief:
        execute(db, FAILING_TRIGGERS[failing])
        with capture_logs() as logs:
            assert await chief.report("backup finished", "cron:backup", wait=0.0) is None
            await chief.resume_reports()  # returns once a (failing) pass has run
        assert any(e["event"] == "chief.drain.failed" for e in logs)
        assert await chief.undelivered_count() == 1
        assert query(db, "SELECT COUNT(*) FROM messages") == [(0,)]

        execute(db, "DROP TRIGGER test_fail")
        if nudge == "next-report":
            second = await chief.report("todo #7 done", "coop-notify:7", wait=None)
        else:
            await chief.resume_reports()
        first = await chief.report("backup finished", "cron:backup", wait=0.0)
        assert await chief.undelivered_count() == 0
    assert first is not None
    rows = query(db, "SELECT id, external_request_id FROM messages ORDER BY id")
    if nudge == "next-report":
        assert rows == [(first, "chief-report:cron:backup"), (second, "chief-report:coop-notify:7")]
    else:
        assert rows == [(first, "chief-report:cron:backup")]


async def test_bad_source_or_empty_text_is_refused_and_writes_nothing(
    chief_config: ChiefConfig,
) -> None:
    async with Chief.open(chief_config) as chief:
        with pytest.raises(ChiefInputError, match="coop-notify:"):
            await chief.report("hello", "webhook:1")
        with pytest.raises(ChiefInputError, match="empty"):
            await chief.report("  ", "cron:backup")
    assert query(chief_config.db_path, "SELECT COUNT(*) FROM chief_report_outbox") == [(0,)]


async def test_open_without_an_owner_names_chief_owner(chief_config: ChiefConfig) -> None:
    with pytest.raises(ChiefConfigError, match="CHIEF_OWNER"):
        async with Chief.open(ChiefConfig(db_path=chief_config.db_path, owner=None)):
            pass


async def test_an_error_in_the_body_propagates_as_itself(chief_config: ChiefConfig) -> None:
    with pytest.raises(KeyError):
        async with Chief.open(chief_config):
            raise KeyError("the host's own failure")


async def test_a_sent_mark_is_written_once_and_counted(chief_config: ChiefConfig) -> None:
    async with Chief.open(chief_config) as chief:
        await chief.store.mark_rung([], ["41"], 9001)
        await chief.store.mark_rung([], ["41"], 9002)  # a repeat writes nothing
        _, accepted = await chief.report_notify("row 41", "41", wait=1.0, queue_telegram=True)
        assert (accepted.already_sent, accepted.telegram_message_id) == (True, 9001)
        assert accepted.telegram_seq is None  # rung already: not queued again
        assert await chief.sent_count() == 1
    assert query(
        chief_config.db_path, "SELECT outbox_id, telegram_message_id FROM coop_notify_sent"
    ) == [("41", 9001)]


async def _wait_for(count, expected: int) -> None:  # type: ignore[no-untyped-def]
    from tests.support.waiting import wait_until

    async def reached() -> bool:
        return await count() == expected

    await wait_until(reached, timeout_s=5.0, what=f"count == {expected}")


async def test_a_landing_of_several_rows_logs_one_event_naming_each(
    chief_config: ChiefConfig,
) -> None:
    # One event per landing pass, not per row: an event costs ~65 us of the door's CPU, about
    # as much as landing the row; the event still names every key and its message.
    async with Chief.open(chief_config) as chief:
        with capture_logs() as logs:
            answers = await chief.report_notify_batch(
                [("row a", "a"), ("row b", "b")], wait=2.0, queue_telegram=False
            )
            await chief.report("cron line", "cron:backup:1", wait=2.0)
    landed = [e for e in logs if e["event"] == "chief.report.landed"]
    assert [e.get("source_keys", [e.get("source_key")]) for e in landed] == [
        ["chief-report:coop-notify:a", "chief-report:coop-notify:b"],
        ["chief-report:cron:backup:1"],
    ]
    assert landed[0]["chief_message_ids"] == [message_id for message_id, _ in answers]
    assert isinstance(landed[1]["chief_message_id"], int)
