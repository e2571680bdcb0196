"""The argument parser of the `chief` entry points that run a service (`serve`,
`telegram-emulator`), and the argument types they share: a usage error is one line on stderr and
exit status 2, not argparse's usage block."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection
from typing import NoReturn

from plumbing.terminal import shown

EXIT_USAGE = 2
#: The ports a TCP socket can bind; 0 asks the operating system for any free one.
MAX_PORT = 65535


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error prints `prog: message (see prog --help)` and exits 2."""

    def error(self, message: str) -> NoReturn:
        # argparse quotes an unrecognised argument as it came: escaped, as every line is.
        print(shown(f"{self.prog}: {message} (see {self.prog} --help)"), file=sys.stderr)
        raise SystemExit(EXIT_USAGE)

    def checked(
        self, options: argparse.Namespace, own_words: Collection[str] = ()
    ) -> argparse.Namespace:
        """`options`, once every text in it is text a file, a database or a log line can carry
        (`text_problem`); else the usage error naming the option. The arguments in `own_words`
        are left to the command, which refuses them in its own words."""
        for name, value in vars(options).items():
            problem = None if name in own_words else text_problem(value)
            if problem is not None:
                self.error(f"argument --{name.replace('_', '-')} {problem}")
        return options


def text_problem(value: object) -> str | None:
    """What is wrong with a text argument, or None: Python hands argv bytes that are not UTF-8
    over as lone surrogates, which no database, JSON body or terminal line can carry."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        return None
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    return None


def port_number(raw: str) -> int:
    """`--port P`: 0..65535, 0 for any free port. Checked here because the socket layer takes a
    larger number modulo 65536 (99999 bound port 34463)."""
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(
            f"expected a port number from 0 to {MAX_PORT} (0: any free port), got {raw!r}"
        )
    return port
