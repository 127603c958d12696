"""Notices delivered: the channels a binding declares and the message each sends
(``channels``), one attempt sent through a channel (``sending``), and the deliverer that
claims due notices, sends each and records what came of it (``deliverer``).

    from flowrunner.delivery import Deliver, Smtp, Webhook
"""

from __future__ import annotations

from flowrunner.delivery.channels import (
    DELIVERY_RETRY,
    Channel,
    Deliver,
    Message,
    Smtp,
    Webhook,
)

__all__ = ["DELIVERY_RETRY", "Channel", "Deliver", "Message", "Smtp", "Webhook"]
