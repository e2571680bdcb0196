"""Nobody can stand in for `coop serve`: after a cutover the ledger's every write goes to the
owner service with the credential that commands the whole ledger, so while the service is down
(a restart, an upgrade, a crash) another local user's process must not be able to receive it.

The squat, with real processes: the emulator, the door and `coop serve` over one private data
folder; `coop cutover`; `coop serve` stopped; a throwaway user listens on 127.0.0.1:8764 (the
service's old default port) and on the port this service last held, and tries to create its
socket path. Then `coop list`, `coop todo add`, `coop status` and the owner's `/status` on the
phone (the door's link to the ledger) run: the squatter receives no byte, no credential, no
verb is answered, and each client says in one line that the service is not running.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from chief.phone.commands_text import NOT_RUNNING
from tests.support.phone import EmulatorOwner
from tests.support.phone_stack import make_stack, start
from tests.support.procs import coop, lasting_port, write_key
from tests.support.squatter import Squatter, root_reason, throwaway_user
from tests.support.stack import CHAT_ID, Stack

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(root_reason() is not None, reason=str(root_reason())),
]

OLD_DEFAULT_PORT = 8764
KEY = "squat-service-key-" + secrets.token_hex(8)
OWNER_ID = int(CHAT_ID)
ANSWER_S = 10.0


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    folder = tmp_path / "d"
    folder.mkdir(mode=0o700)
    stack = make_stack(folder)
    # A key of this test's own (every stack shares SERVICE_KEY), and /metrics on a port below
    # the ephemeral range: no other test's traffic can be mistaken for these clients'.
    write_key(stack.key_file, KEY)
    stack.engine.env["COOP_METRICS_PORT"] = str(lasting_port())
    try:
        start(stack)
        yield stack
    finally:
        stack.close()


def _one_line_not_running(what: str, stderr: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"{what}: {stderr!r}"
    assert "not running" in lines[0], f"{what}: {stderr!r}"


def test_a_squatter_on_the_old_port_and_the_socket_path_gets_nothing(stack: Stack) -> None:
    env = stack.env()
    cut = coop("cutover", env=env, inherit=False)  # the service's own socket, by default
    assert cut.returncode == 0, cut.stderr
    assert coop("todo", "add", "before the stop", env=env, inherit=False).returncode == 0
    credential = Path(str(stack.coop_db) + ".owner.key").read_text().strip()
    with EmulatorOwner(stack.emulator.url) as owner:
        # The ordinary path first: a routed verb answered, the phone's summary over the link.
        assert "before the stop" in coop("list", env=env, inherit=False).stdout
        assert _phone_status(owner).startswith("Open: 1 todo, 0 requests.")
        # The port it held last (its /metrics now; the whole app on main) and the old default.
        held = urlsplit(stack.engine.metrics_url or stack.engine.url).port
        old_ports = sorted({OLD_DEFAULT_PORT, *([held] if held else [])})
        assert stack.engine.terminate() == 0
        with (
            throwaway_user() as user,
            Squatter(user, ports=old_ports, socket_path=stack.folder / "service.sock") as squatter,
        ):
            assert squatter.socket_attempt.startswith("refused"), squatter.socket_attempt
            assert held is None or held in squatter.listening, squatter.listening
            listed = coop("list", env=env, inherit=False)
            added = coop("todo", "add", "while squatted", env=env, inherit=False)
            status = coop("status", env=env, inherit=False)
            answer = _phone_status(owner)
            received = squatter.received()
    sent = b"".join(received.values()).decode("latin-1")
    assert credential not in sent
    assert KEY not in sent
    assert received == {}, f"the squatter received {received!r}"
    for what, done in (("coop list", listed), ("coop todo add", added), ("coop status", status)):
        assert done.returncode != 0, f"{what} answered: {done.stdout}"
        _one_line_not_running(what, done.stderr)
    assert answer.startswith(NOT_RUNNING), answer
    # Nothing was written while the service was down: the ledger holds the first todo only.
    stack.engine.start()
    stack.engine.wait_event("notifier.daemon.started")
    listed_after = coop("list", env=env, inherit=False)
    assert listed_after.returncode == 0, listed_after.stderr
    assert "before the stop" in listed_after.stdout
    assert "while squatted" not in listed_after.stdout


def _phone_status(owner: EmulatorOwner) -> str:
    """The owner's `/status` on the phone: the bot's answer (the door asks the ledger)."""
    before = len(owner.messages())
    owner.text(OWNER_ID, OWNER_ID, "/status")
    return str(
        owner.wait_for(
            lambda _: [m for m in owner.messages()[before:] if m["chat_id"] == OWNER_ID],
            ANSWER_S,
            "the phone's /status answered",
        )[0]["text"]
    )
