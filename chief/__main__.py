"""`python -m chief ...` is the `chief` console script."""

from __future__ import annotations

import sys

from chief.cli import main

if __name__ == "__main__":
    sys.exit(main())
