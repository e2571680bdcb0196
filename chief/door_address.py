"""The running door as a short client process reaches it (`chief report`, `chief ack`): its
Unix socket and the service key as the door itself reads them (`DoorConfig`: a key file not this
user's alone is refused there, never sent), or why this process's settings cannot knock."""

from __future__ import annotations

import os

from chief.cron import DoorAddress, DoorUnusable
from chief.door.config import DoorConfig
from chief.errors import ChiefConfigError, DoorError
from plumbing.door import retired_setting, socket_origin
from plumbing.wire import SERVICE_KEY_HEADER


def door_address() -> DoorAddress | DoorUnusable:
    """The running door's socket and its key, or why the door's settings are not usable here
    (then only this process can land the line, when no door holds the Chief; when one does, the
    command says why it could not hand it the line). A retired setting (`CHIEF_PORT`, ...) is
    refused: ChiefConfigError names what to set instead."""
    retired = retired_setting(os.environ)
    if retired is not None:
        raise ChiefConfigError(retired)
    try:
        # The key as the door read it (`read_service_key`): a file not this user's alone is
        # refused there, never sent.
        door = DoorConfig.from_env()
    except DoorError as exc:
        return DoorUnusable(str(exc))
    try:
        door.service_key.encode("utf-8")  # a key that is not UTF-8 is no header to send
    except UnicodeEncodeError:
        return DoorUnusable("the service key is not UTF-8 text (COOP_SERVICE_KEY_FILE)")
    return DoorAddress(
        str(door.socket_path), door.service_key, SERVICE_KEY_HEADER, socket_origin(os.environ)
    )
