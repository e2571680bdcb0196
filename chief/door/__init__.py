"""The notify door: the one HTTP endpoint through which a line from the engine reaches the owner.

Layers, pointing inward:
    config.py    settings from the environment (frozen `DoorConfig`)
    posture.py   the security posture seam (a JSON file, or always `normal`)
    guard.py     the six checks, in order, over the raw peer and headers
    locks.py     per-row anyio locks that empty themselves; the single-instance serve lock
    service.py   the verbs: notify (Master Chief first, Telegram once), notify_batch (several
                 rows, one chief.db transaction, one answer per row) and status
    router.py    the FastAPI router (`make_router`) a host application mounts: POST
                 /api/coop/engine/notify, POST /api/coop/engine/notify-batch, GET .../status
    report_route.py  `POST /api/chief/report`: `chief report` hands a cron line to the holder
    metrics.py   `GET /metrics`: answers and Telegram sends counted, one hook (`instrument_door`)
    serving.py   uvicorn for the project's long-running entry points
    app.py       `chief serve`: the standalone app and its `main`

Errors are `chief.errors.DoorError` and its subclasses (`PostureUnavailable` in posture.py,
`ChannelUnavailable` and `ChiefUnavailable` in service.py).
"""
