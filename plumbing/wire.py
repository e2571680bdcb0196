"""What the engine's side and the Chief's side say to each other over HTTP, written once.

    SERVICE_KEY_HEADER   the header that carries the shared service key: the notifier and
                         `coop status` to the door, the door's phone to `coop serve`
    NOTIFY_PATH          the door's notify route; NOTIFY_BATCH_PATH its batch route beside it
    STATUS_PATH          the door's status route (`coop status`)
    MAX_TEXT_CHARS       the longest notification or report text: the engine cuts to it when
                         it writes, the door and `chief report` refuse longer
    CLIENT_TIMEOUT_S     the engine's client's bound on one door call (`COOP_CLIENT_TIMEOUT_S`'s
                         default): the door must answer inside it, so it checks its Telegram
                         deadline against the same setting

Standard library only (nothing at all): the `coop` CLI's cold path loads it.
"""

from __future__ import annotations

SERVICE_KEY_HEADER = "X-Coop-Service-Key"
NOTIFY_PATH = "/api/coop/engine/notify"
#: The batch route is the notify route with "-batch" appended, so a client that knows one
#: finds the other on the same door.
NOTIFY_BATCH_PATH = NOTIFY_PATH + "-batch"
STATUS_PATH = "/api/coop/engine/status"
MAX_TEXT_CHARS = 4000
CLIENT_TIMEOUT_S = 15.0
