"""The docs tests' harness (guides.py) fails a guide that checks nothing, or not all it says."""

from __future__ import annotations

import sys
from pathlib import Path

import guides
import pytest
from guides import said_in_paragraphs, said_inline, said_pairs

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


def run_guide(path: Path, *, blocks: int) -> guides.Guide:
    """The harness on a guide of the test's own, in this test's Python (no wheel needed)."""
    return guides.run_guide(
        path, blocks=blocks, module="a_guide", python=Path(sys.executable), installed=False
    )


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "guide.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_guide_that_prints_what_it_says_passes(tmp_path: Path) -> None:
    guide = run_guide(write(tmp_path, GUIDE), blocks=2)
    assert guide.printed == "total 5\na\nb   c\n"
    assert said_inline(guide.text) == ["total 5", "a"]
    assert said_pairs(guide.text) == ["total 5", "a", "b c"]
    assert said_in_paragraphs(guide.text) == ["total 5", "a", "b c"]
    guide.check(said_pairs(guide.text), at_least=3, any_spacing=True)
    with pytest.raises(AssertionError, match="says it prints 'b c'"):
        guide.check(said_pairs(guide.text), at_least=3)


def test_a_guide_whose_blocks_check_nothing_fails(tmp_path: Path) -> None:
    quiet = GUIDE.replace("prints `", "shows `")
    guide = run_guide(write(tmp_path, quiet), blocks=2)
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
    guide = run_guide(write(tmp_path, checked), blocks=2)
    assert guide.asserts == 1 and said_pairs(guide.text) == ["a", "b c"]
    guide.check(said_pairs(guide.text), at_least=3, any_spacing=True)
    with pytest.raises(AssertionError, match="checks 3 thing"):
        guide.check(said_pairs(guide.text), at_least=4, any_spacing=True)


def test_a_claim_not_printed_fails(tmp_path: Path) -> None:
    wrong = GUIDE.replace("prints `total 5`", "prints `total 6`")
    guide = run_guide(write(tmp_path, wrong), blocks=2)
    with pytest.raises(AssertionError, match="says it prints 'total 6'"):
        guide.check(said_inline(guide.text), at_least=2)


def test_too_few_blocks_fail(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="has 2 Python block"):
        run_guide(write(tmp_path, GUIDE), blocks=3)


def test_the_blocks_run_as_one_program_in_a_folder_of_their_own(tmp_path: Path) -> None:
    shared = GUIDE.replace('print("a")', 'import os\nprint("a", os.listdir("."))')
    guide = run_guide(write(tmp_path, shared), blocks=2)
    assert "a []\n" in guide.printed  # a new, empty project folder


def test_a_failing_block_is_named_by_its_line_in_the_guide(tmp_path: Path) -> None:
    broken = GUIDE.replace('print("b   c")', "raise ValueError(total)")
    with pytest.raises(AssertionError, match=r'(?s)guide.md", line 12.*ValueError: 5'):
        run_guide(write(tmp_path, broken), blocks=2)
