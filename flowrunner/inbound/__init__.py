"""Signed callbacks: an endpoint as declared and a verified body read (``endpoints``),
its signature judged (``signing``), its receipt, command and event in one transaction
(``receipt``), and the endpoints as a plain ASGI application (``asgi``)."""

from __future__ import annotations

from flowrunner import moved

# The names of the module ``flowrunner.inbound`` was, with a warning.
__getattr__ = moved.names_now_in("flowrunner.inbound", "endpoints")
