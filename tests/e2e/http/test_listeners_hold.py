"""No client swells a service or starves another, on the real listeners of the real processes
as an operator runs them (issue 32, item 3): the emulator, the door (`chief serve`, on
`<COOP_HOME>/door.sock`, `/metrics` on TCP) and `coop serve` after `coop cutover` (on
`<COOP_HOME>/service.sock`, `/metrics` on TCP, its notifier daemon delivering to the door), one
stack for the module.

- A client that pipelines keyless requests and never reads an answer (`tests.support.pipeliner`,
  on a 404 path and, where the listener has one, a JSON POST route), against all five listeners
  at once for `PIPELINE_S`: each process's resident set (VmRSS, from /proc) grows by at most
  `GROWTH_BOUND_MB`, and every listener answers a real request afterwards. Before the gate's
  flow control, `coop serve` grew from 299 MB to 2.2 GB in 16 s this way, the door from 74 to
  868 MB in 6 s.
- The churn flood (`tests.support.gate_flood`: 200 kept-alive connections each asking every
  3 s, new connections at up to 600 a second) against `coop serve`'s socket and the door's at
  once, while the CLI runs `coop list` and `coop todo add`/`done` one after the other: every
  call exits 0, the notifier defers nothing, and every `done` reaches the Chief. The delivery
  latency (the outbox row's commit to the Chief's line) is printed; only a bound that a real
  starvation breaks (the gate's request deadline) is asserted. Before the gate's fairer
  eviction, 13 of 40 `coop list` and 5 of 15 `coop todo done` failed beside this flood, the
  notifier deferred with `Server disconnected`, and a delivery took 9.7 s.
"""

from __future__ import annotations

import re
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime

import httpx
import pytest

from plumbing.http.gate import REQUEST_DEADLINE_S
from tests.support.procs import Service, child_env, coop, memory_kb, socket_client
from tests.support.stack import BOT_TOKEN, NOTIFY_PATH, Stack
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: Without flow control a listener grew by 80-200 MB a second (the issue ran 15 s), so 5 s
#: shows it 40 times over the bound; the window is shared by the five listeners (one run).
PIPELINE_S = 5.0
GROWTH_BOUND_MB = 10.0
WARM_REQUESTS = 20
#: Long enough for every CLI call below on a loaded machine; the flood is stopped once they end.
FLOOD_S = 120.0
#: Before the gate's fairer eviction a third of the calls failed beside the flood (13 of 40
#: lists, 5 of 15 dones): 20 and 8 all passing by chance under that bug is under 1 in 50,000.
LISTS = 20
DONES = 8
CHILD_TIMEOUT_S = 60.0
DELIVERY_TIMEOUT_S = 30.0
#: Deferral, outage and drain-failure events of the notifier (notifier.worker, notifier.daemon).
DEFERRALS = ("outbox.deferred", "notifier.door.unreachable", "notifier.daemon.drain_failed")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The emulator, the door with its /metrics listener, and `coop serve` after a cutover (the
    CLI routes to it)."""
    stack = Stack(tmp_path_factory.mktemp("hold"), door_env={"CHIEF_METRICS_PORT": "0"})
    try:
        stack.start()
        done = coop("cutover", env=stack.env(), inherit=False)
        assert done.returncode == 0, done.stderr
        yield stack
    finally:
        stack.close()


@dataclass(frozen=True)
class Listener:
    """One real listener: its process, where it listens, the routes a stranger floods."""

    name: str
    process: Service
    target: list[str]  # the pipeliner's `--unix PATH` or `--port PORT`
    client: Callable[[], httpx.Client]
    post_json: str | None
    answers: Callable[[], bool]  # a real request, answered


def _tcp(port: int) -> Callable[[], httpx.Client]:
    return lambda: httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10.0, trust_env=False)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _listeners(stack: Stack) -> list[Listener]:
    door_metrics = int(stack.door.wait_event("door.metrics_listening")["port"])
    engine_metrics = _port(stack.engine.metrics_url)
    emulator = _port(stack.emulator.url)
    engine_socket = stack.engine.socket_path

    def scraped(port: int) -> Callable[[], bool]:
        def scrape() -> bool:
            with _tcp(port)() as client:
                return client.get("/metrics").status_code == 200

        return scrape

    return [
        Listener(
            "door", stack.door, ["--unix", str(stack.door_socket)],
            lambda: socket_client(stack.door_socket), NOTIFY_PATH,
            lambda: bool(stack.door_status()),
        ),
        Listener(
            "door /metrics", stack.door, ["--port", str(door_metrics)], _tcp(door_metrics),
            None, scraped(door_metrics),
        ),
        Listener(
            "coop serve", stack.engine, ["--unix", engine_socket],
            lambda: socket_client(engine_socket), "/compat/call",
            lambda: coop("list", env=stack.env(), inherit=False).returncode == 0,
        ),
        Listener(
            "coop serve /metrics", stack.engine, ["--port", str(engine_metrics)],
            _tcp(engine_metrics), None, scraped(engine_metrics),
        ),
        Listener(
            # A wrong token: the stranger holds none (the right one would store each message).
            "emulator", stack.emulator, ["--port", str(emulator)], _tcp(emulator),
            f"/bot{BOT_TOKEN}x/sendMessage", lambda: bool(stack.telegram_calls()),
        ),
    ]  # fmt: skip


def _rss_mb(process: Service) -> float:
    return memory_kb(process.pid)["VmRSS"] / 1024


def _warm(listener: Listener) -> None:
    """The flooded routes' code loaded and their first allocations made before `before`."""
    with listener.client() as client:
        for _ in range(WARM_REQUESTS):
            client.get("/nowhere")
            if listener.post_json:
                client.post(listener.post_json, json={"a": 1})


