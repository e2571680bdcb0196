"""A flood of connections from one client, as a stranger that holds no key would send it, in its
own process: bounded in count and in time.

    python -m tests.support.gate_flood (--port PORT | --unix PATH) [--seconds 8]
        [--keepers 200] [--every-s 3] [--churn-per-s 600]

`keepers` connections each send one request every `every_s` and read its answer (keep-alive
places held for good), and `churn_per_s` new connections a second each send one request and
then hold the connection without reading (every second one sends nothing at all). It prints
one line, `flood connections=N`, when it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time

REQUEST = b"GET /nowhere HTTP/1.1\r\nHost: coop\r\n\r\n"
#: A newcomer is held open this long at most (the flood ends before most reach it).
HOLD_S = 10.0


async def _open(args: argparse.Namespace) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if args.unix:
        return await asyncio.open_unix_connection(args.unix)
    return await asyncio.open_connection("127.0.0.1", args.port)


async def _keeper(args: argparse.Namespace, end: list[float]) -> None:
    # `end` is read afresh: a stop moves it (Python 3.11's wait_for may swallow a cancel).
    while time.monotonic() < end[0]:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, TimeoutError):
            reader, writer = await _open(args)
            try:
                while time.monotonic() < end[0]:
                    writer.write(REQUEST)
                    await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                    await asyncio.sleep(args.every_s)
            finally:
                writer.close()
        await asyncio.sleep(0.1)


async def _newcomer(args: argparse.Namespace, n: int, opened: list[int]) -> None:
    with contextlib.suppress(OSError, TimeoutError):
        reader, writer = await asyncio.wait_for(_open(args), 5)
        opened[0] += 1
        try:
            if n % 2:
                writer.write(REQUEST)
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, TimeoutError):
                await asyncio.wait_for(reader.read(), HOLD_S)  # till the server closes it
        finally:
            writer.close()


async def flood(args: argparse.Namespace) -> int:
    end = [time.monotonic() + args.seconds]
    opened = [0]
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, end.__setitem__, 0, 0.0)
    tasks = [asyncio.create_task(_keeper(args, end)) for _ in range(args.keepers)]
    n = 0
    start = time.monotonic()
    while (now := time.monotonic()) < end[0]:
        due = int((now - start) * args.churn_per_s)
        while n < due:
            tasks.append(asyncio.create_task(_newcomer(args, n, opened)))
            n += 1
        await asyncio.sleep(0.01)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return opened[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int)
    where.add_argument("--unix")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--keepers", type=int, default=200)
    parser.add_argument("--every-s", type=float, default=3.0)
    parser.add_argument("--churn-per-s", type=float, default=600.0)
    args = parser.parse_args()
    print(f"flood connections={asyncio.run(flood(args))}", flush=True)


if __name__ == "__main__":
    main()
