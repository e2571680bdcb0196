"""GET /metrics on the engine service (`coop serve`) and on the door (`chief serve`), each alone
on its own TCP listener, keyless (`COOP_METRICS_PORT`, `CHIEF_METRICS_PORT`), scraped over real
HTTP during a real delivery (both as processes: the door starts only after the engine has
deferred the head row at least once, and Telegram, the emulator, answers a 429 and then a 500)
and parsed with prometheus_client's own parser: every counter moved by exactly what happened.
Telegram's failures stay inside the door (its own queue), so they show in the door's send
counters and never as engine deferrals. Then the guard: neither scrape carries a key (a key sent
to a TCP port would reach whoever listens there while the service is down), and a browser or a
rebound Host is refused on both.

And what a real Prometheus sees: both endpoints asked with the `Accept` header each Prometheus
version sends answer one exposition (one `# EOF` at most, no family twice) that the OpenMetrics
parser and the text parser both read, and `promtool check metrics` where it is installed."""

from __future__ import annotations

import math
import shutil
import subprocess

import httpx
import pytest
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families

from chief.telegram.emulator import parse_fault
from engine import outbox
from tests.e2e.door.conftest import NOTIFY_URL, DoorProcess, Harness, spawn_door
from tests.e2e.owner.conftest import ServeProcess
from tests.support.door import KEY
from tests.support.waiting import wait_until_sync

# A long run (tens of seconds on a loaded machine): scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

TIMEOUT_S = 30.0
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
# What Prometheus sends (`acceptHeader` over its default `scrape_protocols`): before 2.49 a fixed
# header; from 2.49 the protocols weighted in order; 3.x adds text 1.0.0 and the escaping scheme.
PROMETHEUS_ACCEPT = {
    "2.42": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "2.49": "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;"
    "version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
    "3.x": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
    "application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;"
    "escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
    "text-only": "text/plain;version=0.0.4;q=1.0,*/*;q=0.1",
}
OPENMETRICS = "application/openmetrics-text"


def scrape(url: str, *, keyed: bool = True, **headers: str) -> httpx.Response:
    """GET `url`/metrics, with the key as a Bearer token unless `headers` or not `keyed` (the
    door's /metrics: Prometheus's scrape of it carries no key)."""
    if keyed and not headers:
        headers = {"Authorization": f"Bearer {KEY}"}
    return httpx.get(url + "/metrics", headers=headers, timeout=TIMEOUT_S, trust_env=False)


def samples(url: str, *, keyed: bool = True) -> Samples:
    answer = scrape(url, keyed=keyed)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    found: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        assert family.documentation, f"{family.name} has no HELP text"
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), math.nan)


def assert_guarded(engine: ServeProcess, door: DoorProcess) -> None:
    """Both /metrics are keyless; browsers and rebinding refused on both."""
    for url in (engine.metrics_url, door.metrics_base()):
        assert scrape(url, keyed=False, Accept="text/plain").status_code == 200
        browser = scrape(url, keyed=False, Origin="http://example.com")
        assert browser.status_code == 403
        assert scrape(url, keyed=False, Host="evil.example").status_code == 403


def sent_texts(messages: list[dict[str, object]]) -> list[str]:
    """Each row's text as the emulator received it, a digest read back into its rows."""
    texts: list[str] = []
    for message in messages:
        lines = str(message["text"]).splitlines()
        texts.extend(line for line in lines if line.startswith("line "))
    return texts


