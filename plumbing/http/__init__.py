"""HTTP between the project's own processes, written once: the server every loopback service
runs on (the door, `chief serve`; the Telegram emulator, `chief telegram-emulator`; the engine
service, `coop serve`, whose process is `notifier.engine_service`), and the standard library's
client half for a service's Unix socket.

    gate.py      how many connections a server holds, and how long one may take to send a
                 complete request (the cap, the eviction of quiet connections, the request
                 deadline), and the ASGI half that tells it when a request is complete
    flow.py      the gate's protocol half: a connection admitted, and read no further while its
                 answers are unread (flow control), in front of uvicorn's h11 protocol
    body.py      a request's body bounded before the app reads it: its size (413) and its JSON
                 nesting (400)
    server.py    the uvicorn server on the gate, stopped by an event rather than a poll
    refusals.py  a service's refusals (`plumbing.refusals`) as a counter on its `/metrics`
    client.py    `http.client` over a service's checked Unix socket (`plumbing.unix`): the
                 standard library only, for `coop status` and the engine's calls after a
                 cutover

Importing this package loads nothing: the server modules bring uvicorn and starlette, the
client only the standard library. Its log events keep the names they had when this was the
top-level `loopback_server` package (`loopback_server.connections_shed`): an operator's alert
may name them.
"""
