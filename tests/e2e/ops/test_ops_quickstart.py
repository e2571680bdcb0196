"""The README's two quickstarts, word for word, against a stack started by the README's run
command (`ops/run`, real processes under honcho), then a clean stop by SIGTERM: a finished todo
reaches the Master Chief and the emulator; then a request to the owner rings with its buttons, a
press on the emulator closes it by the owner from Telegram, `coop request wait` returns with the
choice, the Chief has the answer as a line, nothing rings back, and `/status` is answered."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from plumbing.http.client import UnixHTTPConnection
from plumbing.wire import SERVICE_KEY_HEADER, STATUS_PATH
from tests.support.procs import free_port
from tests.support.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parents[3]
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
WAIT_S = 20.0
#: A bound on a server closing a quiet kept-alive connection (its deadline is 5 s).
IDLE_CLOSE_BOUND_S = 60.0
TODO_TEXT = "todo #1 done by me: Water the plants\nwatered, the basil too"
TITLE = "Order the bigger bag of dog food, £45?"
ASK_TEXT = f"request #1 from me: {TITLE} (approve / decline)"
ANSWER_LINE = f"request #1 closed by owner: {TITLE}"


def readme_block(heading: str) -> list[str]:
    """The shell lines of the README's sh block under `heading`, continuations joined."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert heading in readme, f"the README has no {heading!r}"
    block = re.search(r"```sh\n(.*?)```", readme.split(heading, 1)[1], re.S)
    assert block, f"no sh block under {heading!r}"
    return [line for line in block.group(1).replace("\\\n", " ").splitlines() if line.strip()]


def quickstart_commands() -> list[str]:
    """The shell lines of the README's first quickstart block."""
    return readme_block("### Quickstart: a finished todo reaches the owner")


@pytest.fixture
def stack(tmp_path: Path):
    ports = {
        "COOP_METRICS_PORT": str(free_port()),
        "CHIEF_METRICS_PORT": str(free_port()),
        "COOP_EMULATOR_PORT": str(free_port()),
    }
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("COOP_", "CHIEF_", "TELEGRAM_"))
    }
    env.update(ports, COOP_HOME=str(tmp_path / "data"))
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(ROOT / "ops" / "run")],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_sync(
            lambda: (
                all(
                    f'"{event}"' in log_path.read_text(errors="replace")
                    for event in ("service.listening", "door.listening", "emulator.listening")
                )
                or proc.poll() is not None
            ),
            timeout_s=STARTUP_TIMEOUT_S,
            what="the three processes to listen",
        )
        assert proc.poll() is None, log_path.read_text(errors="replace")
        yield env, ports, proc, log_path
    finally:
        stop_stack(proc)


