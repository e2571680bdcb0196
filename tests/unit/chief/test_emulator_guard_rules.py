"""The emulator's guard over any request a browser page or a foreign peer could send: the peer,
the Host, the browser headers, `Sec-Fetch-Site` and a control POST's content type, in that
order (`chief.telegram.emulator.guard.refusal`, on the raw ASGI scope). The real process is
tests/e2e/chief/test_emulator_guard.py."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from chief.telegram.emulator.guard import refusal

LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:8766", "localhost", "localhost:8766", "[::1]:8766"]


def scope(
    headers: list[tuple[bytes, bytes]],
    *,
    peer: str = "127.0.0.1",
    method: str = "GET",
    path: str = "/emulator/messages",
) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "client": (peer, 50000),
        "headers": headers,
    }


def host(value: str = "127.0.0.1:8766") -> tuple[bytes, bytes]:
    return (b"host", value.encode())


def test_python_telegram_bots_call_and_a_json_control_post_pass() -> None:
    form = (b"content-type", b"application/x-www-form-urlencoded")
    assert refusal(scope([host(), form], method="POST", path="/bot1:x/sendMessage")) is None
    json_type = (b"content-type", b"application/json; charset=utf-8")
    assert refusal(scope([host(), json_type], method="POST", path="/emulator/reset")) is None


@given(peer=st.ip_addresses().map(str).filter(lambda p: p not in ("127.0.0.1", "::1")))
def test_a_peer_off_loopback_is_refused(peer: str) -> None:
    if peer.startswith("::ffff:127.0.0.1"):
        return  # the mapped loopback address is loopback
    assert refusal(scope([host()], peer=peer)) == (403, "peer_not_allowed")


FOREIGN_NAMES = st.one_of(
    st.from_regex(r"[a-z0-9-]{1,12}(\.[a-z0-9-]{1,12}){0,2}", fullmatch=True).filter(
        lambda name: name not in ("localhost", "127.0.0.1")
    ),
    st.ip_addresses(v=4).map(str).filter(lambda a: a != "127.0.0.1"),
    st.ip_addresses(v=6).map(lambda a: f"[{a}]").filter(lambda a: a != "[::1]"),
    st.sampled_from(["::1", "127.0.0.1.evil.example", "localhost.", "evil.example", "127.1"]),
)


@given(
    name=FOREIGN_NAMES, port=st.one_of(st.just(""), st.integers(0, 65535).map(lambda p: f":{p}"))
)
def test_a_host_other_than_loopback_is_refused(name: str, port: str) -> None:
    """DNS rebinding: a page reaches loopback under its own name, which is what Host says."""
    assert refusal(scope([host(name + port)])) == (403, "host_not_loopback")


def test_a_loopback_host_passes() -> None:
    for name in LOOPBACK_HOSTS:
        assert refusal(scope([host(name)])) is None


@given(
    header=st.sampled_from(
        [
            b"origin",
            b"Origin",
            b"cookie",
            b"x-forwarded-for",
            b"forwarded",
            b"x-real-ip",
            b"x-forwarded-host",
            b"x-session-id",
        ]
    ),
    value=st.binary(max_size=20),
)
def test_a_browser_or_proxy_header_is_refused_whatever_it_says(header: bytes, value: bytes) -> None:
    assert refusal(scope([host(), (header, value)])) == (403, "forwarded_or_browser")


@given(value=st.sampled_from([b"cross-site", b"same-site", b"Cross-Site", b" cross-site "]))
def test_a_cross_site_fetch_is_refused(value: bytes) -> None:
    assert refusal(scope([host(), (b"sec-fetch-site", value)])) == (403, "cross_site")


@given(
    content_type=st.one_of(
        st.none(),
        st.sampled_from(
            [
                b"text/plain",
                b"application/x-www-form-urlencoded",
                b"multipart/form-data; boundary=x",
                b"application/jsonx",
                b"",
            ]
        ),
    ),
    path=st.sampled_from(["/emulator/owner/press", "/emulator/reset", "/emulator/faults"]),
)
def test_a_control_post_without_json_is_refused(content_type: bytes | None, path: str) -> None:
    headers = [host()] + ([] if content_type is None else [(b"content-type", content_type)])
    assert refusal(scope(headers, method="POST", path=path)) == (415, "json_only")
