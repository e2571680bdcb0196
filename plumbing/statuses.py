"""An HTTP status as a person reads it, `502 Bad Gateway`, written once: the notifier's last
error of a row the door refused (its client reads it at the seam, so its pure outcome stays
free of `http`), and the door's words for a Bot API failure. Standard library only: the
phrases are `http.HTTPStatus`'s.
"""

from __future__ import annotations

from http import HTTPStatus


def status_phrase(status: int) -> str:
    """`Bad Gateway` for 502; "" for a status HTTP does not name."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def status_words(status: int) -> str:
    """`502 Bad Gateway`: the status with its phrase (the number alone for one HTTP does not
    name)."""
    phrase = status_phrase(status)
    return f"{status} {phrase}" if phrase else str(status)
