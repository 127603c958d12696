"""The engine's storage: its tables, their migrations, and the only SQL flowrunner writes.

``schema`` holds the one ``MetaData``; ``migrate`` creates and moves it (Alembic);
``dialects`` keeps every SQLite/PostgreSQL difference; ``operations`` gathers the
operations, each named for what it does (``claim_due``, ``save_run``, ``check_lease``);
``records`` reads and writes the application's own tables.
"""
