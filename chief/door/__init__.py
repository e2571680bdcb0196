"""The notify door: the one HTTP endpoint through which a line from the engine reaches the owner.

Layers, pointing inward:
    config.py    settings from the environment (frozen `DoorConfig`)
    posture.py   the security posture seam (a JSON file, or always `normal`)
    guard.py     the six checks, in order, over the raw peer and headers
    locks.py     per-row anyio locks that empty themselves (the serve lock the door takes is
                 chief.serve_lock, below the door and cron)
    pacing.py    pure: the token bucket per chat, the digest, quiet hours, backoff
    verbs.py     the verbs (`DoorVerbs`): notify (the Chief line and the Telegram entry, in one
                 chief.db transaction), notify_batch (several rows, one transaction, one answer
                 per row) and status
    ringer.py    the sender task: rings the durable Telegram queue in order, paced, in digests;
                 an ask alone, with its buttons
    asks.py      the ask task: the edits settles owe (durable, retried, bounded), and `reask`
    router.py    the FastAPI router (`make_router`) a host application mounts: POST
                 /api/coop/engine/notify, POST /api/coop/engine/notify-batch, GET .../status
    asks.py      the ask task: the edits a settled request's ask messages owe, and `reask`
    phone.py     the poller task: the owner's updates (taps, replies, commands), strangers
                 turned away; commands.py and commands_text.py answer the commands
    answers.py   the owner's taps and replies: recorded in chief.db, forwarded to the ledger
                 by the answers' task (engine_link.py: the ledger service's seam), toasted
    report_route.py  `POST /api/chief/report`: `chief report` hands a cron line to the holder
    metrics.py   `GET /metrics`: answers and Telegram sends counted, one hook (`instrument_door`)
    app.py       `chief serve`: the standalone app and its `main` (uvicorn through
                 `chief.loopback_http`)

Errors are `chief.errors.DoorError` and its subclasses (`PostureUnavailable`,
`ChannelUnavailable`, `ChiefUnavailable`), in the package's error tree.
"""
