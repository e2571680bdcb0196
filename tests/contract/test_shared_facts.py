"""What the engine's side says and the Chief's side reads, where the two sides' code differs.

`engine/` and `notifier/` on one side and `chief/` on the other import nothing from each other.
What both must say alike (the data folder, the key file and its rule, the loopback rules, the
key header, the routes, the text limit) is written once in the floor below them (`plumbing`,
each with its own tests in tests/unit/plumbing). What is left here is what each side decides in
its own code and the other must accept: the kinds and choices the engine files, which the door
takes; the door's answers, which the notifier reads as deliveries; the batch route's rows and
verdicts.
"""

from __future__ import annotations

import json

import pytest

from chief import model as chief_model
from chief.door import config as door_config
from chief.door import router as door_router
from chief.door import verbs as door_verbs
from chief.phone.ringer import Rung
from engine import lifecycle
from notifier import outcome as notifier_outcome

# ---- what the engine files, the door takes ---------------------------------------------------


def test_every_kind_the_engine_writes_the_door_accepts() -> None:
    longest = "k" * 64
    assert lifecycle.KIND_PATTERN.fullmatch(longest)
    assert len(longest) <= door_router.MAX_KIND_CHARS
    assert not lifecycle.KIND_PATTERN.fullmatch("k" * 65)


# ---- what the door answers, the notifier reads -----------------------------------------------


# Queued, rung, and rung with a message id Telegram's answer could not name (issue 26).
@pytest.mark.parametrize("rung", [None, Rung(42), Rung(None)])
def test_every_answer_the_door_gives_a_notify_is_a_delivery_to_the_notifier(
    rung: Rung | None,
) -> None:
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


def test_a_batch_row_is_a_notify_body_with_its_outbox_id_required() -> None:
    single = door_router.NotifyBody.model_json_schema()
    row = door_router.NotifyItem.model_json_schema()
    # The notify extras (SPEC21 §1, issue 28's `urgent`, issue 34's `amends`) are optional on both.
    fields = {"text", "kind", "outbox_id", "ask", "settles", "ring", "urgent", "amends"}
    assert set(row["properties"]) == set(single["properties"]) == fields
    assert set(row["required"]) == {"text", "kind", "outbox_id"}
    assert row["additionalProperties"] is False
    body = door_router._batch_schema(door_config.DEFAULT_NOTIFY_BATCH_MAX)
    assert body["required"] == ["items"]
    assert body["properties"]["items"]["maxItems"] == 64 == door_config.DEFAULT_NOTIFY_BATCH_MAX


def test_the_batch_answer_is_one_notify_answer_per_row_in_order() -> None:
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
