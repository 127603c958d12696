"""Jobs: work an application declares in code, on an event or at times.

``spec`` holds the declarations (``Job``, ``Plan``), ``schedules`` the cron slots on a
zone's wall clock, and ``program`` mounts them on a runner and runs them (``Jobs``)."""

from __future__ import annotations

from flowrunner import moved

# The names of the module ``flowrunner.jobs`` was, with a warning.
__getattr__ = moved.names_now_in("flowrunner.jobs", "program")
