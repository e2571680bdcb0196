"""Facts the three packages share, pinned in one place.

`engine/`, `notifier/` and `chief/` talk only over HTTP and share no code, so a fact both sides
must agree on (where the data folder is, what a loopback Host looks like, the key header, the
door's URL, the 4,000-character limit, the key file's rule) is written once per package, as a
deliberate twin named in a comment at each end. This module fails when any copy differs: change
a fact everywhere or nowhere.

The notifier reads the data folder and the ledger path through `engine.config` (it depends on
the engine), so its copy is the engine's.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from chief import model as chief_model
from chief.config import ChiefConfig
from chief.door import config as door_config
from chief.door import guard as door_guard
from chief.door import router as door_router
from chief.door import verbs as door_verbs
from chief.errors import DoorError
from chief.phone.ringer import Rung
from engine import config as engine_config
from engine import door as engine_door
from engine import keyfile, lifecycle, loopback, service_socket
from engine.errors import GuardRefused, KeyFileError
from engine.owner import app as engine_service
from notifier import client as notifier_client
from notifier import config as notifier_config
from notifier import outcome as notifier_outcome
from notifier.errors import ServiceKeyError
from plumbing import loopback as plumbing_loopback
from tests.support.door import write_key

# ---- the data folder -------------------------------------------------------------------------

HOME = "/home/someone"
DATA_FOLDER_CASES: list[dict[str, str]] = [
    {"HOME": HOME},
    {"HOME": HOME, "COOP_HOME": "/srv/coop"},
    {"HOME": HOME, "COOP_HOME": "relative/data"},
    {"HOME": HOME, "COOP_HOME": "./data", "XDG_DATA_HOME": "/xdg"},
    {"HOME": HOME, "COOP_HOME": ""},
    {"HOME": HOME, "COOP_HOME": "   "},
    {"HOME": HOME, "XDG_DATA_HOME": "/xdg"},
    {"HOME": HOME, "XDG_DATA_HOME": "xdg-relative"},
    {"HOME": HOME, "XDG_DATA_HOME": "./xdg"},
    {"HOME": HOME, "XDG_DATA_HOME": "~/xdg"},
    {"HOME": HOME, "XDG_DATA_HOME": ""},
    {"HOME": "/other/home", "XDG_DATA_HOME": "relative"},
]


def _engine_folder(env: Mapping[str, str]) -> Path:
    return engine_config.data_home(env)


def _engine_db_folder(env: Mapping[str, str]) -> Path:
    return engine_config.db_path(env).parent


def _door_folder(env: Mapping[str, str]) -> Path:
    return door_config.data_home(env)


def _chief_folder(env: Mapping[str, str]) -> Path:
    return ChiefConfig.from_env(env).db_path.parent


FOLDER_READERS: dict[str, Callable[[Mapping[str, str]], Path]] = {
    "engine.config.data_home": _engine_folder,
    "engine.config.db_path": _engine_db_folder,
    "chief.door.config.data_home": _door_folder,
    "chief.config.ChiefConfig": _chief_folder,
}


def expected_folder(env: Mapping[str, str]) -> Path:
    """The one rule: a non-blank `COOP_HOME`; else `coop/` under `XDG_DATA_HOME` when that is
    absolute (the XDG spec ignores a relative or empty one); else `~/.local/share/coop`."""
    if env.get("COOP_HOME", "").strip():
        return Path(env["COOP_HOME"]).expanduser()
    xdg = env.get("XDG_DATA_HOME", "")
    root = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env["HOME"]) / ".local/share"
    return root / "coop"


@pytest.mark.parametrize("env", DATA_FOLDER_CASES, ids=lambda env: repr(env)[:60])
def test_every_package_resolves_the_same_data_folder(env: dict[str, str]) -> None:
    found = {name: str(reader(env)) for name, reader in FOLDER_READERS.items()}

    assert set(found.values()) == {str(expected_folder(env))}, found


@pytest.mark.parametrize("env", DATA_FOLDER_CASES[:4], ids=lambda env: repr(env)[:60])
def test_the_ledger_and_chief_db_sit_in_that_folder(env: dict[str, str]) -> None:
    folder = expected_folder(env)
    assert engine_config.db_path(env) == folder / "coop.db"
    assert ChiefConfig.from_env(env).db_path == folder / "chief.db"


def test_every_package_finds_the_service_key_in_that_folder(tmp_path: Path) -> None:
    folder = tmp_path / "xdg" / "coop"
    folder.mkdir(parents=True)
    key = folder / "service.key"
    key.write_text("shared-key-0123456789\n")
    key.chmod(0o600)
    env = {"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "xdg")}

    assert notifier_config.NotifierConfig.from_env(env).service_key_file == key
    assert door_config.DoorConfig.from_env(env).service_key_file == key
    assert engine_config.data_home(env) / engine_door.SERVICE_KEY_FILE_NAME == key
    assert notifier_config.DEFAULT_KEY_FILE_NAME == engine_door.SERVICE_KEY_FILE_NAME


# ---- the service key file's rule -------------------------------------------------------------


def _accepts(read: Callable[[Path], object], refusal: type[Exception]) -> Callable[[Path], bool]:
    """Whether one package's reader accepts a key file: it reads it, or refuses with `refusal`."""

    def reads(path: Path) -> bool:
        try:
            read(path)
        except refusal:
            return False
        return True

    return reads


