"""A real uvicorn on the connection gate, in its own process, for tests that measure the server
from outside (its memory from /proc, its answers under a flood from other processes).

    python -m tests.support.gated_server (--tcp | --unix PATH) [--max-connections N]
                                         [--deadline-s S]

It prints one line, `listening PORT` (TCP, on 127.0.0.1) or `listening PATH`, once it serves,
and stops on SIGTERM. The app, a Starlette one as the services are: `GET /ok` answers `ok`,
`POST /json` reads its JSON body and answers it back (the engine service's shape), `/slow`
answers after `SLOW_S`, and every other path is Starlette's 404 (the door's shape to a
stranger).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from plumbing.http.gate import MAX_CONNECTIONS, REQUEST_DEADLINE_S, ConnectionGate
from plumbing.http.server import QuietServer, loopback_config
from plumbing.unix import bind_private

SLOW_S = 0.2


async def ok(_: Request) -> Response:
    return PlainTextResponse("ok")


async def echo_json(request: Request) -> Response:
    return JSONResponse({"echo": await request.json()})


async def slow(_: Request) -> Response:
    await asyncio.sleep(SLOW_S)
    return PlainTextResponse("ok")


def app() -> Starlette:
    return Starlette(
        routes=[
            Route("/ok", ok),
            Route("/json", echo_json, methods=["POST"]),
            Route("/slow", slow),
        ]
    )


class _Announcing(QuietServer):
    async def startup(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        await super().startup(sockets)
        address = sockets[0].getsockname() if sockets else self.servers[0].sockets[0].getsockname()
        print(f"listening {address if isinstance(address, str) else address[1]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--tcp", action="store_true")
    where.add_argument("--unix")
    parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS)
    parser.add_argument("--deadline-s", type=float, default=REQUEST_DEADLINE_S)
    args = parser.parse_args()
    gate = ConnectionGate(args.max_connections, args.deadline_s)
    if args.unix:
        config = loopback_config(app(), gate, lifespan="off")
        sockets = [bind_private(args.unix)]
    else:
        config = loopback_config(app(), gate, host="127.0.0.1", port=0, lifespan="off")
        sockets = None
    server = _Announcing(config)
    server.run(sockets=sockets)  # on the services' event loop (uvloop where installed)
    sys.exit(0)


if __name__ == "__main__":
    main()
