"""The fixed columns of a flow row and a step row, as the seed names them.

The binding declares the tables that hold them, the store reads those tables, and rows,
files and snapshots name the columns: all of them take the names from here.

>>> FLOW_COLUMNS[:3]
('id', 'name', 'start')
"""

from __future__ import annotations

FLOW_COLUMNS = (
    "id",
    "name",
    "start",
    "condition",
    "changes",
    "active",
    "calendar",
    "schedule",
)
STEP_COLUMNS = (
    "id",
    "flow_id",
    "position",
    "kind",
    "title",
    "duration",
    "field",
    "value",
    "condition",
    "goto",
    "event",
    "audience",
    "message",
    "mode",
    "remind",
    "on_failure",
    "escalate",
    "escalate_to",
)
# Step columns added after the first release: a steps table made before them still
# mounts; a row that sets one there is refused with a sentence saying to add it.
LATER_STEP_COLUMNS = ("on_failure", "escalate", "escalate_to")
# Flow columns added after the first release, likewise: ``calendar`` names the calendar
# a flow counts business time on; ``schedule`` says when a flow that starts on a
# schedule starts (``0 6 * * mon Europe/Berlin``).
LATER_FLOW_COLUMNS = ("calendar", "schedule")
