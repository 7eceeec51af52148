"""Safe parsing of RL Zoo's `key:value` command-line values and string-encoded file values.

Never calls `eval`. A value is parsed with `ast` and accepted only if it is built from literals:
numbers, strings, True/False/None, lists, tuples, dicts, sets, unary +/-, and `dict(k=v, ...)` calls
nested to any depth. Bare words (`auto`, `auto_0.1`, `lin_7.3e-4`, `relu`, `nn.ReLU`) are strings,
so RL Zoo users need not quote them. Anything else (names, attributes, other calls, operators,
comprehensions) is refused with `LiteralError`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any, cast

# A bare word: identifier-like start, then letters, digits and . _ - + (for lin_7.3e-4, auto_0.1).
_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.+\-]*")


class LiteralError(ValueError):
    """A value is not a literal (and would have needed `eval`)."""


def parse_value(text: str) -> Any:
    """The Python value of `text`, read as a literal, or as a bare-word string."""
    stripped = text.strip()
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError:
        tree = None
    if tree is not None and isinstance(tree.body, ast.Constant):  # numbers, strings, True/False/None
        return tree.body.value
    if _BARE_WORD.fullmatch(stripped):  # before the AST walk: lin_1e-3 would parse as `lin_1e - 3`
        return stripped
    if tree is None:
        raise LiteralError(f"not a literal: {text!r}")
    return _literal(tree.body, text)


_SEQUENCES = {ast.List: list, ast.Tuple: tuple, ast.Set: set}


def _literal(node: ast.AST, text: str) -> Any:
    # Names and dotted names (RL Zoo writes activation_fn=nn.ReLU inside dict(...)) are read as strings.
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _literal(node.operand, text)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    elif isinstance(node, ast.List | ast.Tuple | ast.Set):
        return _SEQUENCES[type(node)](_literal(e, text) for e in node.elts)
    elif (items := _mapping_items(node)) is not None:
        return {_literal(k, text): _literal(v, text) for k, v in items}
    elif isinstance(node, ast.Name | ast.Attribute):
        dotted = ast.unparse(node)
        if _BARE_WORD.fullmatch(dotted):
            return dotted
    raise LiteralError(f"not a literal: {text!r} (at {ast.unparse(node)!r})")


def _mapping_items(node: ast.AST) -> list[tuple[ast.expr, ast.expr]] | None:
    """The (key, value) nodes of a dict display `{k: v}` or a call `dict(k=v)`; None for anything else."""
    if isinstance(node, ast.Dict) and None not in node.keys:
        keys = cast(list[ast.expr], node.keys)  # no None (a `**mapping` entry), checked above
        return list(zip(keys, node.values, strict=True))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
        and all(kw.arg is not None for kw in node.keywords)
    ):
        return [(ast.Constant(kw.arg), kw.value) for kw in node.keywords]
    return None


def parse_key_values(tokens: Sequence[str], option: str) -> dict[str, Any]:
    """RL Zoo's `key:value key:value` lists: split on the first colon; duplicate keys are an error."""
    result: dict[str, Any] = {}
    for token in tokens:
        key, sep, raw = token.partition(":")
        if not sep or not key.strip():
            raise LiteralError(f"{option}: expected key:value, got {token!r}")
        key = key.strip()
        if key in result:
            raise LiteralError(f"{option}: key {key!r} given twice ({token!r})")
        try:
            result[key] = parse_value(raw)
        except LiteralError as error:
            raise LiteralError(f"{option} {key}: {error}") from None
    return result