KEY_READERS = {
    "engine": _accepts(lambda path: keyfile.read_private(path, "the service key"), KeyFileError),
    "notifier": _accepts(notifier_config.read_service_key, ServiceKeyError),
    "door": _accepts(door_config.read_service_key_digest, DoorError),
}


@pytest.mark.parametrize(
    ("mode", "content", "accepted"),
    [
        (0o600, "k\n", True),
        (0o400, "k", True),
        (0o640, "k\n", False),
        (0o604, "k\n", False),
        (0o644, "k\n", False),
        (0o660, "k\n", False),
        (0o600, "", False),
        (0o600, "  \n", False),
        (0o600, "k" * 4096, True),
        (0o600, "k" * 4097, False),
    ],
)
def test_every_reader_of_the_key_file_applies_the_same_rule(
    tmp_path: Path, mode: int, content: str, accepted: bool
) -> None:
    path = tmp_path / "service.key"
    path.write_text(content)
    path.chmod(mode)

    answers = {name: reads(path) for name, reads in KEY_READERS.items()}

    assert answers == dict.fromkeys(KEY_READERS, accepted)


def test_every_reader_refuses_a_missing_key_file_and_a_folder(tmp_path: Path) -> None:
    for path in (tmp_path / "absent.key", tmp_path):
        answers = {name: reads(path) for name, reads in KEY_READERS.items()}
        assert answers == dict.fromkeys(KEY_READERS, False), path


# ---- the trusted files' rule (private by construction) ---------------------------------------


def _pairing_reads(path: Path) -> bool:
    from chief.errors import ChiefConfigError
    from chief.telegram.pairing import read_pairing

    try:
        read_pairing(path)
    except ChiefConfigError:
        return False
    return True


def _owner_file_reads(path: Path) -> bool:
    from engine import owner_file
    from engine.errors import OwnerUnavailable

    try:
        owner_file._owner_text(str(path))
    except OwnerUnavailable:
        return False
    return True


TRUST_READERS = KEY_READERS | {"pairing": _pairing_reads, "owner file": _owner_file_reads}
# One line every reader takes when the rule lets it: a key, a pairing and an owner file's text.
TRUSTED_TEXT = json.dumps({"chat_id": 1, "user_id": 1, "bot": "@b", "paired_at": "now"}) + "\n"


def test_both_packages_keep_private_files_with_plumbings_one_code() -> None:
    """`engine.private` and `chief.private` (folders 0700, files 0600, the trust rule, the
    atomic write, never through a link) were one module written twice; now each names
    `plumbing.files`'s own objects, so the two cannot drift."""
    from chief import private as chief_private
    from engine import private as engine_private
    from plumbing import files

    names = [
        "FILE_MODE", "FOLDER_MODE", "OTHERS_BITS", "SQLITE_SIDE_FILES", "fsync_folder",
        "make_folders", "private_database", "private_file", "tighten", "trust_problem",
        "write_atomic",
    ]  # fmt: skip
    for name in names:
        assert getattr(engine_private, name) is getattr(files, name), name
        assert getattr(chief_private, name) is getattr(files, name), name
    assert (files.FOLDER_MODE, files.FILE_MODE) == (0o700, 0o600)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(mode=st.integers(0, 0o7777))
