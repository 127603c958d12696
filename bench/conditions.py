"""Benchmark: the compiled condition evaluator, parsing, and rule-engine, on 100,000 records.

Run ``python bench/conditions.py``. Prints seconds and ratios; nothing here is a test.
Targets: ``Condition.matches`` and the evaluator at least 0.8x the speed of a hand-written
lambda; at least 10x rule-engine's evaluation of the same rule (when the ``rule-engine``
package is installed).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from flowrunner import query
from flowrunner.query import parser

RECORDS = 100_000
CONDITION = "status = open and amount > 100"


def records(count: int = RECORDS, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    statuses = ["open", "closed", "draft", "Open"]
    return [
        {"id": i, "status": rng.choice(statuses), "amount": rng.randint(0, 1000)}
        for i in range(count)
    ]


def interleaved(rounds: int, **works: Callable[[], object]) -> dict[str, list[float]]:
    """Each work's timings, one per round; in every round each work runs once, in turn.

    Interleaving spreads the rest of the machine's load over all of them alike; the
    order turns each round so that none always runs first.
    """
    timings: dict[str, list[float]] = {name: [] for name in works}
    names = list(works)
    for round_ in range(rounds):
        turn = round_ % len(names)
        for name in names[turn:] + names[:turn]:
            start = time.perf_counter()
            works[name]()
            timings[name].append(time.perf_counter() - start)
    return timings


def speed_against(baseline: list[float], timings: list[float]) -> float:
    """The median, over the rounds, of the baseline's time over this work's time."""
    return statistics.median(b / t for b, t in zip(baseline, timings, strict=True))


def filter_all(check: Callable[[dict[str, Any]], bool], rows: list[dict[str, Any]]) -> int:
    return sum(1 for row in rows if check(row))


def main() -> None:
    rows = records()
    condition = query.parse(CONDITION, {"status": "text", "amount": "number"})
    compiled = condition.evaluator()

    def by_hand(r: dict[str, Any]) -> bool:
        return r.get("status") == "open" and (r.get("amount") or 0) > 100

    assert filter_all(compiled, rows) == filter_all(by_hand, rows)
    assert filter_all(condition.matches, rows) == filter_all(by_hand, rows)
    rounds = 11
    timings = interleaved(
        rounds,
        hand=lambda: filter_all(by_hand, rows),
        matches=lambda: filter_all(condition.matches, rows),
        evaluator=lambda: filter_all(compiled, rows),
    )
    medians = {name: statistics.median(times) for name, times in timings.items()}
    hand, ours = medians["hand"], medians["evaluator"]
    print(f"records: {len(rows):,}  condition: {CONDITION}  ({rounds} interleaved rounds)")
    print("                        median time   median of the rounds' speed ratios")
    print(f"hand-written lambda     {hand * 1000:8.1f} ms")
    for label, name in [("Condition.matches", "matches"), ("compiled evaluator", "evaluator")]:
        ratio = speed_against(timings["hand"], timings[name])
        print(f"{label:<22}  {medians[name] * 1000:8.1f} ms   {ratio:5.2f}x the lambda's speed")

    texts = [f"status = s{i} and amount > {i} or region in (EU, 'US', x{i})" for i in range(2000)]
    start = time.perf_counter()
    for text in texts:
        query.Condition(parser.parse_node(text))
    cold = time.perf_counter() - start
    print(f"parse (cold, uncached)  {len(texts) / cold:8.0f} conditions/s")

    try:
        import rule_engine
    except ImportError:
        print("rule-engine not installed: pip install 'flowrunner[bench]' to compare")
        return
    rule = rule_engine.Rule("status == 'open' and amount > 100")
    sample = rows[:20_000]
    assert filter_all(rule.matches, sample) == filter_all(compiled, sample)
    theirs = statistics.median(
        interleaved(3, theirs=lambda: filter_all(rule.matches, sample))["theirs"]
    )
    theirs *= len(rows) / len(sample)
    print(f"rule-engine             {theirs * 1000:8.1f} ms   ours is {theirs / ours:5.1f}x faster")


if __name__ == "__main__":
    main()
