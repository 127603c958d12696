"""Flows from rows: the program business users write as a flow row and step rows.

Its pure part reads and checks rows (``rows``, ``validation``, ``loops``,
``column_facts``, ``spelling``), fixes what a run executes (``snapshot``) and interprets
it (``interpreter/``); its running part writes rows (``edits``, ``orm_hook``, ``files``),
starts runs (``starts``), takes a claimed run one step on (``step``) and tries a flow on
a record without keeping anything (``trial/``).
"""
