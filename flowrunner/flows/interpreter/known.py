"""What an advance reads of its flow again and again, worked out once per snapshot.

A snapshot never changes once built, and a runner builds its config once; yet every
advance of every run asks again what kind a step is (``reading.kind`` reads several of
its columns) and where the flow goes after a position. ``of`` hands out one ``Known``
per snapshot object and config object, which works each answer out the first time it
is asked and looks it up after. It is held by the snapshot's identity and only while
the snapshot lives: a flow edited is a new snapshot, and is read afresh.
"""

from __future__ import annotations

import weakref

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.interpreter import reading


class Known:
    """What has been read of one snapshot's steps under one config."""

    def __init__(self, snap: snapshot.FlowSnapshot, cfg: config_mod.InterpreterConfig) -> None:
        self.cfg = cfg
        # Each step's kind, or the sentence saying why it is broken, by the step's
        # identity (the step is kept with it, so an identity is never mistaken).
        self._kinds: dict[int, tuple[snapshot.StepSpec, config_mod.KindConfig | str]] = {}
        # The position after each (in the snapshot's order); the snapshot itself is not
        # kept, or what is known of it would keep it alive.
        self._following = {p: snap.next_position(p) for p in snap.positions}

    def kind(self, step: snapshot.StepSpec) -> config_mod.KindConfig:
        """``reading.kind``: the step's application kind, or ``Broken`` as it would say."""
        held = self._kinds.get(id(step))
        if held is None or held[0] is not step:
            try:
                found: config_mod.KindConfig | str = reading.kind(step, self.cfg)
            except reading.Broken as broken:
                found = broken.message
            held = self._kinds[id(step)] = (step, found)
        if isinstance(held[1], str):
            raise reading.Broken(step, held[1])
        return held[1]

    def next_position(self, position: int) -> int | None:
        """``FlowSnapshot.next_position``: the position after this one, or None."""
        if position in self._following:
            return self._following[position]
        # A position the flow does not have (a state saved under another flow).
        later = [p for p in self._following if p > position]
        return later[0] if later else None


# The Known of each live snapshot, by its id, with a weak reference to the snapshot (it
# says whether that id still names the same snapshot) and the config it was read under.
_HELD: dict[int, tuple[weakref.ref[snapshot.FlowSnapshot], Known]] = {}


def of(snap: snapshot.FlowSnapshot, cfg: config_mod.InterpreterConfig) -> Known:
    """The Known of this snapshot under this config (another config starts it afresh)."""
    held = _HELD.get(id(snap))
    if held is not None and held[0]() is snap and held[1].cfg is cfg:
        return held[1]
    known = Known(snap, cfg)
    key = id(snap)
    _HELD[key] = (weakref.ref(snap, lambda gone: _forget(key, gone)), known)
    return known


def _forget(key: int, gone: weakref.ref[snapshot.FlowSnapshot]) -> None:
    """A snapshot died: drop its Known, unless its id names a newer one already."""
    held = _HELD.get(key)
    if held is not None and held[0] is gone:
        del _HELD[key]