def test_every_reader_of_a_trusted_file_applies_the_same_rule_to_any_mode(
    tmp_path: Path, mode: int
) -> None:
    """Readable by this user with no group or other bit, or refused: by every reader alike."""
    path = tmp_path / "trusted"
    path.write_text(TRUSTED_TEXT)
    path.chmod(mode)
    expected = not mode & 0o077 and os.access(path, os.R_OK)

    answers = {name: reads(path) for name, reads in TRUST_READERS.items()}

    assert answers == dict.fromkeys(TRUST_READERS, expected), f"{mode:04o}"


def test_every_reader_of_a_trusted_file_refuses_another_users(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("handing a file to another user needs root")
    import pwd

    path = tmp_path / "trusted"
    path.write_text(TRUSTED_TEXT)
    path.chmod(0o600)
    nobody = pwd.getpwnam("nobody")
    os.chown(path, nobody.pw_uid, nobody.pw_gid)

    answers = {name: reads(path) for name, reads in TRUST_READERS.items()}

    assert answers == dict.fromkeys(TRUST_READERS, False)


def test_the_key_file_size_limit_is_one_number() -> None:
    assert keyfile.MAX_KEY_FILE_BYTES == notifier_config.MAX_KEY_FILE_BYTES
    assert keyfile.MAX_KEY_FILE_BYTES == door_config.MAX_KEY_FILE_BYTES


# ---- the loopback guard ----------------------------------------------------------------------

HOST_CASES = [
    "127.0.0.1",
    "127.0.0.1:8764",
    "localhost",
    "LOCALHOST:1",
    "[::1]",
    "[::1]:8765",
    "::1",
    "::1:8764",
    "[::1",
    "[::1]x",
    "[::1]:",
    "localhost:",
    "127.0.0.1:123456",
    "127.0.0.1:80a",
    "127.0.0.2",
    "127.0.0.1.evil.example",
    "evil.example",
    "",
    " 127.0.0.1 ",
    "0.0.0.0",  # noqa: S104 - a Host value under test, not a bind
    "[::ffff:127.0.0.1]",
    "localhost.",
]


def _engine_service_admits(host: str, peer: str | None = "127.0.0.1") -> bool:
    """The engine service's own guard, on a request from this peer with this Host."""
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/status",
        "headers": [(b"host", host.encode("ascii"))],
        "client": None if peer is None else (peer, 40000),
    }
    try:
        engine_service.guard_request(Request(scope))
    except GuardRefused as exc:
        status_code = exc.status
    else:
        return True
    assert status_code == 403
    return False


@pytest.mark.parametrize("host", HOST_CASES)
def test_the_engine_and_the_door_agree_on_every_loopback_host(host: str) -> None:
    door = door_guard.host_is_loopback(host.encode("ascii"))
    engine = _engine_service_admits(host)

    assert engine == door, f"Host {host!r}: engine service {engine}, door {door}"
    assert loopback.host_is_loopback(host) == door


def test_a_bare_ipv6_loopback_host_is_refused_by_both() -> None:
    assert not loopback.host_is_loopback("::1")
    assert not door_guard.host_is_loopback(b"::1")
    assert loopback.host_is_loopback("[::1]:8764")


PEER_CASES = [
    "127.0.0.1",
    "::1",
    "::ffff:127.0.0.1",
    "::1%lo",
    "127.0.0.2",
    "0.0.0.0",  # noqa: S104 - a peer value under test, not a bind
    "::",
    "10.0.0.1",
    "::ffff:10.0.0.1",
    "fe80::1%eth0",
    "localhost",
    " 127.0.0.1",
    "127.0.0.1:80",
    "[::1]",
    "",
    None,
]


@pytest.mark.parametrize("peer", PEER_CASES)
def test_the_engine_and_the_door_agree_on_every_loopback_peer(peer: str | None) -> None:
    """The peer rule's twins: `engine.loopback.peer_is_loopback`, which the engine service's
    guard calls, and the door's `chief.door.guard.peer_allowed` with its default peers."""
    default_peers = frozenset(ipaddress.ip_address(p) for p in door_config.DEFAULT_ALLOWED_PEERS)
    door = door_guard.peer_allowed(peer, default_peers)

    assert loopback.peer_is_loopback(peer) == door, f"peer {peer!r}"
    assert _engine_service_admits("127.0.0.1:8764", peer) == door, f"peer {peer!r}"