def test_both_scrapes_count_exactly_what_a_delivery_did_and_need_the_key(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The door will be on <folder>/door.sock, where the engine's notifier looks by default.
    env = harness.env(
        COOP_BACKOFF_BASE_S="0.5",
        # One row per request, so each row is one notify answer and one timed notify (the
        # batch route's own counting is the door's batch tests' business).
        COOP_BATCH_MAX="1",
    )
    engine = ServeProcess(harness.folder, env).start()
    try:
        _deliver_and_scrape(harness, engine, monkeypatch)
    finally:
        engine.stop_quietly()


def _deliver_and_scrape(
    harness: Harness, engine: ServeProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Telegram answers the first send 429 (Retry-After 1 s), the second 500, then accepts.
    harness.emulator.arm(parse_fault({"mode": "429", "count": 1, "retry_after": 1}))
    harness.emulator.arm(parse_fault({"mode": "5xx", "count": 1, "status": 500}))
    monkeypatch.setenv("COOP_HOME", str(harness.folder))
    # Only `coop serve`'s daemon delivers (its deferrals are the ones it counts): never a one-shot
    # drainer spawned by this test's commits.
    monkeypatch.setenv("COOP_KICK", "datagram")
    for number in (1, 2, 3):
        outbox.notify(f"line {number}", actor="me", db=str(harness.folder / "coop.db"))

    # No door yet: the head row is deferred (nobody answers) and holds the other two.
    during = wait_until_sync(
        lambda: (
            (found := samples(engine.metrics_url))
            and value(found, "coop_outbox_deferrals_total", reason="no_answer") >= 1
            and found
        ),
        timeout_s=TIMEOUT_S,
        what="the first deferral",
    )
    assert value(during, "coop_outbox_rows", state="pending") == 3
    assert value(during, "coop_outbox_oldest_pending_age_seconds") > 0

    door = spawn_door(harness.env(CHIEF_METRICS_PORT="0"))
    wait_until_sync(
        lambda: sent_texts(harness.emulator.messages) == ["line 1", "line 2", "line 3"],
        timeout_s=TIMEOUT_S,
        what="each row's text rung once, in order",
    )
    after = wait_until_sync(
        lambda: (
            (found := samples(engine.metrics_url))
            and value(found, "coop_outbox_deliveries_total") == 3
            and value(found, "coop_worker_lock_held") == 0
            and found
        ),
        timeout_s=TIMEOUT_S,
        what="the engine to record 3 deliveries and hand the lock back",
    )
    assert value(after, "coop_outbox_rows", state="pending") == 0
    assert value(after, "coop_outbox_rows", state="delivered") == 3
    assert value(after, "coop_outbox_rows", state="cancelled") == 0
    assert value(after, "coop_outbox_cancellations_total") == 0
    assert value(after, "coop_outbox_oldest_pending_age_seconds") == 0
    deferrals = {
        dict(labels)["reason"]: count
        for (name, labels), count in after.items()
        if name == "coop_outbox_deferrals_total"
    }
    # Only the door's absence deferred anything: Telegram's 429 and 500 never reach the engine.
    assert set(deferrals) == {"no_answer"}
    head_attempts = deferrals["no_answer"] + 1
    assert value(after, "coop_outbox_delivery_attempts_count") == 3
    assert value(after, "coop_outbox_delivery_attempts_sum") == 2 + head_attempts
    assert value(after, "coop_outbox_delivery_attempts_bucket", le="1.0") == 2
    assert value(after, "coop_outbox_commit_to_delivered_seconds_count") == 3
    assert value(after, "coop_worker_drains_total", outcome="released") >= 1

    door_after = samples(door.metrics_base(), keyed=False)
    assert value(door_after, "coop_door_requests_total", path=NOTIFY_URL, status="200") == 3
    assert math.isnan(value(door_after, "coop_door_requests_total", path=NOTIFY_URL, status="503"))
    assert value(door_after, "coop_door_notify_duration_seconds_count") == 3
    messages = len(harness.emulator.messages)
    assert value(door_after, "coop_telegram_sends_total", result="ok") == messages
    assert value(door_after, "coop_telegram_sends_total", result="429") == 1
    assert value(door_after, "coop_telegram_sends_total", result="5xx") == 1
    assert value(door_after, "coop_telegram_sends_total", result="timeout") == 0
    assert value(door_after, "coop_telegram_retry_after_seconds_count") == 1
    assert value(door_after, "coop_telegram_retry_after_seconds_sum") == 1.0
    assert value(door_after, "coop_chief_undelivered_reports") == 0
    assert_guarded(engine, door)


def assert_one_exposition(url: str, accept: str, *, keyed: bool = True) -> None:
    """One scrape as Prometheus asks it: one exposition that both parsers (and promtool) read."""
    key = {"Authorization": f"Bearer {KEY}"} if keyed else {}
    answer = scrape(url, keyed=keyed, Accept=accept, **key)
    assert answer.status_code == 200, answer.text
    content_type = answer.headers["content-type"]
    text = answer.text
    eofs = [line for line in text.splitlines() if line == "# EOF"]
    if content_type.startswith(OPENMETRICS):
        assert eofs == ["# EOF"], f"{len(eofs)} '# EOF' lines in one exposition"
        assert text.endswith("# EOF\n"), "data after # EOF"
        families = list(openmetrics_parser.text_string_to_metric_families(text))
        # The text parser reads it too (it takes `# EOF` for a comment).
        assert list(text_string_to_metric_families(text))
    else:
        assert content_type.startswith("text/plain"), content_type
        assert eofs == []
        families = list(text_string_to_metric_families(text))
    names = [family.name for family in families]
    assert names
    assert len(names) == len(set(names)), f"a family twice: {sorted(names)}"
    assert all(family.documentation for family in families)
    promtool = shutil.which("promtool")
    # `promtool check metrics` reads the text format: an OpenMetrics answer's counters (HELP
    # under the name without `_total`) would be linted as having no HELP (promtool 2.42).
    if promtool is not None and not content_type.startswith(OPENMETRICS):
        checked = subprocess.run(
            [promtool, "check", "metrics"],
            input=text,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_both_endpoints_answer_each_prometheus_version_with_one_exposition(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COOP_KICK", "datagram")  # the service's daemon delivers, no drainer
    door = spawn_door(harness.env(CHIEF_METRICS_PORT="0"))
    engine = ServeProcess(harness.folder, harness.env()).start()  # to <folder>/door.sock
    try:
        # A delivered row: every family of the engine's registries carries a sample.
        outbox.notify("line 1", actor="me", db=str(harness.folder / "coop.db"))
        wait_until_sync(
            lambda: value(samples(engine.metrics_url), "coop_outbox_deliveries_total") == 1,
            timeout_s=TIMEOUT_S,
            what="the row delivered",
        )
        for version, accept in PROMETHEUS_ACCEPT.items():
            for url in (engine.metrics_url, door.metrics_base()):
                try:
                    assert_one_exposition(url, accept, keyed=url == engine.url)
                except AssertionError as exc:
                    where = "engine" if url == engine.metrics_url else "door"
                    raise AssertionError(f"Prometheus {version}, the {where}: {exc}") from None
    finally:
        engine.stop_quietly()
