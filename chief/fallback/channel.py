"""The Apprise seam: the one module that imports Apprise (`pip install 'coop-notifier[fallback]'`),
and only when a fallback is configured, so a door without one loads nothing of it.

    check_urls(urls, urls_from)   every URL one Apprise takes, else DoorError naming it (without
                                  what may be secret in it); Apprise missing is one line too
    AppriseChannel(urls).send(title, body)
                                  one notification to every URL, in a worker thread (Apprise's
                                  notify blocks); a plain value back, never an exception:
                                  None when every URL took it, else why not in words

Public API only: `Apprise()`, `AppriseAsset`, `add()` (its URL validation) and `notify()`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from chief.errors import DoorError
from chief.fallback_rules import shown_url

if TYPE_CHECKING:
    from collections.abc import Sequence

INSTALL_HINT = (
    "the fallback channel needs Apprise, which is not installed: run "
    "`pip install 'coop-notifier[fallback]'` (or `pip install apprise`) in the door's "
    "environment, or unset CHIEF_FALLBACK_URLS"
)
APP_ID = "Coop"
APP_DESC = "Coop notify door"


class Channel(Protocol):
    """What the fallback task needs of a channel (a test may stand in a double)."""

    async def send(self, title: str, body: str) -> str | None: ...


def _apprise() -> Any:
    try:
        import apprise
    except ImportError:
        raise DoorError(INSTALL_HINT) from None
    return apprise


@contextmanager
def _plugins_loading() -> Iterator[None]:
    """Around `add()`: Apprise logs a URL it does not take whole ("Unsupported URL: ..."), a
    password included, so its log is held back while the door reads the URLs (the door's own
    line names which URL, without its secrets). And Apprise loads a service's plugin at its
    first `add()`; its mail plugin imports the standard library's imghdr, which warns on
    Python 3.11 and 3.12 that it goes in 3.13: nothing the door or its operator can act on."""
    logger = logging.getLogger("apprise")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "'imghdr' is deprecated", DeprecationWarning)
            yield
    finally:
        logger.setLevel(level)


def check_urls(urls: Sequence[str], urls_from: str) -> None:
    """Every URL one Apprise takes; DoorError naming the first it refuses."""
    apprise = _apprise()
    for index, url in enumerate(urls, 1):
        with _plugins_loading():
            taken = apprise.Apprise().add(url)
        if not taken:
            raise DoorError(
                f"{urls_from}: URL {index} of {len(urls)}, {shown_url(url)}, is not one "
                "Apprise takes (see https://github.com/caronc/apprise/wiki for each service's "
                "URL)"
            )


class AppriseChannel:
    """The fallback channel over Apprise: one `Apprise` object holding every URL."""

    def __init__(self, urls: Sequence[str]) -> None:
        apprise = _apprise()
        asset = apprise.AppriseAsset(app_id=APP_ID, app_desc=APP_DESC, async_mode=False)
        self._apprise = apprise.Apprise(asset=asset)
        self._text = apprise.NotifyFormat.TEXT
        with _plugins_loading():
            for url in urls:
                self._apprise.add(url)

    async def send(self, title: str, body: str) -> str | None:
        """Notify every URL; None when all took it, else why not (Apprise logs the details)."""
        try:
            ok = await anyio.to_thread.run_sync(self._notify, title, body)
        except Exception as exc:  # a plugin's own failure: a failed send, said in words
            return f"{type(exc).__name__}: {exc}"
        return None if ok else "the fallback channel refused or could not be reached"

    def _notify(self, title: str, body: str) -> bool:
        return bool(self._apprise.notify(body=body, title=title, body_format=self._text))