def test_the_engine_service_uses_the_shared_host_rule_and_peers() -> None:
    door_peers = frozenset(door_config.DEFAULT_ALLOWED_PEERS)
    assert door_peers == loopback.LOOPBACK_PEERS
    assert loopback.LOOPBACK_HOST_NAMES == door_guard.LOOPBACK_HOSTS


def test_the_engine_and_the_door_refuse_the_same_browser_and_proxy_headers() -> None:
    engine = {name.encode("latin-1") for name in engine_service.BROWSER_HEADERS}
    assert engine == door_guard.FORBIDDEN_HEADERS
    assert engine_service.SESSION_MARKER.encode("latin-1") == door_guard.SESSION_MARKER
    # the floor's list, which the Telegram emulator's guard reads
    floor = {name.encode("latin-1") for name in plumbing_loopback.BROWSER_HEADERS}
    assert floor == door_guard.FORBIDDEN_HEADERS
    assert plumbing_loopback.SESSION_MARKER.encode("latin-1") == door_guard.SESSION_MARKER


# ---- the wire: header, URL, limit ------------------------------------------------------------


def test_the_service_key_header_is_one_name() -> None:
    names = {
        "engine.door": engine_door.SERVICE_KEY_HEADER,
        "notifier.client": notifier_client.SERVICE_KEY_HEADER,
        "chief.door.guard": door_guard.SERVICE_KEY_HEADER,
    }
    assert set(names.values()) == {"X-Coop-Service-Key"}, names


def test_the_door_is_asked_where_it_answers(tmp_path: Path) -> None:
    # One socket, derived alike from the data folder by the door and by every client.
    env = {"COOP_HOME": str(tmp_path)}
    write_key(tmp_path)
    door = door_config.DoorConfig.from_env(env).socket_path
    assert door == tmp_path / "door.sock"
    assert notifier_config.NotifierConfig.from_env(env).door_socket == door
    assert notifier_config.NOTIFY_PATH == notifier_client.NOTIFY_PATH == door_router.NOTIFY_PATH
    assert engine_door.STATUS_PATH == door_router.STATUS_PATH


