"""A listener standing in for an HTTP proxy that the environment names: it accepts nothing, and a
test asks afterwards whether anyone knocked. Loopback calls must never go through it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

PROXY_VARIABLES = (
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
)
NO_PROXY_VARIABLES = ("no_proxy", "NO_PROXY")


class ProxyTrap:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    def environ(self) -> dict[str, str]:
        """Every proxy variable pointing here, and nothing exempted from them."""
        return {
            **{name: self.url for name in PROXY_VARIABLES},
            **{name: "" for name in NO_PROXY_VARIABLES},
        }

    def knocked(self) -> bool:
        """True if any connection reached the trap (the kernel queues it without an accept)."""
        try:
            conn, _ = self._sock.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True


@contextmanager
def proxy_trap() -> Iterator[ProxyTrap]:
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        yield ProxyTrap(sock)
    finally:
        sock.close()
