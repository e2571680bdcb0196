"""The README's second quickstart, word for word, after the first one's steps, against a stack
started by the README's run command (`ops/run`, real processes under honcho): a request to the
owner rings with its buttons, a press on the emulator closes it by the owner, the toast says so,
and nothing rings back."""

from __future__ import annotations

import json
import re
import signal

from tests.e2e.ops.test_ops_quickstart import ROOT, STOP_TIMEOUT_S, run_shell, stack
from tests.support.waiting import wait_until_sync

__all__ = ["stack"]  # the first quickstart's fixture: ops/run on ports of the test's own

WAIT_S = 20.0


def readme_block(heading: str) -> list[str]:
    """The shell lines of the README's sh block under `heading`, continuations joined."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", readme.split(heading, 1)[1], re.S)
    assert block, f"no sh block under {heading!r}"
    return [line for line in block.group(1).replace("\\\n", " ").splitlines() if line.strip()]


def test_readme_phone_quickstart_closes_the_request_from_the_emulator(stack) -> None:
    env, ports, proc, _ = stack
    port = ports["COOP_EMULATOR_PORT"]
    first = readme_block("### Quickstart: a finished todo reaches the owner")
    for line in [line for line in first if line.startswith("coop ")]:
        assert run_shell(line, env).returncode == 0, line
    messages_url = f"http://127.0.0.1:{port}/emulator/messages"

    def messages() -> list[dict]:
        return json.loads(run_shell(f"curl -s {messages_url}", env).stdout)["messages"]

    wait_until_sync(lambda: len(messages()) == 1, timeout_s=WAIT_S, what="the todo rung")
    steps = readme_block("### Quickstart: decide a request")
    add, listing, press, show, toasts = (line.replace("8766", port) for line in steps)
    added = run_shell(add, env)
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("request #1 ")
    wait_until_sync(lambda: len(messages()) == 2, timeout_s=WAIT_S, what="the ask rung")
    ask = json.loads(run_shell(listing, env).stdout)["messages"][1]
    assert ask["message_id"] == 2
    assert [b["text"] for b in ask["reply_markup"]["inline_keyboard"][0]] == ["approve", "decline"]
    pressed = run_shell(press, env)
    assert '"callback_query_id"' in pressed.stdout, pressed.stdout + pressed.stderr

    def closed() -> str:
        out = run_shell(show, env).stdout
        return out if "closed" in out else ""

    assert "approve" in wait_until_sync(closed, timeout_s=WAIT_S, what="request #1 closed")
    answered = wait_until_sync(
        lambda: json.loads(run_shell(toasts, env).stdout)["callback_answers"],
        timeout_s=WAIT_S,
        what="the toast",
    )
    assert [a["text"] for a in answered] == ["Done: request #1 closed with approve."]
    assert len(messages()) == 2  # nothing rang back
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=STOP_TIMEOUT_S) == 128 + signal.SIGTERM