def descendants(pid: int) -> list[int]:
    """Every process under `pid`, from /proc (honcho starts each of its processes in a session
    of its own, out of reach of a signal to honcho's group)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def stop_stack(proc: subprocess.Popen[bytes]) -> None:
    """After a test that did not stop the stack itself (a failure): SIGTERM to honcho stops every
    process it started, bounded; a process still there after that is killed by its pid, so a
    failed run leaves nothing running."""
    if proc.poll() is not None:
        return
    started = descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT_S)
    for pid in started:
        with contextlib.suppress(OSError):  # gone already
            if str(ROOT) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                os.kill(pid, signal.SIGKILL)


def run_shell(line: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Each README line runs after `. ops/dev-env`, as in the user's second terminal.
    return subprocess.run(
        ["bash", "-c", f". ops/dev-env && {line}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def run_readme_line(line: str, env: dict[str, str], ports: dict[str, str]) -> str:
    """One README line as written (on the test's own emulator port); it must exit 0."""
    result = run_shell(line.replace("8766", ports["COOP_EMULATOR_PORT"]), env)
    assert result.returncode == 0, (line, result.stdout, result.stderr)
    return result.stdout


def test_readme_quickstarts_todo_then_a_request_decided_from_the_emulator(stack) -> None:
    env, ports, proc, log_path = stack
    the_todo_reaches_the_owner(env, ports)
    a_request_is_decided_from_the_emulator(env, ports)
    a_request_with_a_deadline_and_an_urgent_report(env, ports)
    every_server_closes_its_idle_connections(env, ports)
    proc.send_signal(signal.SIGTERM)  # to honcho, as systemd or a terminal would
    returncode = proc.wait(timeout=STOP_TIMEOUT_S)
    log = log_path.read_text(errors="replace")
    for name in ("telegram.1", "engine.1", "door.1"):
        assert f"{name} stopped (rc=0)" in log, log[-3000:]
    # honcho itself answers a signal with the shell's convention, 128 + SIGTERM.
    assert returncode == 128 + signal.SIGTERM, log[-3000:]
    # An ordinary session gives a person nothing to act on: a warning that is not one teaches
    # them to ignore the next.
    found = alarms(log)
    assert not found, "warnings in an ordinary session:\n" + "\n".join(found)
    misnamed = misnamed_ids(log)
    assert not misnamed, "ids under a name that means another:\n" + "\n".join(misnamed)


def every_server_closes_its_idle_connections(env: dict[str, str], ports: dict[str, str]) -> None:
    """Leave the stack past each server's request deadline: one kept-alive connection to each
    (the emulator, the door, `coop serve`), answered, then left quiet until the server closes
    it. Every connection the stack's own parts left idle before it has been closed by then."""
    home = Path(env["COOP_HOME"])
    key = (home / "service.key").read_text().strip()
    asks: list[tuple[http.client.HTTPConnection, str, dict[str, str]]] = [
        (http.client.HTTPConnection("127.0.0.1", int(ports["COOP_EMULATOR_PORT"]), timeout=WAIT_S),
         "/emulator/messages", {}),
        (UnixHTTPConnection(str(home / "door.sock"), WAIT_S), STATUS_PATH,
         {SERVICE_KEY_HEADER: key}),
        (UnixHTTPConnection(str(home / "service.sock"), WAIT_S), "/status", {}),
    ]  # fmt: skip
    for connection, path, headers in asks:
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 200, (path, answer.status)
    for connection, path, _ in asks:
        assert connection.sock is not None, path
        connection.sock.settimeout(IDLE_CLOSE_BOUND_S)
        assert connection.sock.recv(1) == b"", f"{path}: a byte after the answer"
        connection.close()


#: One name per kind of id in every service's lines: what each must hold.
ID_NAMES = {
    "outbox_id": lambda v: isinstance(v, int),  # the ledger's outbox row
    "delivery_key": lambda v: isinstance(v, str) and v.startswith("d-"),  # the door's key of it
    "chief_message_id": lambda v: isinstance(v, int),
    "telegram_message_id": lambda v: v is None or isinstance(v, int),  # None: not rung
}
#: A bare name that would leave the reader guessing which id it is.
AMBIGUOUS_IDS = frozenset({"message_id", "message_ids", "id"})


def misnamed_ids(log: str) -> list[str]:
    """Every service line whose ids are not under their one name (`outbox_id` an outbox row,
    `delivery_key` the door's key, ...), or under a bare name such as `message_id`."""
    found = []
    for raw in log.splitlines():
        line = SERVICE_LINE.match(raw.strip("\r"))
        if line is None or not line.group(2).startswith("{"):
            continue
        event = json.loads(line.group(2))
        for key, value in event.items():
            name = key.removesuffix("s") if isinstance(value, list) else key
            values = value if isinstance(value, list) else [value]
            fits = ID_NAMES.get(name)
            if key in AMBIGUOUS_IDS or (fits is not None and not all(map(fits, values))):
                found.append(f"{key}={value!r} in {raw}")
    return found


#: honcho's prefix on a service's line: its time, the process name, a bar.
SERVICE_LINE = re.compile(r"^\d\d:\d\d:\d\d ((?:telegram|engine|door)\.\d+)\s*\| (.*)$")


def alarms(log: str) -> list[str]:
    """Every line a service wrote that is a warning or worse, or not one of its log events at
    all (a traceback, a raw error): honcho's own lines aside."""
    found = []
    for raw in log.splitlines():
        line = SERVICE_LINE.match(raw.strip("\r"))
        if line is None:
            continue
        text = line.group(2)
        try:
            level = json.loads(text)["level"]
        except (ValueError, KeyError, TypeError):
            found.append(raw)  # not a structlog line
            continue
        if level not in ("debug", "info"):
            found.append(raw)
    return found


def the_todo_reaches_the_owner(env: dict[str, str], ports: dict[str, str]) -> None:
    lines = quickstart_commands()
    assert lines[0] == ". ops/dev-env"
    outputs = [run_readme_line(line, env, ports) for line in lines[1:]]
    assert outputs[0].strip() == "todo #1 added"
    assert outputs[1].strip() == "todo #1 done; notification #1 queued"

    # The README runs `chief log` and curl right away; delivery is a kick away. Wait on the
    # condition (bounded) rather than trusting the race in a loaded test machine.
    def landed() -> str:
        out = run_shell("chief log", env).stdout
        return out if "Water the plants" in out else ""

    chief_log = wait_until_sync(landed, timeout_s=WAIT_S, what="the line in chief log")
    assert "[coop]" in chief_log
    assert "todo #1 done by me: Water the plants" in chief_log
    curl = next(line for line in lines if line.startswith("curl"))
    messages = json.loads(run_readme_line(curl, env, ports))["messages"]
    assert [m["text"] for m in messages] == [TODO_TEXT]

    status = run_shell("coop status --check", env)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "0 pending, 1 delivered" in status.stdout


def a_request_is_decided_from_the_emulator(env: dict[str, str], ports: dict[str, str]) -> None:
    steps = readme_block("### Quickstart: decide a request from the emulator")
    add, newest, press, wait, chief_log, show, toasts, status, newest_again = steps
    assert newest_again == newest
    assert "message_id" not in press

    def run(line: str) -> str:
        return run_readme_line(line, env, ports)

    assert run(add).strip() == "request #1 added; notification #2 queued"
    shown = wait_until_sync(
        lambda: (out := run(newest)).startswith("request #1 ") and out,
        timeout_s=WAIT_S,
        what="the ask rung, the bot's newest message",
    )
    assert shown.startswith(f"{ASK_TEXT} {{'inline_keyboard': [[{{'callback_data': 'b-")
    assert re.findall(r"'text': '(\w+)'", shown) == ["approve", "decline"]

    pressed = json.loads(run(press))
    assert set(pressed) == {"update_id", "callback_query_id", "data"}
    started = time.monotonic()
    waited = run_shell(wait, env)  # the tap still travels: door, coop serve, the commit's wake
    assert (waited.returncode, waited.stdout) == (0, "request #1 closed by owner: approve\n")
    assert time.monotonic() - started < 10.0

    logged = wait_until_sync(
        lambda: (out := run(chief_log)).count(ANSWER_LINE) == 1 and out,
        timeout_s=WAIT_S,
        what="the owner's answer as a Chief line",
    )
    assert logged.count("[coop]") == 3, logged  # the todo, the ask, the answer: one line each
    shown_request = run(show)
    for part in (
        "[closed]",
        " by owner\n",
        "  summary:  approve\n",
        "choice: approve; via: telegram",
    ):
        assert part in shown_request, shown_request
    answered = json.loads(run(toasts))["callback_answers"]
    assert [a["text"] for a in answered] == ["Done: request #1 closed with approve."]
    nothing_rang_back(env, ports, newest)

    asked = json.loads(run(status))
    assert set(asked) == {"update_id", "message_id"}
    answer = wait_until_sync(
        lambda: (out := run(newest)).startswith("Open: ") and out,
        timeout_s=WAIT_S,
        what="the bot's answer to /status",
    )
    assert answer.startswith("Open: 0 todos, 0 requests.\n"), answer
    assert "Notifications: none waiting." in answer
    assert "Telegram queue: empty." in answer
    assert len(bot_messages(env, ports)) == 3  # the todo, the ask, the /status answer


def a_request_with_a_deadline_and_an_urgent_report(
    env: dict[str, str], ports: dict[str, str]
) -> None:
    """The README's block for a request that cannot wait: as written, both reach the phone
    as it says (the ask with its deadline and buttons, the urgent report with Got it)."""
    add, urgent = readme_block("### When the owner does not answer, or it cannot wait")
    assert run_readme_line(add, env, ports).startswith("request #2 added; notification #")
    assert "queued" in run_readme_line(urgent, env, ports)

    def rung() -> tuple[dict, dict] | None:
        messages = bot_messages(env, ports)
        ask = next((m for m in messages if m["text"].startswith("request #2 ")), None)
        loud = next((m for m in messages if m["text"].startswith("URGENT: The freezer")), None)
        return None if ask is None or loud is None else (ask, loud)

    ask, loud = wait_until_sync(rung, timeout_s=WAIT_S, what="the ask and the urgent report")
    assert re.search(r"if no answer by (\w+ )?18:00: skip", ask["text"]), ask["text"]
    assert re.findall(r"'text': '(\w+)'", str(ask["reply_markup"])) == ["renew", "skip"]
    assert "Got it" in str(loud["reply_markup"])
    assert loud["disable_notification"] is False


def bot_messages(env: dict[str, str], ports: dict[str, str]) -> list[dict]:
    url = f"http://127.0.0.1:{ports['COOP_EMULATOR_PORT']}/emulator/messages"
    return list(json.loads(run_shell(f"curl -s {url}", env).stdout)["messages"])


def nothing_rang_back(env: dict[str, str], ports: dict[str, str], newest: str) -> None:
    """Counted per report: the todo's and the ask's rang once each, the owner's own answer
    not at all (the ask's message was edited instead)."""
    edited = wait_until_sync(
        lambda: (out := run_readme_line(newest, env, ports)).startswith(ASK_TEXT + "\n\n") and out,
        timeout_s=WAIT_S,
        what="the ask edited to its outcome, its buttons gone",
    )
    # Its outcome line is the door's own (`✅ approve (answered from Telegram)`) or the
    # ledger's close row (`request #1 closed by owner: ...`), whichever settled it first.
    outcome = edited[len(ASK_TEXT) + 2 :].rstrip()
    assert outcome in {"✅ approve (answered from Telegram)", f"{ANSWER_LINE}\napprove"}, edited
    assert "inline_keyboard" not in edited
    status = run_shell("coop status --check", env)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "0 pending, 3 delivered" in status.stdout, status.stdout
    assert "2 sent, posture normal, Telegram configured" in status.stdout, status.stdout
    assert "telegram queue: empty" in status.stdout, status.stdout
    assert status.stdout.endswith("verdict: healthy\n"), status.stdout
    messages = bot_messages(env, ports)
    assert [m["message_id"] for m in messages] == [1, 2]
    assert messages[0]["text"] == TODO_TEXT
    assert messages[1]["reply_markup"] is None
    assert len(messages[1]["edits"]) == 1
