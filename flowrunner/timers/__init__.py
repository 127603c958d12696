"""Timers on a record's date column (``At``): which timers a change arms and their keys
(``rules``, pure), and the program that fires them (``program``)."""

from __future__ import annotations

from flowrunner import moved

# The names of the module ``flowrunner.timers`` was, with a warning.
__getattr__ = moved.names_now_in("flowrunner.timers", "program")
