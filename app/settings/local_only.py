"""Defaults made for one machine that break real mail (README "Configuration").

``REMINDERS_PUBLIC_BASE_URL`` (``http://127.0.0.1:8000``) ends up in every unsubscribe link
and ``REMINDERS_EMAIL_FROM`` (``reminders@localhost``) in every ``From``: fine for the outbox,
wrong in a recipient's inbox. Outside dev mode, with a real email provider, both are refused;
a channel left on the outbox beside a real provider is only warned about (a deployment may
not use that channel).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

OUTBOX = "outbox"
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback_name(host: str) -> bool:
    """True for ``localhost`` (and ``*.localhost``), 127.0.0.0/8 and ::1 (no DNS lookup)."""
    host = host.strip().strip("[]").rstrip(".").lower()
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_public_base_url(public_base_url: str, *, chosen: str) -> None:
    """Refuse a loopback public URL when real mail (``chosen``: the provider setting)
    carries its unsubscribe links."""
    host = urlsplit(public_base_url).hostname or ""
    if is_loopback_name(host):
        raise ValueError(
            f"REMINDERS_PUBLIC_BASE_URL={public_base_url} is this machine's loopback address, "
            f"but {chosen} sends real mail whose unsubscribe "
            "links point there: set the service's public URL (https://reminders.example.com)"
        )


def check_email_from(email_from: str, *, chosen: str) -> None:
    """Refuse a ``From`` address at localhost when real mail goes out."""
    domain = email_from.rpartition("@")[2].strip(" >")
    if is_loopback_name(domain):
        raise ValueError(
            f"REMINDERS_EMAIL_FROM={email_from} is an address at {domain}, but "
            f"{chosen} sends real mail: set an address of a "
            "domain your provider may send for (reminders@example.com)"
        )


def outbox_warnings(providers: dict[str, str]) -> list[str]:
    """Channels left on the outbox (files on this machine) while another sends for real."""
    real = {channel: name for channel, name in providers.items() if name != OUTBOX}
    if not real:
        return []
    sending = " and ".join(
        f"REMINDERS_{channel.upper()}_PROVIDER={name}" for channel, name in sorted(real.items())
    )
    return [
        f"REMINDERS_{channel.upper()}_PROVIDER=outbox: {channel} messages are written to "
        f"files in REMINDERS_OUTBOX_DIR, never sent, while {sending} sends for real"
        for channel, name in sorted(providers.items())
        if name == OUTBOX
    ]
