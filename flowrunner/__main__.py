"""``python -m flowrunner``: the same as the ``flowrunner`` command."""

from flowrunner.cli import main

main()
