"""Trying a flow on a record: what happens (``script``), what it means for one flow
(``plan``), the dry run itself (``dry_run``) and what it shows (``result``)."""