@pytest.mark.parametrize(
    "env",
    [
        {"COOP_HOME": "/srv/coop-home"},
        {"COOP_HOME": "", "XDG_DATA_HOME": "/srv/xdg", "HOME": "/srv/someone"},
        {"HOME": "/srv/someone"},
        {"COOP_HOME": "/srv/h", "COOP_SERVICE_SOCKET": "/run/coop/service.sock"},
    ],
)
def test_the_doors_ledger_socket_is_where_coop_serve_listens(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # The door's phone asks `coop serve` on the socket it binds by default (or both are told
    # COOP_SERVICE_SOCKET), with the key the door itself checks.
    key_file = tmp_path / "service.key"
    key_file.write_text("shared-key\n")
    key_file.chmod(0o600)
    env = {**env, "COOP_SERVICE_KEY_FILE": str(key_file)}
    config = door_config.DoorConfig.from_env(env)
    assert config.service_socket == service_socket.socket_path(env)
    assert config.service_key == notifier_config.read_service_key(key_file)


def test_the_notification_text_limit_is_one_number() -> None:
    assert lifecycle.MAX_TEXT_CHARS == chief_model.MAX_TEXT_CHARS == 4000
    # The cut at write time always fits the door.
    assert len(lifecycle.cut_text("x" * 50_000)) <= chief_model.MAX_TEXT_CHARS


def test_every_kind_the_engine_writes_the_door_accepts() -> None:
    longest = "k" * 64
    assert lifecycle.KIND_PATTERN.fullmatch(longest)
    assert len(longest) <= door_router.MAX_KIND_CHARS
    assert not lifecycle.KIND_PATTERN.fullmatch("k" * 65)


def test_nothing_here_reads_the_real_environment() -> None:
    # The readers above were given their environment; none fell back to os.environ's HOME.
    env = {"HOME": "/nowhere-real"}
    assert engine_config.data_home(env) == Path("/nowhere-real/.local/share/coop")
    assert door_config.data_home(env) == Path("/nowhere-real/.local/share/coop")
    assert os.environ.get("HOME") != "/nowhere-real"


# ---- the door's answers and the engine's timeout ---------------------------------------------


def test_the_engine_client_timeout_default_is_one_number() -> None:
    # The door checks TELEGRAM_TIMEOUT_S against the engine's client timeout, read from the same
    # environment with the same default (twins: notifier.config, chief.door.config).
    assert (
        notifier_config.DEFAULT_CLIENT_TIMEOUT_S
        == door_config.DEFAULT_ENGINE_CLIENT_TIMEOUT_S
        == 15.0
    )


# Queued, rung, and rung with a message id Telegram's answer could not name (issue 26).
@pytest.mark.parametrize("rung", [None, Rung(42), Rung(None)])
def test_every_answer_the_door_gives_a_notify_is_a_delivery_to_the_notifier(
    rung: Rung | None,
) -> None:
    import json

    answers = [
        door_verbs._answer("41", 7) | door_verbs._ring_answer(rung),
        door_verbs._answer("41", 7) | {"telegram": "not_configured"},
    ]
    for answer in answers:
        assert answer["telegram"] in {"sent", "queued", "not_configured"}
        reply = notifier_outcome.DoorReply(status=200, body=json.dumps(answer).encode())
        policy = notifier_outcome.BackoffPolicy(base_s=1.0, max_s=60.0)
        outcome = notifier_outcome.classify(
            reply, attempt=1, policy=policy, now_epoch=0.0, rand=0.5
        )
        assert isinstance(outcome, notifier_outcome.Delivered), answer


# ---- the batch route (issue 14): its path and its answer's shape -----------------------------

NOTIFY_BATCH_PATH = "/api/coop/engine/notify-batch"


def test_the_batch_route_sits_beside_the_notify_route() -> None:
    # The notifier's batch client posts here: its URL is the notify URL with "-batch" appended,
    # so a notifier configured with any COOP_DOOR_URL finds the batch route of the same door.
    # (When the notifier's twin constant lands, pin it against this one here.)
    assert door_router.NOTIFY_BATCH_PATH == NOTIFY_BATCH_PATH
    assert door_router.NOTIFY_BATCH_PATH == door_router.NOTIFY_PATH + "-batch"
    assert notifier_client.NOTIFY_PATH + "-batch" == NOTIFY_BATCH_PATH


def test_a_batch_row_is_a_notify_body_with_its_outbox_id_required() -> None:
    single = door_router.NotifyBody.model_json_schema()
    row = door_router.NotifyItem.model_json_schema()
    # The notify extras (SPEC21 §1, and issue 28's `urgent`) are optional on both.
    fields = {"text", "kind", "outbox_id", "ask", "settles", "ring", "urgent"}
    assert set(row["properties"]) == set(single["properties"]) == fields
    assert set(row["required"]) == {"text", "kind", "outbox_id"}
    assert row["additionalProperties"] is False
    body = door_router._batch_schema(door_config.DEFAULT_NOTIFY_BATCH_MAX)
    assert body["required"] == ["items"]
    assert body["properties"]["items"]["maxItems"] == 64 == door_config.DEFAULT_NOTIFY_BATCH_MAX


def test_the_batch_answer_is_one_notify_answer_per_row_in_order() -> None:
    import json

    answer_schema = door_router.NotifyBatchAnswer.model_json_schema()
    assert list(answer_schema["properties"]) == ["items"]
    row_answer = answer_schema["$defs"]["NotifyAnswer"]
    assert row_answer == door_router.NotifyAnswer.model_json_schema()
    rows = [
        door_verbs._answer("41", 7) | door_verbs._ring_answer(Rung(42)),
        door_verbs._answer("42", None) | door_verbs._ring_answer(None),
        door_verbs._answer("43", 9) | {"telegram": "not_configured"},
        door_verbs._answer("44", 9)
        | {"telegram": "sent", "telegram_message_id": 40, "already_sent": True},
    ]
    document = json.loads(json.dumps({"items": rows}))
    door_router.NotifyBatchAnswer.model_validate(document)
    assert [row["outbox_id"] for row in document["items"]] == ["41", "42", "43", "44"]
    # Each row's answer, alone, is what the single route answers: a delivery to the notifier.
    policy = notifier_outcome.BackoffPolicy(base_s=1.0, max_s=60.0)
    for row in document["items"]:
        reply = notifier_outcome.DoorReply(status=200, body=json.dumps(row).encode())
        outcome = notifier_outcome.classify(
            reply, attempt=1, policy=policy, now_epoch=0.0, rand=0.5
        )
        assert isinstance(outcome, notifier_outcome.Delivered), row


# ---- the batch route's per-item verdicts (issue 19) ------------------------------------------


def test_the_doors_per_item_verdicts_are_read_by_the_notifier_row_by_row() -> None:
    # The door's judging (chief.door.router.judge_batch) and the notifier's reading
    # (notifier.outcome.classify_batch): accepted rows delivered, the refused row deferred with
    # the door's reason, the rows behind it left untouched.
    import json

    from notifier.delivery import OutboxRow

    rows = [OutboxRow(n, "note", f"row {n}", 0, 0.0, str(n)) for n in (41, 42, 43, 44)]
    items = [{"text": f"row {r.id}", "kind": "note", "outbox_id": r.delivery_key} for r in rows]
    items[2]["kind"] = "k" * (door_router.MAX_KIND_CHARS + 1)
    accepted, rest = door_router.judge_batch(json.dumps({"items": items}).encode(), 64)
    assert [item.outbox_id for item in accepted] == ["41", "42"]
    answers = [door_verbs._answer(item.outbox_id, 7) | {"telegram": "queued"} for item in accepted]
    document = {"items": answers + rest}
    door_router.NotifyBatchAnswer.model_validate(document)
    reply = notifier_outcome.DoorReply(status=200, body=json.dumps(document).encode())
    policy = notifier_outcome.BackoffPolicy(base_s=1.0, max_s=60.0)
    outcomes = notifier_outcome.classify_batch(reply, rows, policy=policy, now_epoch=0, rand=0)
    assert [type(o).__name__ for o in outcomes] == ["Delivered", "Delivered", "Deferred"]
    refusal = outcomes[2]
    assert isinstance(refusal, notifier_outcome.Deferred)
    assert refusal.error.startswith("refused by the door (422): kind: String should have at most")


def test_the_doors_row_limit_words_are_what_the_notifier_reads() -> None:
    import json

    from pydantic import ValidationError

    too_many = {"items": [{"text": "t", "kind": "k", "outbox_id": str(n)} for n in range(9)]}
    with pytest.raises(ValidationError) as refused:
        door_router.judge_batch(json.dumps(too_many).encode(), 8)
    body = json.dumps({"detail": refused.value.errors(include_url=False, include_context=False)})
    reply = notifier_outcome.DoorReply(status=422, body=body.encode())
    assert notifier_outcome.door_batch_limit(reply) == 8
    assert notifier_outcome.smaller_batch(reply, 9) == 8


CHOICE_SAMPLES: list[list[str]] = [
    ["approve", "decline"],
    ["a", "b", "c", "d"],
    ["a", "b", "c", "d", "e"],
    ["x" * 24],
    ["x" * 25],
    ["Yes", "yes"],
    ["ÉTÉ", "été"],
    ["tab\there"],
    ["nel\x85"],
    ["del\x7f"],
    ["\u2003"],
    ["big bag", "small bag"],
    ["é" * 24, "ok"],
]


@pytest.mark.parametrize("labels", CHOICE_SAMPLES, ids=repr)
def test_an_asks_choices_are_judged_alike_by_the_engine_and_the_door(labels: list[str]) -> None:
    # A label the engine files the door must take, or the row would be refused for ever (and
    # hold the engine's FIFO); the engine drops plain spaces around a label and wants at least
    # one, so the samples have neither.
    require_choices = getattr(lifecycle, "require_choices", None)
    if require_choices is None:
        pytest.skip("the engine's --choices rule is not on this branch yet")
    try:
        require_choices(",".join(labels), "owner", "owner")
        engine_takes = True
    except Exception:  # the engine's one-line refusal (UsageError)
        engine_takes = False
    assert engine_takes == (chief_model.choices_refusal(labels) is None)
