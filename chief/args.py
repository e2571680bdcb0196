"""The argument parser of the `chief` entry points that run a service (`serve`,
`telegram-emulator`): a usage error is one line on stderr and exit status 2, not argparse's
usage block."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error prints `prog: message (see prog --help)` and exits 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
