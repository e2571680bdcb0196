"""`ops/await-listening`, the door's line in ops/Procfile: `ops/run` starts the emulator and the
door together, and a door that made its first Telegram call before the emulator listened warned
three times in an ordinary session (the README quickstart's test met it on a loaded machine).
Real processes: the command runs only once something accepts at the address, at once where the
address is empty, and a stop during the wait runs nothing and exits 0."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.procs import free_port
from tests.support.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parents[3]
AWAIT = ROOT / "ops" / "await-listening"
WAIT_S = 20.0
# A stretch in which the command must not run while nothing listens (a measured window, not a
# wait for an event: the event is that nothing happens).
QUIET_S = 0.5


def start(where: str, marker: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('ran')"]
    return subprocess.Popen(
        [sys.executable, str(AWAIT), where, *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_command_runs_only_once_the_address_listens(tmp_path: Path) -> None:
    port = free_port()
    marker = tmp_path / "ran"
    proc = start(f"127.0.0.1:{port}", marker)
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=QUIET_S)
        assert proc.returncode is None, "ended before anything listened"
        assert not marker.exists(), "ran before anything listened"
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen()
            _, err = proc.communicate(timeout=WAIT_S)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert marker.read_text() == "ran"
    assert err == ""


def test_an_empty_address_runs_the_command_at_once(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    proc = start("", marker)
    _, err = proc.communicate(timeout=WAIT_S)
    assert (proc.returncode, err) == (0, "")
    assert marker.read_text() == "ran"


def test_a_stop_during_the_wait_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    proc = start(f"127.0.0.1:{free_port()}", marker)
    try:
        # The wait has begun once the interpreter holds its SIGTERM handler.
        wait_until_sync(
            lambda: (
                "SigCgt" in (status := Path(f"/proc/{proc.pid}/status").read_text())
                and int(status.split("SigCgt:")[1].split()[0], 16) & (1 << (signal.SIGTERM - 1))
            ),
            timeout_s=WAIT_S,
            what="the wait's SIGTERM handler",
        )
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WAIT_S)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (0, "")
    assert not marker.exists()


def test_a_wrong_address_or_command_is_one_line(tmp_path: Path) -> None:
    for argv, code, words in [
        (["nonsense", "true"], 2, "'nonsense' is not HOST:PORT"),
        ([], 2, "usage: ops/await-listening HOST:PORT COMMAND"),
        (["", str(tmp_path / "no-such-command")], 127, "cannot run"),
    ]:
        done = subprocess.run(
            [sys.executable, str(AWAIT), *argv], capture_output=True, text=True, timeout=WAIT_S
        )
        assert done.returncode == code, done
        assert words in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
