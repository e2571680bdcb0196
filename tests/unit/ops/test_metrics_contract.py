"""The metrics' contract: names and units follow Prometheus conventions, every metric has HELP
text, and the example scrape config and alert rules in ops/prometheus name metrics that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from chief.door.metrics import DoorMetrics
from engine.metrics import OutboxCollector
from engine.store import open_connection
from notifier.metrics import NotifierMetrics, deferral_reason
from notifier.outcome import DoorReply

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS = ROOT / "ops" / "prometheus"
NAME = re.compile(r"^coop_[a-z_]+$")


def exposed(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Every family the three sources expose: name -> (type, help)."""
    open_connection(tmp_path / "coop.db").close()
    engine = CollectorRegistry()
    engine.register(OutboxCollector(tmp_path / "coop.db"))  # type: ignore[arg-type]
    families: dict[str, tuple[str, str]] = {}
    from prometheus_client.exposition import generate_latest

    for registry in (engine, DoorMetrics().registry, NotifierMetrics().registry):
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            if not family.name.endswith("_created"):  # prometheus_client's own start times
                families[family.name] = (family.type, family.documentation)
    return families


def test_metric_names_follow_prometheus_conventions(tmp_path: Path) -> None:
    families = exposed(tmp_path)
    # coop_telegram_strangers (the door's phone) and coop_telegram_answers_pending (its answers);
    # coop_urgent_rings, _acknowledgements and _expiries (urgent reports); coop_escalations
    # (their ladder); coop_fallback_sends (its fallback channel)
    assert len(families) == 24
    for name, (kind, help_text) in families.items():
        assert NAME.match(name), name
        assert help_text.strip(), f"{name} has no HELP"
        if kind == "counter":
            # The parser strips `_total` from a counter family's name; its samples carry it.
            assert not name.endswith("_total"), name
        assert not re.search(r"_(ms|milliseconds|minutes)\b", name), f"{name}: base units only"


def test_the_alert_rules_and_scrape_config_name_real_metrics(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    families = exposed(tmp_path)
    sample_names = set(families)
    for name, (kind, _) in families.items():
        if kind == "counter":
            sample_names.add(name + "_total")
        if kind == "histogram":
            sample_names |= {name + "_bucket", name + "_count", name + "_sum"}
    rules = yaml.safe_load((PROMETHEUS / "coop-alerts.yml").read_text())
    alerts = {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}
    assert set(alerts) == {
        "CoopOutboxRowStuck",
        "CoopDeferralsRising",
        "CoopTelegramQueueStuck",
        "CoopUrgentUnacknowledged",
        "CoopFallbackFailing",
    }
    # The fallback channel failing while Telegram is down: the owner hears of neither.
    assert 'coop_fallback_sends_total{result="failed"}' in alerts["CoopFallbackFailing"]["expr"]
    assert "coop_outbox_oldest_pending_age_seconds > 600" in alerts["CoopOutboxRowStuck"]["expr"]
    assert alerts["CoopDeferralsRising"]["for"] == "15m"
    # A Telegram outage: the door's queue, whose rows the outbox already counts as delivered.
    telegram = alerts["CoopTelegramQueueStuck"]["expr"]
    assert "coop_telegram_queue_oldest_age_seconds > 600" in telegram
    assert "coop_telegram_queue_depth > 0" in telegram
    assert "docs/operations.md" in alerts["CoopTelegramQueueStuck"]["annotations"]["description"]
    for rule in alerts.values():
        for used in re.findall(r"coop_[a-z_]+", rule["expr"]):
            assert used in sample_names, f"{rule['alert']} uses {used}, which is not exposed"
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert config["rule_files"] == ["coop-alerts.yml"]
    targets = {
        job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]
    }
    assert targets == {"coop-engine": ["127.0.0.1:8764"], "coop-door": ["127.0.0.1:8765"]}
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    # Neither /metrics takes a key: a key sent to a TCP port would reach whoever holds the port
    # while the service is down.
    assert "authorization" not in jobs["coop-engine"]
    assert "authorization" not in jobs["coop-door"]


def test_promtool_accepts_the_alert_rules() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on this machine")
    result = subprocess.run(
        [promtool, "check", "rules", str(PROMETHEUS / "coop-alerts.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (DoorReply(error="timed out"), "no_answer"),
        (DoorReply(status=200, body=b"[]"), "malformed_answer"),
        (
            DoorReply(status=503, body=b'{"detail": "notification_channel_unavailable"}'),
            "notification_channel_unavailable",
        ),
        (DoorReply(status=503, body=b'{"detail": "something new"}'), "http_503"),
        (DoorReply(status=503, body=b"\xff"), "http_503"),
        (DoorReply(status=401, body=b'{"detail": "service_key_invalid"}'), "http_401"),
    ],
)
def test_deferral_reasons_are_a_bounded_set(reply: DoorReply, reason: str) -> None:
    assert deferral_reason(reply) == reason
