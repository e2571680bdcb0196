"""The floor's loopback rules (`plumbing.loopback`), which every guard reads: the engine
service's, the door's and the Telegram emulator's. Each guard's own order and answers are in its
own tests; the rules themselves are here, once."""

from __future__ import annotations

import ipaddress

import pytest

from plumbing.loopback import (
    BROWSER_HEADERS,
    browser_header,
    cross_site,
    host_is_loopback,
    peer_address,
    peer_allowed,
    peer_is_loopback,
)

LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:8764", "localhost", "LOCALHOST:1", "[::1]",
                  "[::1]:8765", " 127.0.0.1 "]  # fmt: skip
FOREIGN_HOSTS = [
    "::1",  # IPv6 without brackets: no browser sends it, and its port would be ambiguous
    "::1:8764",
    "[::1",
    "[::1]x",
    "[::1]8765",
    "[::1]:",
    "localhost:",
    "127.0.0.1:",
    "127.0.0.1:123456",
    "127.0.0.1:80a",
    "127.0.0.1:http",
    "127.0.0.2",
    "127.0.0.1.evil.example",
    "localhost.evil.example",
    "127.0.0.1@evil",
    "evil.example",
    "",
    "0.0.0.0",  # noqa: S104 - a Host value under test, not a bind
    "[::ffff:127.0.0.1]",
    "localhost.",
    "１２７.0.0.1",  # fullwidth digits: not ASCII
]


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_a_loopback_host_passes_as_text_and_as_header_bytes(host: str) -> None:
    assert host_is_loopback(host)
    assert host_is_loopback(host.encode("ascii"))


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
def test_any_other_host_is_refused_as_text_and_as_header_bytes(host: str) -> None:
    assert not host_is_loopback(host)
    assert not host_is_loopback(host.encode("utf-8"))


def test_a_host_header_that_is_not_ascii_is_refused() -> None:
    assert not host_is_loopback(b"\xff")
    assert not host_is_loopback(b"localhost\x80")


LOOPBACK_PEERS = ["127.0.0.1", "::1", "::ffff:127.0.0.1", "::1%lo"]
FOREIGN_PEERS = ["127.0.0.2", "0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "fe80::1%eth0",  # noqa: S104
                 "localhost", " 127.0.0.1", "127.0.0.1:80", "[::1]", "", None]  # fmt: skip


@pytest.mark.parametrize("peer", LOOPBACK_PEERS)
def test_a_loopback_peer_passes_mapped_or_zoned(peer: str) -> None:
    assert peer_is_loopback(peer)


@pytest.mark.parametrize("peer", FOREIGN_PEERS)
def test_any_other_peer_is_refused(peer: str | None) -> None:
    assert not peer_is_loopback(peer)


def test_a_configured_peer_list_is_read_by_the_same_address_rule() -> None:
    """The door's `CHIEF_ALLOWED_PEERS`: the mapped and zoned forms unwrap as for loopback."""
    allowed = frozenset({ipaddress.ip_address("10.0.0.7"), ipaddress.ip_address("::1")})
    assert peer_allowed("10.0.0.7", allowed)
    assert peer_allowed("::ffff:10.0.0.7", allowed)
    assert peer_allowed("::1%lo", allowed)
    assert not peer_allowed("127.0.0.1", allowed)
    assert not peer_allowed(None, allowed)
    assert not peer_allowed("not an address", allowed)
    assert peer_address("::ffff:127.0.0.1") == ipaddress.ip_address("127.0.0.1")


@pytest.mark.parametrize("name", [*sorted(BROWSER_HEADERS), "X-Session-Id", "x-host-session"])
def test_a_browser_or_proxy_header_is_named_in_any_case_as_text_or_bytes(name: str) -> None:
    for form in (name, name.upper(), name.title()):
        assert browser_header(form)
        assert browser_header(form.encode("latin-1"))


@pytest.mark.parametrize("name", ["host", "content-type", "x-coop-service-key", "user-agent"])
def test_a_clients_own_header_is_not_a_browsers(name: str) -> None:
    assert not browser_header(name)
    assert not browser_header(name.encode("latin-1"))


def test_every_browser_header_the_guards_refused_is_on_the_list() -> None:
    listed = {"origin", "cookie", "x-forwarded-for", "forwarded", "x-forwarded-host", "x-real-ip"}
    assert listed == BROWSER_HEADERS


@pytest.mark.parametrize(("value", "foreign"), [("cross-site", True), ("same-site", True),
    (" Same-Site ", True), ("same-origin", False), ("none", False), ("", False)])  # fmt: skip
def test_a_fetch_from_another_origin_is_cross_site(value: str, foreign: bool) -> None:
    assert cross_site(value) is foreign
    assert cross_site(value.encode("latin-1")) is foreign
