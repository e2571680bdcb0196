"""A row's id as a person types it: `7`, or `#7` as every line prints it (`request #7 closed`).

The converter of every id argument of `coop` (and of `chief`, should it take one): argparse
names a converter by its `__name__` when a word does not convert, so a refusal reads
`argument id: invalid id value: '#x'`. Standard library only (nothing at all): the `coop`
CLI's cold path loads it.
"""

from __future__ import annotations


def row_id(text: str) -> int:
    """`7` or `#7` as the id 7 (one `#`, then what `int` takes); ValueError for anything else."""
    digits = text[1:] if text.startswith("#") else text
    if digits.startswith("#"):
        raise ValueError(f"invalid id {text!r}")
    return int(digits)


row_id.__name__ = "id"  # argparse: `invalid id value: '#x'`
