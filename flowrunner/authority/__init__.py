"""Principals and roles: who each part of an application runs as, what each may call,
and the lock that keeps those grants reviewed (``flowrunner authority lock|check``)."""
