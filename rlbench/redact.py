"""Credentials never leave the process: every place that shows or stores a storage URL or a command
line (args.yml, command.txt, the study's attributes, banners, errors, W&B's config) passes it here.
And text a file supplies never drives the terminal: `printable` escapes its control characters.

`postgresql://user:secret@host/db` becomes `postgresql://user:***@host/db`, and a libpq-style
`password=secret` (URL query or keyword string) becomes `password=***`. Users who want no password in
the URL at all leave it out: libpq reads `PGPASSWORD` or the password file (`~/.pgpass`, `PGPASSFILE`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

MASK = "***"
# scheme://user:password@ (the user may be empty; the password runs to the last @ before the path, so an
# unencoded @ in it is masked too)
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*):(?P<secret>[^/\s]*)@")
# password=secret in a URL query (?password=..&) or a libpq keyword string (password=... host=...)
_KEYWORD_PASSWORD = re.compile(r"(?P<head>\bpassword=)(?P<secret>[^&\s]*)", re.IGNORECASE)
# C0 and C1 controls (escape sequences, carriage returns, backspaces) and the bidirectional overrides that
# reorder what a terminal shows
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def redact(text: str) -> str:
    """`text` with every URL password and `password=` value replaced by ***."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", text)
    return _KEYWORD_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with every credential masked (`--storage URL` and `--storage=URL` alike)."""
    return [redact(token) for token in argv]


def redact_values(value: object) -> Any:
    """Every string in a nested mapping/list (e.g. the saved arguments) with credentials masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: redact_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_values(v) for v in value)
    return value


def printable(text: str) -> str:
    """`text` as one line a terminal shows as it is: each control character written as Python escapes it
    (`\\x1b`, `\\n`, `\\u202e`). For anything read from a file (a manifest's command or error) before it
    reaches the console."""
    return _CONTROL.sub(lambda match: ascii(match[0])[1:-1], text)
