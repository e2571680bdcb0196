"""Each log line leaves a process in one write, so processes sharing one stderr never splice lines.

A kick-spawned drainer, `coop serve`'s daemon and the CLI can share one stderr (a terminal, a
journal, a test's pipe). With Python's stderr unbuffered (`PYTHONUNBUFFERED=1`, as some hosts
set it), `print(line)` writes the text and its newline in two calls, and another process's line
lands between them: two JSON objects on one line, neither readable.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import structlog

from plumbing.logs import configure_logging, emit_plain

WRITERS = 4
LINES_EACH = 400


class _Writes(io.RawIOBase):
    """A raw stream that keeps each write call whole (the operating system's view of them)."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.calls.append(bytes(data))
        return len(data)


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


def _unbuffered_stderr(monkeypatch: pytest.MonkeyPatch) -> _Writes:
    raw = _Writes()
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(raw, write_through=True))
    return raw


def test_a_structlog_line_is_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = _unbuffered_stderr(monkeypatch)
    configure_logging(json=True)
    structlog.get_logger("t").info("door.listening", port=1)
    structlog.get_logger("t").warning("door.phone_failed", error="x")
    assert [json.loads(call)["event"] for call in raw.calls] == [
        "door.listening",
        "door.phone_failed",
    ]
    assert all(call.endswith(b"\n") and call.count(b"\n") == 1 for call in raw.calls)


def test_a_plain_line_is_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = _unbuffered_stderr(monkeypatch)
    emit_plain("notifier.exit", outcome="lock_busy")
    (call,) = raw.calls
    assert json.loads(call)["event"] == "notifier.exit"
    assert call.endswith(b"\n")


_WRITER = """
import os, sys
import structlog
from plumbing.logs import configure_logging
configure_logging(json=True)
log = structlog.get_logger("t")
os.read(int(sys.argv[1]), 1)  # every writer starts together
for n in range({lines}):
    log.info("t.line", writer=sys.argv[2], n=n, pad="x" * 200)
"""


def test_processes_sharing_one_unbuffered_stderr_never_splice_lines() -> None:
    go_read, go_write = os.pipe()
    out_read, out_write = os.pipe()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    code = _WRITER.format(lines=LINES_EACH)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(go_read), str(w)],
            stderr=out_write,
            env=env,
            pass_fds=(go_read,),
        )
        for w in range(WRITERS)
    ]
    os.close(out_write)
    os.close(go_read)
    os.write(go_write, b"x" * WRITERS)
    with os.fdopen(out_read, "rb") as out:
        lines = out.read().splitlines()
    os.close(go_write)
    assert [p.wait(timeout=60) for p in procs] == [0] * WRITERS
    events = [json.loads(line) for line in lines]  # a spliced line fails to parse here
    assert len(events) == WRITERS * LINES_EACH
