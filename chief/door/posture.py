"""The security posture seam: where the door learns whether the household lets it ring.

The posture is one of `normal` (the door works), `blocked` or `locked` (the door refuses).
A source that cannot say answers `PostureUnavailable`, and the door refuses with 503 rather
than guessing. The real source is a JSON file (`{"state": "normal"}`) that the household's
authority rewrites; with no file configured the posture is always `normal`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from chief.errors import PostureUnavailable

PostureState = Literal["normal", "blocked", "locked"]
POSTURE_STATES: frozenset[str] = frozenset({"normal", "blocked", "locked"})
# A posture file is a few bytes; anything larger is not one.
MAX_POSTURE_FILE_BYTES = 4096


class PostureSource(Protocol):
    def read(self) -> PostureState:
        """The current posture, or raise `PostureUnavailable`."""
        ...


@dataclass(frozen=True)
class FixedPosture:
    """A posture that never changes: `normal` when no posture file is configured."""

    state: PostureState = "normal"

    def read(self) -> PostureState:
        return self.state


@dataclass(frozen=True)
class FilePosture:
    """The posture in a JSON file, read on every call so a change applies at once.

    The read is a small local file and stays on the event loop: a thread hop would cost more
    than the read itself.
    """

    path: Path

    def read(self) -> PostureState:
        try:
            with self.path.open("rb") as handle:
                raw = handle.read(MAX_POSTURE_FILE_BYTES + 1)
        except OSError as exc:
            raise PostureUnavailable(
                f"posture file {self.path} cannot be read ({exc.strerror})"
            ) from exc
        return parse_posture(raw, where=str(self.path))


def parse_posture(raw: bytes, *, where: str = "posture") -> PostureState:
    """The state named by a posture document, or raise `PostureUnavailable` saying why."""
    if len(raw) > MAX_POSTURE_FILE_BYTES:
        raise PostureUnavailable(f"{where} is larger than {MAX_POSTURE_FILE_BYTES} bytes")
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PostureUnavailable(f"{where} is not JSON: {exc}") from exc
    state = document.get("state") if isinstance(document, dict) else None
    if not isinstance(state, str) or state not in POSTURE_STATES:
        raise PostureUnavailable(
            f'{where} must be {{"state": "normal" | "blocked" | "locked"}}, got {state!r}'
        )
    return state  # type: ignore[return-value]


def posture_source(path: Path | None) -> PostureSource:
    """The configured source: the file when one is set, else always `normal`."""
    return FilePosture(path) if path is not None else FixedPosture()
