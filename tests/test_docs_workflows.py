"""The examples in docs/workflows.md — the seed's late fees and credit check, a renewal
retried, an order waiting for its credit check child and forked from its charge — run
in order as one program, the credit provider a real HTTP service on 127.0.0.1, and
print what the guide says."""

from __future__ import annotations

import re

from guides import run_guide, said_inline
from provider import serving


def test_workflows_guide_examples_run_and_print_what_the_guide_says() -> None:
    with serving() as provider:
        guide = run_guide(
            "workflows.md",
            blocks=7,
            module="workflows_guide",
            names={"credit_provider_url": provider.url},
        )
    guide.check(said_inline(guide.text), at_least=14)
    history = re.search(r"step:\n\n```\n(.*?)```", guide.text, flags=re.S)
    assert history is not None and history.group(1) in guide.printed
    # The credit provider was asked once per application, each with its own key.
    assert sorted(provider.sent_keys("/checks")) == ["run-3/request-check", "run-4/request-check"]
    # Ann's order and its fork: one credit check between them, the fork's charge its own.
    orders = guide.namespace["orders"]
    assert [(run.id, run.flow_name, run.status) for run in orders.runs(1)] == [
        (11, "order", "done"),
        (9, "credit_check", "done"),
        (7, "order", "failed"),
    ]
