"""The only SQL flowrunner sends: the engine's tables and the application's, and every
statement over them.

``engine_tables`` holds the engine's own tables in the one ``MetaData``; ``migrate``
creates and moves them (Alembic); ``dialects`` keeps every SQLite/PostgreSQL
difference; ``operations`` gathers the engine's operations, each named for what it does
(``claim_due``, ``save_run``, ``check_lease``). ``app_tables`` declares the application's
flows and steps tables and reads all three of its tables once; ``records`` reads and
writes the resource's records; ``flow_rows`` the flow and step rows; ``condition_sql``
shows a condition's SQL.
"""
