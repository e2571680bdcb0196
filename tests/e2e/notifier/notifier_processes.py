"""Real notifier processes for the e2e tests: their environment, and reading their logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.loopback_door import SERVICE_KEY
from tests.support.procs import REPO, clean_env, write_key


def notifier_env(
    tmp_path: Path, db_path: Path, door_socket: str | Path, **extra: str
) -> dict[str, str]:
    """The environment a daemon, a drainer or a producer runs with (key file written 0600),
    sending to the door at the Unix socket `door_socket`."""
    key_file = tmp_path / "service.key"
    if not key_file.exists():
        write_key(key_file, SERVICE_KEY)
    ours = {
        "COOP_DB": str(db_path),
        "COOP_DOOR_SOCKET": str(door_socket),
        "COOP_SERVICE_KEY_FILE": str(key_file),
        "COOP_CLIENT_TIMEOUT_S": "10",
        "COOP_BACKOFF_BASE_S": "0.05",
        "COOP_BACKOFF_MAX_S": "0.2",
    }
    return clean_env(tmp_path, **(ours | extra))


def start_notifier(args: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "notifier", *args],
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )


def log_events(path: Path) -> list[dict[str, object]]:
    """The JSON log lines in `path` (other lines, if any, are kept as {"raw": line})."""
    if not path.exists():
        return []
    events: list[dict[str, object]] = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"raw": line})
    return events


# One producer process: one row in one transaction, then the kick a `coop` verb does.
PRODUCER = """
import sys
from pathlib import Path
from engine import direct, kick, store
from engine.outbox import enqueue
db = Path(sys.argv[1])
with direct.connection(db) as conn, store.write(conn):
    print(enqueue(conn, "note", sys.argv[2]))
print(kick.kick(db))
"""


def produce(env: dict[str, str], db_path: Path, text: str) -> tuple[int, str]:
    """Run one producer process; the row's id and what its kick did (`sent`, `spawned`)."""
    done = subprocess.run(
        [sys.executable, "-c", PRODUCER, str(db_path), text],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    row_id, how = done.stdout.split()
    return int(row_id), how
