"""The docs tests' harness (guides.py) fails a guide that checks nothing, or not all it says."""

from __future__ import annotations

from pathlib import Path

import pytest
from guides import run_guide, said_in_paragraphs, said_inline, said_pairs

GUIDE = """\
# A guide

```python
total = 2 + 3
print(f"total {total}")
```

prints `total 5`.

```python
print("a")
print("b   c")
```

prints `a` and `b c`, and then nothing else.
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "guide.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_guide_that_prints_what_it_says_passes(tmp_path: Path) -> None:
    guide = run_guide(write(tmp_path, GUIDE), blocks=2, module="a_guide")
    assert guide.printed == "total 5\na\nb   c\n" and guide.namespace["total"] == 5
    assert said_inline(guide.text) == ["total 5", "a"]
    assert said_pairs(guide.text) == ["total 5", "a", "b c"]
    assert said_in_paragraphs(guide.text) == ["total 5", "a", "b c"]
    guide.check(said_pairs(guide.text), at_least=3, any_spacing=True)
    with pytest.raises(AssertionError, match="says it prints 'b c'"):
        guide.check(said_pairs(guide.text), at_least=3)


def test_a_guide_whose_blocks_check_nothing_fails(tmp_path: Path) -> None:
    quiet = GUIDE.replace("prints `", "shows `")
    guide = run_guide(write(tmp_path, quiet), blocks=2, module="a_guide")
    assert said_inline(guide.text) == [] and guide.asserts == 0
    with pytest.raises(AssertionError, match="checks 0 thing"):
        guide.check(said_inline(guide.text), at_least=2)
    # A test may not count on less than the harness's minimum.
    with pytest.raises(AssertionError, match="must count on"):
        guide.check(said_inline(guide.text), at_least=0)


def test_asserts_in_the_blocks_count_as_claims(tmp_path: Path) -> None:
    checked = GUIDE.replace('print(f"total {total}")', "assert total == 5").replace(
        "prints `total 5`", "sets the total"
    )
    guide = run_guide(write(tmp_path, checked), blocks=2, module="a_guide")
    assert guide.asserts == 1 and said_pairs(guide.text) == ["a", "b c"]
    guide.check(said_pairs(guide.text), at_least=3, any_spacing=True)
    with pytest.raises(AssertionError, match="checks 3 thing"):
        guide.check(said_pairs(guide.text), at_least=4, any_spacing=True)


def test_a_claim_not_printed_fails(tmp_path: Path) -> None:
    wrong = GUIDE.replace("prints `total 5`", "prints `total 6`")
    guide = run_guide(write(tmp_path, wrong), blocks=2, module="a_guide")
    with pytest.raises(AssertionError, match="says it prints 'total 6'"):
        guide.check(said_inline(guide.text), at_least=2)


def test_too_few_blocks_fail(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="has 2 Python block"):
        run_guide(write(tmp_path, GUIDE), blocks=3, module="a_guide")
