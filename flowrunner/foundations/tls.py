"""The TLS contexts of the process's outbound connections, each made once and kept.

Making a context reads a bundle of certificate authorities from disk: 20 to 30 ms of
CPU, where the rest of a call to a nearby service takes well under one. A code
workflow's ``w.call`` and a webhook's post share ``for_http`` (the authorities httpx
trusts: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set, certifi's bundle otherwise); an
SMTP relay over TLS uses ``for_mail`` (the system's authorities, as Python's own
default). A context is made when the first connection needs it, so those variables
are read then; Python's contexts are safe to share between threads and connections.

    >>> for_http() is for_http()
    True
"""

from __future__ import annotations

import functools
import ssl

from flowrunner.foundations import extras


@functools.cache
def for_http() -> ssl.SSLContext:
    """The context every HTTP call and webhook post verifies its server with."""
    httpx = extras.require("httpx", what="an HTTP call")
    context: ssl.SSLContext = httpx.create_ssl_context()
    return context


@functools.cache
def for_mail() -> ssl.SSLContext:
    """The context an SMTP relay's TLS (``ssl`` or ``starttls``) verifies it with."""
    return ssl.create_default_context()
