"""Issue 44 item 5: a value a file supplies is shown in a report as the text it is (rlbench.report.escaping)."""

import pytest

from rlbench.report.escaping import as_markdown, as_plot_text


@pytest.mark.parametrize(
    "value",
    ["MlpPolicy", "HalfCheetah-v4", "sac learning_rate=0.001", "net_arch=[64,64]", '{"pi":[8]}', "n", "a_b*c", "x - y"],
)
def test_ordinary_values_are_unchanged(value):
    assert as_markdown(value) == value


@pytest.mark.parametrize("number, text", [(3, "3"), (-0.5, "-0.5"), (1e-05, "1e-05"), (3.5, "3.5")])
def test_numbers_are_as_str_writes_them(number, text):
    assert as_markdown(number) == text


@pytest.mark.parametrize(
    "value, shown",
    [
        # a table cell cannot break its row, nor hold raw HTML
        ("x|<img src=x onerror=alert(1)>", "x&#124;&lt;img src=x onerror=alert(1)&gt;"),
        ("a & b", "a &amp; b"),
        ("&lt;", "&amp;lt;"),  # an entity in the file is shown as written, not decoded
        # one line: a line break or control character as Python escapes it
        ("x\n# heading", "x\\n# heading"),
        ("x\r\n\x1b[31mred", "x\\r\\n\\x1b[31mred"),
        ("x\u2028# heading", "x\\u2028# heading"),
        # no link, no image
        ("[click](http://e) ![i](http://t)", "[click]&#40;http://e) ![i]&#40;http://t)"),
        ("policy=$x^$", "policy=&#36;x^&#36;"),  # no mathematics (GitHub's $...$)
        # nothing that starts a block where the value starts a line
        ("# heading", "\\# heading"),
        ("  ## heading", "  \\## heading"),
        ("[ref]: http://e", "\\[ref]: http://e"),
        ("```python", "\\```python"),
        ("- item", "\\- item"),
        ("* item", "\\* item"),
        ("1. item", "1\\. item"),
        ("12) item", "12\\) item"),
        ("> quote", "&gt; quote"),
        ("<script>", "&lt;script&gt;"),
    ],
)
def test_what_markdown_or_html_would_act_on_is_escaped(value, shown):
    assert as_markdown(value) == shown


def test_a_dollar_is_never_mathematics_in_a_figure():
    assert as_plot_text("policy=$x^$") == "policy=\\$x^\\$"
    assert as_plot_text("sac gamma=0.99") == "sac gamma=0.99"
