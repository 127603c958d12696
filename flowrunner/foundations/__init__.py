"""Foundations every other part stands on: safe texts and log lines, durations as people
write them, statuses and modes, templates, retry policy, timestamps and payloads.

Nothing here imports anything of flowrunner above it (only ``flowrunner.errors``).
"""
