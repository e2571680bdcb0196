"""`coop status` on the ladder of urgent reports (issue 35), from the door's status as it is
read (`engine.cli.render.urgent_lines`, `engine.status.urgent_problems`): each report still
ringing is one line with its number, its rung, its next step and how to stop it; an expiry that
reached rung 2 says so in `--check`; a door that says nothing of its ladder (an older door)
reads as before."""

from __future__ import annotations

import time

from engine.cli.render import urgent_lines
from engine.status import urgent_problems


def test_each_ringing_report_is_one_line_with_its_rung_and_how_to_stop_it() -> None:
    door = {
        "urgent": {
            "ringing": [
                {"key": "d-1", "number": 7, "text": "URGENT: the freezer is warm", "rings": 4,
                 "rung": 1, "next_step": "rung 2: the second person",
                 "next_step_at": time.time() + 300},
                {"key": "d-2", "number": 8, "text": "URGENT: water", "rings": 12, "rung": 2,
                 "next_step": "expiry", "next_step_at": time.time() + 60},
            ]
        }
    }  # fmt: skip
    first, second = urgent_lines(door)
    assert first.startswith("urgent: #7 ringing at rung 1 (ring 4), next: rung 2: the second")
    assert first.endswith("— URGENT: the freezer is warm (chief ack 7 stops it)")
    assert second.startswith("urgent: #8 ringing at rung 2 (ring 12), next: expiry in ")
    assert urgent_lines({}) == []
    assert urgent_lines({"urgent": {"ringing": "nonsense"}}) == []


def test_an_expiry_names_how_far_up_its_ladder_it_rang() -> None:
    door = {
        "urgent": {
            "expired_unacknowledged": [
                {"key": "d-1", "text": "URGENT: a", "rung": 2},
                {"key": "d-2", "text": "URGENT: b", "rung": 1},
                {"key": "d-3", "text": "URGENT: c"},  # an older door: no rung
            ]
        }
    }
    assert urgent_problems(door) == [
        "urgent report d-1 went unacknowledged through rung 2 of its ladder: URGENT: a",
        "urgent report d-2 went unacknowledged: URGENT: b",
        "urgent report d-3 went unacknowledged: URGENT: c",
    ]