def test_a_client_that_never_reads_its_answers_swells_no_listener(stack: Stack) -> None:
    listeners = _listeners(stack)
    for listener in listeners:
        _warm(listener)
    processes = {listener.process.name: listener.process for listener in listeners}
    before = {name: _rss_mb(process) for name, process in processes.items()}
    growth = dict.fromkeys(processes, 0.0)
    floods = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.pipeliner",
                *listener.target,
                f"--seconds={PIPELINE_S}",
                "--get=/nowhere",
                *([f"--post-json={listener.post_json}"] if listener.post_json else []),
            ],
            stdout=subprocess.PIPE,
            env=child_env(),
            text=True,
        )
        for listener in listeners
    ]
    until = time.monotonic() + PIPELINE_S + CHILD_TIMEOUT_S
    try:
        while any(flood.poll() is None for flood in floods) and time.monotonic() < until:
            for name, process in processes.items():
                growth[name] = max(growth[name], _rss_mb(process) - before[name])
            time.sleep(0.2)  # a sampling period, not a wait for an event
        sent = {
            listener.name: flood.communicate(timeout=CHILD_TIMEOUT_S)[0].strip()
            for listener, flood in zip(listeners, floods, strict=True)
        }
    finally:
        for flood in floods:
            flood.kill()
            flood.wait()
    print(f"\npipelined for {PIPELINE_S:g} s: {sent}")
    print("RSS growth (MB): " + ", ".join(f"{n} {g:+.1f}" for n, g in growth.items()))
    for name, line in sent.items():
        assert int(line.split()[1].split("=")[1]) > 100_000, (name, line)  # a flood was sent
    assert all(g <= GROWTH_BOUND_MB for g in growth.values()), growth
    answered = {listener.name: listener.answers() for listener in listeners}
    assert all(answered.values()), answered


# -- the churn flood beside the notifier and the CLI ---------------------------------------------


def _coop(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return coop(*args, env=stack.env(), inherit=False)


def _landed(stack: Stack) -> dict[str, float]:
    """The Chief's coop lines: text -> when it landed (chief.db)."""
    with closing(sqlite3.connect(stack.chief_db, timeout=10.0)) as conn:
        rows = conn.execute("SELECT content, created_at FROM messages WHERE turn_kind = 'coop'")
        return {text: datetime.fromisoformat(at).timestamp() for text, at in rows}


def _committed(stack: Stack) -> dict[str, float]:
    """The ledger's outbox rows: text -> when the row was committed (coop.db)."""
    with closing(sqlite3.connect(stack.coop_db, timeout=10.0)) as conn:
        rows = conn.execute("SELECT text, created_at FROM coop_outbox")
        return {text: datetime.fromisoformat(at).timestamp() for text, at in rows}


def test_the_churn_flood_fails_no_cli_call_and_defers_no_delivery(stack: Stack) -> None:
    deferred_before = sum(len(stack.engine.events(event)) for event in DEFERRALS)
    floods = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.gate_flood",
                "--unix",
                str(path),
                f"--seconds={FLOOD_S}",
            ],
            stdout=subprocess.PIPE,
            env=child_env(),
            text=True,
        )
        for path in (stack.engine.socket_path, stack.door_socket)
    ]
    failed: list[str] = []
    titles: list[str] = []

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = _coop(stack, *args)
        if done.returncode != 0:
            failed.append(f"coop {' '.join(args)}: {done.returncode} {done.stderr.strip()}")
        return done

    try:
        for n in range(LISTS):
            run("list")
            if (n + 1) * DONES // LISTS > n * DONES // LISTS:  # DONES of them, spread
                titles.append(f"churn {n}")
                added = run("todo", "add", titles[-1])
                if added.returncode == 0:
                    run("todo", "done", str(_item_id(added.stdout)))
        still_flooding = [flood.poll() is None for flood in floods]
    finally:
        for flood in floods:
            flood.terminate()
    opened = [int(flood.communicate(timeout=CHILD_TIMEOUT_S)[0].split("=")[1]) for flood in floods]
    print(f"\nflood connections (coop serve, door): {opened}")
    assert still_flooding == [True, True]  # every call ran beside both floods
    assert all(n > 4 * 200 for n in opened), opened  # more than the cap, several times over
    assert failed == []
    assert len(titles) == DONES
    deferred = sum(len(stack.engine.events(event)) for event in DEFERRALS) - deferred_before
    assert deferred == 0, [stack.engine.events(event) for event in DEFERRALS]
    texts = {
        text: at
        for text, at in _committed(stack).items()
        if any(text.endswith(f": {title}") for title in titles)
    }
    assert len(texts) == DONES, texts

    def all_landed() -> dict[str, float] | None:
        found = _landed(stack)
        return found if set(texts) <= set(found) else None

    landed = wait_until_sync(
        all_landed,
        timeout_s=DELIVERY_TIMEOUT_S,
        what="every done to reach the Chief",
    )
    latencies = sorted(landed[text] - at for text, at in texts.items())
    print(
        f"delivery beside the flood (commit -> the Chief's line, {len(latencies)} rows): "
        f"p50 {statistics.median(latencies) * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
    )
    # Only a starvation breaks this: a delivery that waited out the gate's request deadline.
    assert latencies[-1] < REQUEST_DEADLINE_S, latencies


def _item_id(stdout: str) -> int:
    """The id in `todo #N added`."""
    found = re.search(r"#(\d+)", stdout)
    assert found, stdout
    return int(found[1])
