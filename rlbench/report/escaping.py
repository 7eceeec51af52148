"""Values a report shows that a file supplied (a config.yml setting, a manifest's node or error, a peer cell's
error, a run folder's name), escaped for where they are shown, so that they are shown as the text they are.

In markdown (`as_markdown`): one line (control characters and line breaks written as Python escapes them,
`\\n`), no raw HTML (`&`, `<`, `>` as entities), no table cell broken (`|` as an entity, which a table's
row splitting does not see), no link (`](` with its parenthesis an entity), no mathematics (`$`, which GitHub
renders as LaTeX, an entity) and nothing that starts a block (a heading, a list, a fence, a link definition)
where the value starts a line. Ordinary values (`MlpPolicy`, `HalfCheetah-v4`, `learning_rate=0.001`,
`[64,64]`, numbers) are unchanged.

In matplotlib's text (`as_plot_text`: legends, titles), `$` starts mathematics: a setting `$x^$` would stop
the figure from being drawn at all."""

from __future__ import annotations

import re

from rlbench.redact import printable

ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;", "](": "]&#40;", "$": "&#36;"}
_ENTITY = re.compile("|".join(map(re.escape, ENTITIES)))
# Line breaks Python's splitlines sees that are not control characters (printable leaves them)
_LINE_SEPARATOR = re.compile("[\u2028\u2029]")
# What starts a block at a line's start, escaped by a backslash before its mark: an ATX heading, a link
# reference definition (`[name]:`), a code fence; a list item (-, + or * before a space or the end); an
# ordered one (digits, then . or ) before a space or the end). `<` and `>` are entities already.
_BLOCK_START = re.compile(r"^(\s*)([#`~]|\[(?=[^\]]*\]:)|[-+*](?=\s|$))")
_ORDERED_ITEM = re.compile(r"^(\s*\d{1,9})([.)])(?=\s|$)")


def as_markdown(value: object) -> str:
    """`value` (a string, or anything as str() writes it) as markdown inline text showing it as it is."""
    text = _LINE_SEPARATOR.sub(lambda match: ascii(match[0])[1:-1], printable(str(value)))
    text = _ENTITY.sub(lambda match: ENTITIES[match[0]], text)
    text = _BLOCK_START.sub(r"\1\\\2", text, count=1)
    return _ORDERED_ITEM.sub(r"\1\\\2", text, count=1)


def as_plot_text(text: str) -> str:
    """`text` as matplotlib draws it literally: `$` escaped (never mathematics)."""
    return text.replace("$", r"\$")
