"""What a terminal may be given of a text: every line a person reads of `coop` and `chief` (their
answers, their refusals on stderr, the `--json` documents, `chief log`, `chief report`, the
pairing's lines) and every console log line of the services passes through here on its way out.

A text stored in the ledger or in chief.db, or come from the phone, stays exactly as it was
written; only what is printed of it changes. The rule: a character a terminal would act on,
rather than show, is written as its escape, `\\x1b` or `\\u202e`, never emitted:

    C0 controls U+0000-U+001F     NUL, BEL, BS, ESC (every CSI and OSC sequence starts with
                                  it), CR (rewrites the line), LF and TAB (a field is one line:
                                  a newline in a title would forge the next line)
    DEL, C1 controls U+007F-U+009F  U+009B is CSI on its own in many terminals
    bidirectional controls        U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069: an
                                  override reorders the rest of the line, ids and states too
    line separators U+2028-U+2029  some terminals and pagers break the line at them
    lone surrogates U+D800-U+DFFF  no UTF-8 terminal can be given them at all

When the reader goes away (`coop list | head -1`, a pager quit early), a command ends quietly:
no traceback, no message, the status a shell gives a command SIGPIPE ended (141). Every entry
point of `coop`, `chief` and `coop-notifier` runs inside `to_reader`, which is Python's own
recipe (the signal module's "Note on SIGPIPE"): a BrokenPipeError of standard output points
stdout at /dev/null, so the interpreter's flush at exit finds nothing to fail on. SIGPIPE itself
stays ignored, as Python leaves it: a socket whose peer went away is an error to handle, never a
silent death. A BrokenPipeError whose stdout reader is still there (a socket's) is not this
rule's and goes on to the command's own handling.

A backslash is printed as it is, so a text that spells `\\x1b` reads like one that holds ESC;
`--json` tells them apart. Layout newlines are the printer's own (one line per call), and a
text meant to span lines is split at its newlines first and each line escaped (`chief log`).
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from collections.abc import Callable

#: What a shell reports of a command SIGPIPE ended (128 + 13): `cmd | head`'s usual status.
EXIT_READER_GONE = 141

#: The characters printed as their escape (see the module docstring). Patterns, not compiled
#: here: `re` compiles (about 1 ms) and caches one the first time a text holds anything unusual,
#: which a cold `coop` printing plain titles never pays.
_ACTING = r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
#: Inside a JSON document's strings `json.dumps` escapes C0 itself, and outside them its layout
#: is spaces and newlines: only what it leaves raw (DEL and above, with `ensure_ascii=False`
#: everything above) is escaped, as JSON's `\uXXXX`, which reads back as the very same text.
_ACTING_IN_JSON = r"[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _spelled(found: re.Match[str]) -> str:
    char = found.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def _json_spelled(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def shown(text: str) -> str:
    """`text` as one line a terminal shows and never acts on."""
    if text.isprintable():  # every character `_ACTING` names is one Python calls unprintable
        return text
    return re.sub(_ACTING, _spelled, text)


def shown_json(document: str) -> str:
    """A `json.dumps` document a terminal shows and never acts on, which `json.loads` reads
    back exactly as the document itself would be read."""
    if document.isascii() and "\x7f" not in document:  # `ensure_ascii`'s, with no DEL
        return document
    return re.sub(_ACTING_IN_JSON, _json_spelled, document)


def reader_gone() -> bool:
    """Whether standard output is a pipe or socket whose reader has gone away (poll says
    POLLERR or POLLHUP of its write end)."""
    import select
    import sys

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        events = poller.poll(0)
    except (AttributeError, OSError, ValueError):
        return False
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events)


def to_reader(main: Callable[[], int]) -> int:
    """Run an entry point's `main`, flushing standard output at its end; when the reader of
    that output went away meanwhile, end quietly with `EXIT_READER_GONE` (see the module
    docstring). argparse's `--help` and usage exits are flushed the same way."""
    import sys

    try:
        try:
            status = main()
        except SystemExit:
            sys.stdout.flush()
            raise
        sys.stdout.flush()
    except BrokenPipeError:
        if not reader_gone():
            raise
        return _quiet_exit()
    return status


def _quiet_exit() -> int:
    """Point stdout at /dev/null: the interpreter flushes it at exit, and what is still
    buffered must not fail there with a message of its own."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_READER_GONE
