"""Signed callbacks: an endpoint as declared and a verified body read (``endpoints``),
its signature judged (``signing``), its receipt, command and event in one transaction
(``receipt``), and the endpoints as a plain ASGI application (``asgi``)."""

from __future__ import annotations

import warnings

_MODULES = frozenset(["asgi", "endpoints", "receipt", "signing"])


def __getattr__(name: str) -> object:
    """A name of the module ``flowrunner.inbound`` was before it became this package (now in
    ``flowrunner.inbound.endpoints``), with a warning."""
    if name.startswith("__") or name in _MODULES:
        raise AttributeError(f"module 'flowrunner.inbound' has no attribute {name!r}")
    from flowrunner.inbound import endpoints

    if not hasattr(endpoints, name):
        raise AttributeError(f"module 'flowrunner.inbound' has no attribute {name!r}")
    warnings.warn(
        f"flowrunner.inbound.{name} is now flowrunner.inbound.endpoints.{name}: "
        "import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(endpoints, name)
