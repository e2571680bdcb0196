"""The standard library's HTTP client over a service's checked Unix socket.

    UnixHTTPConnection(path, timeout)   an `http.client.HTTPConnection` whose connect is
                                        `plumbing.unix.connect_checked(path)`: the folder and
                                        the socket are this user's and private, and the process
                                        answering runs as this user, before a byte is sent

Its errors are `connect_checked`'s (FileNotFoundError: nothing listens; PermissionError: not
private, nothing sent; ConnectionRefusedError: a socket nobody holds) and http.client's own.
"""

from __future__ import annotations

import http.client

from plumbing.unix import connect_checked


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 to the service at `path` (see the module docstring); the Host it sends is
    `localhost`."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = connect_checked(self.socket_path, timeout=self.timeout)
