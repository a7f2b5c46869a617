"""SSRF guard for customer-supplied webhook URLs.

We resolve the host ourselves, refuse the target unless every address is public (or the
operator allowlisted it), and hand the caller one vetted IP to connect to, so a DNS answer
that changes between our check and the connection (rebinding) cannot redirect the request.
IPv6 addresses that embed an IPv4 address (IPv4-mapped, 6to4, NAT64) are judged by the
embedded address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from yarl import URL

from app.domain.errors import PermanentProviderError, TransientProviderError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[list[str]]]

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for ``host`` (IPv4 and IPv6), in its order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal_reason(ip: IPAddress) -> str | None:
    """Why connecting to ``ip`` is refused (loopback, private, ...), or None when it is public."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return refusal_reason(embedded)
        if ip.is_site_local:
            return "site_local"
    checks = (
        ("metadata", ip in _METADATA),
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link_local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved or not ip.is_global),
    )
    return next((name for name, hit in checks if hit), None)


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    """Which non-public targets the operator allows (``REMINDERS_WEBHOOK_ALLOWED_TARGETS``)."""

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> TargetPolicy:
        """Entries are CIDRs, single addresses or host names."""
        networks: list[Network] = []
        hosts: set[str] = set()
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                hosts.add(entry.strip().lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts))

    def allows(self, host: str, ip: IPAddress) -> bool:
        """True when the host name or the address is allowlisted."""
        return host in self.hosts or any(ip in network for network in self.networks)


@dataclass(frozen=True, slots=True)
class VettedTarget:
    """Where to connect: the original URL, and the vetted IP that replaces its host."""

    url: URL
    ip: str

    @property
    def connect_url(self) -> URL:
        """The URL with the vetted IP as its host (port, path and query unchanged)."""
        return self.url.with_host(self.ip)

    @property
    def host_header(self) -> str:
        """The ``Host`` header the endpoint expects."""
        host = self.url.raw_host or ""
        host = f"[{host}]" if ":" in host else host
        return host if self.url.is_default_port() else f"{host}:{self.url.port}"

    @property
    def tls_server_name(self) -> str | None:
        """The name TLS must verify (SNI), for https targets."""
        return self.url.host if self.url.scheme == "https" else None


def _refuse(message: str) -> PermanentProviderError:
    return PermanentProviderError(message, detail_class="ssrf_refused")


def parse_target(raw_url: str) -> URL:
    """The URL if it is an absolute http(s) URL with a host, else a permanent error."""
    try:
        url = URL(raw_url)
    except (TypeError, ValueError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise PermanentProviderError(
            "webhook URL is not an absolute http(s) URL", detail_class="invalid_webhook_url"
        )
    return url


async def vet_target(raw_url: str, policy: TargetPolicy, resolver: Resolver) -> VettedTarget:
    """Resolve and check a webhook URL; ``ssrf_refused`` (permanent) for a forbidden target."""
    url = parse_target(raw_url)
    host = (url.host or "").lower().rstrip(".")
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        addresses = await _resolve(resolver, host, url.port or 443)
    for ip in addresses:
        reason = refusal_reason(ip)
        if reason is not None and not policy.allows(host, ip):
            raise _refuse(f"webhook target {host} resolves to a {reason} address ({ip})")
    return VettedTarget(url, str(addresses[0]))


async def _resolve(resolver: Resolver, host: str, port: int) -> list[IPAddress]:
    try:
        found = await resolver(host, port)
    except (OSError, UnicodeError) as error:
        raise TransientProviderError(
            f"cannot resolve webhook host {host}: {type(error).__name__}", detail_class="dns_error"
        ) from error
    addresses = []
    for text in found:
        try:
            addresses.append(ipaddress.ip_address(text.split("%", 1)[0]))
        except ValueError:
            continue
    if not addresses:
        raise TransientProviderError(
            f"webhook host {host} has no address", detail_class="dns_error"
        )
    return addresses


@dataclass(frozen=True, slots=True)
class TargetCheck:
    """The guard as registration asks it: would a send to this URL be refused?

    The same ``vet_target`` a send runs, so registration and delivery cannot disagree. What
    it does with DNS: a host name is resolved (bounded by ``timeout``) and refused when it
    resolves to a non-public address that is not allowlisted; when DNS fails or is slow the
    URL is accepted, because a name that does not resolve *yet* may resolve at send time,
    where the guard runs again on every attempt.
    """

    policy: TargetPolicy
    resolver: Resolver = system_resolver
    timeout: float = 2.0

    async def refusal(self, raw_url: str) -> str | None:
        """Why sends to ``raw_url`` would be refused, or None when they may go out."""
        try:
            async with asyncio.timeout(self.timeout):
                await vet_target(raw_url, self.policy, self.resolver)
        except (TransientProviderError, TimeoutError):
            return None
        except PermanentProviderError as refused:
            allow = refused.detail_class == "ssrf_refused"
            return (
                f"{refused}; allow it with REMINDERS_WEBHOOK_ALLOWED_TARGETS"
                if allow
                else str(refused)
            )
        return None
