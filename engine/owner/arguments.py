"""A routed call's arguments, checked against its verb's signature before the verb runs.

The owner service takes a method name, a list and an object from JSON, and a verb written for
Python callers would meet them unchecked: a list where a `str` is meant raises `TypeError` deep
in a `dict` lookup, an integer past SQLite's 64 bits raises `OverflowError` at the bind. So the
owner checks each call first, with pydantic, in strict mode (JSON's types are the verbs' types:
no `"1"` for an id, no `1` for a flag), and refuses a wrong one naming the parameter:

    take_todo: todo_id: Input should be a valid integer (got a list)

Two checks pydantic has no words for follow: an integer must fit SQLite's INTEGER, and a string
must be Unicode that UTF-8 can carry (JSON can spell a lone surrogate, SQLite cannot store it).

Imported by the owner service only: pydantic stays off the `coop` CLI's path.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from engine.errors import ArgumentError

SQLITE_INTEGER_MIN = -(2**63)
SQLITE_INTEGER_MAX = 2**63 - 1
_STRICT = ConfigDict(strict=True, extra="forbid", arbitrary_types_allowed=True)

_MODELS: dict[Callable[..., Any], type[BaseModel]] = {}
#: A verb's first parameter, the transaction its caller hands in: never a shipped argument.
HANDED_IN = "unit"


def _model(fn: Callable[..., Any]) -> type[BaseModel]:
    """One pydantic model per verb, its fields the verb's parameters (built once)."""
    model = _MODELS.get(fn)
    if model is None:
        hints = typing.get_type_hints(fn)
        fields: dict[str, Any] = {}
        for name, parameter in inspect.signature(fn).parameters.items():
            if name == HANDED_IN:
                continue
            default = ... if parameter.default is inspect.Parameter.empty else parameter.default
            fields[name] = (hints.get(name, Any), default)
        model = create_model(f"{fn.__name__}_arguments", __config__=_STRICT, **fields)
        _MODELS[fn] = model
    return model


def check(method: str, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> None:
    """Raise `ArgumentError` naming the first parameter whose value does not fit `fn`."""
    signature = inspect.signature(fn)
    handed_in = next(iter(signature.parameters), None) == HANDED_IN
    try:
        bound = signature.bind(*((None,) if handed_in else ()), *args, **kwargs)
    except TypeError as exc:
        raise ArgumentError(f"{method}: {exc}") from None
    bound.arguments.pop(HANDED_IN, None)
    try:
        _model(fn).model_validate(dict(bound.arguments))
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "arguments"
        given = _type_name(_at(bound.arguments, first["loc"]))
        raise ArgumentError(f"{method}: {where}: {first['msg']} (got {given})") from None
    for name, value in bound.arguments.items():
        problem = _beyond_sqlite(value)
        if problem:
            raise ArgumentError(f"{method}: {name}: {problem}")


def _at(arguments: dict[str, Any], loc: tuple[int | str, ...]) -> Any:
    value: Any = arguments
    for part in loc:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int) and not isinstance(value, bool):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _beyond_sqlite(value: Any) -> str | None:
    """Why SQLite could not store `value` (nested values included), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if not SQLITE_INTEGER_MIN <= value <= SQLITE_INTEGER_MAX:
            return "the integer does not fit in 64 bits"
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "the text is not valid Unicode (a lone surrogate)"
        return None
    if isinstance(value, list):
        return next(filter(None, map(_beyond_sqlite, value)), None)
    if isinstance(value, dict):
        return next(filter(None, map(_beyond_sqlite, [*value.keys(), *value.values()])), None)
    return None
