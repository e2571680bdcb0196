"""The fallback channel (issue 35, rung 3): when Telegram cannot deliver for
CHIEF_FALLBACK_AFTER_S, the door's urgent reports and one notice of the outage go through
Apprise URLs instead (mail, ntfy, Pushover, ...).

    settings   CHIEF_FALLBACK_URLS (or a 0600 CHIEF_FALLBACK_URLS_FILE), the delay and the
               hourly bound, read once at start; each wrong one is one line
    channel    the Apprise seam: the only module that imports Apprise, and only when the
               setting is set (a door without a fallback loads nothing of it)
    task       the fallback task: watches whether Telegram delivers, opens and closes outages,
               sends the durable entries of chief.store.fallback exactly once (a send in doubt
               after a crash goes again, marked as a possible repeat)

The words and the hourly rule are pure, in `chief.fallback_rules`.
"""
