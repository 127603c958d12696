"""Title templates fill plain names from a mapping and never evaluate anything else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowrunner.foundations import templates


def test_placeholders_are_filled_from_the_values() -> None:
    values = {"number": "PO-7", "message": "approved", "amount": 12.5, "urgent": True}
    text = templates.render("{number}: {message} ({amount}, urgent={urgent})", values)
    assert text == "PO-7: approved (12.5, urgent=true)"


def test_missing_and_null_names_become_empty() -> None:
    assert templates.render("[{missing}|{none}]", {"none": None}) == "[|]"


def test_doubled_braces_are_literal_braces() -> None:
    assert templates.render("{{number}} is {number}", {"number": 7}) == "{number} is 7"


def test_attribute_index_conversion_and_spec_are_never_evaluated() -> None:
    secret = {"__class__": "leak"}
    values = {"x": "text", "n": [1, 2], "d": secret}
    template = "{x.__class__} {n[0]} {x!r} {x:>20} {d.__class__.__init__} {0} {}"
    assert templates.render(template, values) == template


def test_a_malformed_template_is_returned_as_written() -> None:
    assert templates.render("{oops", {"oops": 1}) == "{oops"
    assert templates.render("close }", {}) == "close }"


def test_placeholders_lists_the_plain_names() -> None:
    assert templates.placeholders("{number}: {message} {x.y} {{no}}") == ("number", "message")


@given(
    st.text(max_size=60),
    st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.text(max_size=10)),
)
def test_render_never_raises(template: str, values: dict[str, str]) -> None:
    assert isinstance(templates.render(template, values), str)


@given(st.dictionaries(st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.text(max_size=10)))
def test_each_plain_placeholder_gets_its_value_verbatim(values: dict[str, str]) -> None:
    template = "|".join("{" + name + "}" for name in values)
    assert templates.render(template, values) == "|".join(values.values())


@given(st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=30))
def test_a_value_with_braces_is_not_read_as_a_template(value: str) -> None:
    sneaky = "{" + value + "} {x.__class__}"
    assert templates.render("<{v}>", {"v": sneaky}) == f"<{sneaky}>"


# -- which templates are safe (the checks at save time refuse the others) ------------------


def test_a_template_of_plain_names_and_doubled_braces_has_no_mistake() -> None:
    assert templates.mistake("{number}: {message} {{literal}} }}") is None
    assert templates.mistake("") is None


@pytest.mark.parametrize(
    "template",
    ["{oops", "close }", "{x.__class__}", "{n[0]}", "{x!r}", "{x:>20}", "{0}", "{}", "{ x }"],
)
def test_every_form_render_leaves_as_written_is_a_mistake(template: str) -> None:
    mistake = templates.mistake(template)
    assert mistake is not None and "{" in mistake
    # render keeps exactly these as written: a refused template is never evaluated.
    assert templates.render(template, {"x": "text", "n": [1], "oops": 1}) == template


@given(st.text(max_size=60))
def test_mistake_never_raises(template: str) -> None:
    assert templates.mistake(template) is None or templates.mistake(template)


@given(
    st.lists(
        st.one_of(
            st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).map(lambda n: "{" + n + "}"),
            st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=8),
            st.sampled_from(["{{", "}}"]),
        ),
        max_size=8,
    ),
    st.text(max_size=10),
)
def test_a_safe_template_renders_as_python_would_with_plain_names(
    pieces: list[str], value: str
) -> None:
    template = "".join(pieces)
    assert templates.mistake(template) is None
    values = {name: value for name in templates.placeholders(template)}
    assert templates.render(template, values) == template.format_map(values)
