"""The bounded readers of untrusted files: every way a forged file can break a parser is one UntrustedFileError."""

import pytest

from rlbench.files import (
    UntrustedFileError,
    check_tree,
    parse_json,
    parse_yaml,
    read_bounded_text,
)

# 640 bytes of YAML that expand to 9**7 (4.8 million) values: cheap to parse, exponential to walk.
BILLION_LAUGHS = "a: &a [1,1,1,1,1,1,1,1,1]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdef", "bcdefg", strict=True)
)


def test_deep_json_is_one_error_not_a_recursion_error():
    with pytest.raises(UntrustedFileError, match="nested too deeply to parse"):
        parse_json("[" * 5000 + "]" * 5000)


def test_json_nested_past_the_bound_but_parseable_is_refused():
    with pytest.raises(UntrustedFileError, match="nested more than 64 levels"):
        parse_json("[" * 100 + "]" * 100)
    nested = []
    for _ in range(59):
        nested = [nested]
    assert parse_json("[" * 60 + "]" * 60) == nested


def test_bad_json_syntax_and_bytes_are_one_error():
    with pytest.raises(UntrustedFileError, match="Expecting"):
        parse_json('{"a": ')
    with pytest.raises(UntrustedFileError):
        parse_json(b"\xff\xfe{}")


@pytest.mark.parametrize("text", ["[" * 5000, "{a: " * 3000])
def test_deep_yaml_is_one_error(text):
    with pytest.raises(UntrustedFileError, match=r"nested too deeply|nested more than"):
        parse_yaml(text)


def test_yaml_aliases_are_counted_as_expanded():
    assert len(BILLION_LAUGHS) < 700
    with pytest.raises(UntrustedFileError, match="more than 200000 values"):
        parse_yaml(BILLION_LAUGHS)
    # A few shared aliases (RL Zoo's files use them for common entries) are fine.
    assert parse_yaml("base: &b {gamma: 0.99}\nPendulum-v1: *b\nHopper-v4: {<<: *b, tau: 0.01}\n") == {
        "base": {"gamma": 0.99},
        "Pendulum-v1": {"gamma": 0.99},
        "Hopper-v4": {"gamma": 0.99, "tau": 0.01},
    }


def test_yaml_syntax_error_is_one_line_with_its_position():
    with pytest.raises(UntrustedFileError) as error:
        parse_yaml("a: [1, 2\n")
    assert "\n" not in str(error.value)
    assert "line 2, column 1" in str(error.value)


def test_check_tree_counts_keys_and_values():
    check_tree({"a": [1, 2, 3]}, max_values=6)
    with pytest.raises(UntrustedFileError):
        check_tree({"a": [1, 2, 3]}, max_values=5)


def test_read_bounded_text_refuses_past_the_limit_without_reading_it_all(tmp_path):
    path = tmp_path / "big.yml"
    path.write_bytes(b"a" * 1001)
    with pytest.raises(UntrustedFileError, match="larger than 1000 bytes"):
        read_bounded_text(path, limit=1000)
    assert read_bounded_text(path, limit=1001) == "a" * 1001
    path.write_bytes(b"\xff")
    with pytest.raises(UntrustedFileError, match="not UTF-8"):
        read_bounded_text(path)
