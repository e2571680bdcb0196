"""The notify door: the one HTTP endpoint through which a line from the engine reaches the owner.

Layers, pointing inward:
    config.py        the settings of `chief serve`, read from the environment once at start (a
                     frozen `DoorConfig`: the door's socket, key and peers, and who the phone
                     rings and obeys)
    posture.py       the security posture seam (a JSON file, or always `normal`)
    guard.py         the six checks, in order, over the raw peer and headers
    verbs.py         the verbs (`DoorVerbs`): notify (the Chief line and the Telegram entry, in
                     one chief.db transaction, handed to the phone's ringer), notify_batch
                     (several rows, one transaction, one answer per row) and status
    router.py        the FastAPI router (`make_router`) a host application mounts: POST
                     /api/coop/engine/notify, POST /api/coop/engine/notify-batch, GET .../status
    report_route.py  `POST /api/chief/report`: `chief report` hands a cron line to the holder
    ack_route.py     `POST /api/chief/urgent/ack`: `chief ack N` stops an urgent report's ladder
    metrics.py       `GET /metrics`: answers and Telegram sends counted, one hook
                     (`instrument_door`)

The phone (the Telegram bot: the poller, the handlers, the ringer, the scheduled rings) is
chief.phone, below the door: the door imports it, never the other way round. chief.serve wires
both into `chief serve` (uvicorn through `chief.loopback_http`).

Errors are `chief.errors.DoorError` and its subclasses (`PostureUnavailable`,
`ChannelUnavailable`, `ChiefUnavailable`), in the package's error tree.
"""
