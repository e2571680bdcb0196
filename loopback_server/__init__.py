"""What every loopback HTTP server of the project does before its app reads a byte, written
once: the door (`chief serve`), the Telegram emulator (`chief telegram-emulator`) and the engine
service (`coop serve`, whose process is `notifier.serve`) all run on it.

    gate.py    how many connections a server holds, and how long one may take to send a
               complete request (the cap, the eviction of quiet connections, the request
               deadline), and the ASGI half that tells it when a request is complete
    flow.py    the gate's protocol half: a connection admitted, and read no further while its
               answers are unread (flow control), in front of uvicorn's h11 protocol
    body.py    a request's body bounded before the app reads it: its size (413) and its JSON
               nesting (400)
    server.py  the uvicorn server on the gate, stopped by an event rather than a poll
    refusals.py  a service's refusals (`plumbing.refusals`) as a counter on its `/metrics`

It imports nothing from `engine`, `notifier` or `chief` (an import contract holds that), so the
engine's side and the Chief's side, which must not import each other, can both use it.
"""
