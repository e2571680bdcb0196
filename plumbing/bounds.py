"""The bounds of a request's nag fields, written once: the engine files a request within them
(`engine.lifecycle`, `engine.config`) and the door refuses, where the value enters, any ask past
them (`chief.door.router`), each a 422 naming the field. A door that took `remind.max:
1000000000` would ring a billion times what the engine never files.

    MAX_WAIT_S       the longest `--deadline` or `--remind` interval: a year and a day, so a
                     deadline is at most this far ahead of the moment it is filed, and the door
                     sees it no earlier than that
    MIN_REMIND_S     `--remind` rings no more often than this
    MAX_REMIND_MAX   the most reminders one ask rings (`COOP_REMIND_MAX`, 1 to this)
"""

from __future__ import annotations

MAX_WAIT_S = 366 * 86400
MIN_REMIND_S = 1
MAX_REMIND_MAX = 100
