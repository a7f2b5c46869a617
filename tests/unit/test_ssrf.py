"""The SSRF guard: which addresses are refused, DNS answers judged as a whole, the allowlist."""

from __future__ import annotations

import ipaddress

import pytest

from app.adapters.channels.ssrf import TargetPolicy, refusal_reason, vet_target
from app.domain.errors import PermanentProviderError, TransientProviderError

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "metadata"),
        ("169.254.1.1", "link_local"),
        ("100.100.100.200", "metadata"),
        ("100.64.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "private"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link_local"),
        ("fc00::1", "private"),
        ("fd00:ec2::254", "metadata"),
        ("fec0::1", "site_local"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::a00:1", "private"),
        ("2002:7f00:1::1", "loopback"),
        ("2001:db8::1", "private"),
    ],
)
def test_non_public_addresses_are_refused(address, reason):
    """Loopback, private, link-local, metadata, unspecified, multicast (v4, v6, v4-in-v6)."""
    assert refusal_reason(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    "address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]
)
def test_public_addresses_pass(address):
    """Public IPv4, IPv6 and IPv4-mapped public addresses are allowed."""
    assert refusal_reason(ipaddress.ip_address(address)) is None


def resolver_for(answers: dict[str, list[str]]):
    """An injected resolver with fixed answers; records the names it was asked."""
    asked: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        if host not in answers:
            raise OSError("name does not resolve")
        return answers[host]

    resolve.asked = asked  # type: ignore[attr-defined]
    return resolve


async def test_name_resolving_to_a_private_address_is_refused():
    """A public-looking name whose DNS answer is private is refused (ssrf_refused)."""
    resolver = resolver_for({"hooks.customer.example": ["10.0.0.7"]})
    with pytest.raises(PermanentProviderError) as caught:
        await vet_target("https://hooks.customer.example/in", TargetPolicy(), resolver)
    assert caught.value.detail_class == "ssrf_refused"
    assert "private" in str(caught.value)


async def test_one_private_address_in_the_answer_refuses_the_target():
    """Every resolved address must be public, not just the first."""
    resolver = resolver_for({"mixed.example": ["93.184.216.34", "::1"]})
    with pytest.raises(PermanentProviderError) as caught:
        await vet_target("https://mixed.example/", TargetPolicy(), resolver)
    assert caught.value.detail_class == "ssrf_refused"


async def test_name_resolving_to_ipv4_mapped_loopback_is_refused():
    """An AAAA answer of ::ffff:127.0.0.1 is loopback in disguise."""
    resolver = resolver_for({"sneaky.example": ["::ffff:127.0.0.1"]})
    with pytest.raises(PermanentProviderError):
        await vet_target("http://sneaky.example/", TargetPolicy(), resolver)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://[::1]/hook",
        "http://[::ffff:7f00:1]/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://0.0.0.0/",
    ],
)
async def test_literal_addresses_are_refused_without_asking_dns(url):
    """IP literals are judged directly (IPv4 and IPv6)."""
    resolver = resolver_for({})
    with pytest.raises(PermanentProviderError) as caught:
        await vet_target(url, TargetPolicy(), resolver)
    assert caught.value.detail_class == "ssrf_refused"
    assert resolver.asked == []


async def test_public_name_is_vetted_to_its_first_address():
    """A public target resolves once; the caller connects to that vetted address."""
    resolver = resolver_for({"hooks.example": ["93.184.216.34", "2606:2800:220:1::1"]})
    target = await vet_target("https://hooks.example:8443/in?x=1", TargetPolicy(), resolver)
    assert target.ip == "93.184.216.34"
    assert str(target.connect_url) == "https://93.184.216.34:8443/in?x=1"
    assert target.host_header == "hooks.example:8443"
    assert target.tls_server_name == "hooks.example"


async def test_allowlisted_cidr_and_host_are_permitted():
    """Operators can allow internal targets by CIDR or by host name."""
    resolver = resolver_for({"internal.corp": ["10.1.2.3"]})
    by_cidr = TargetPolicy.from_entries(["127.0.0.0/8", "::1"])
    assert (await vet_target("http://127.0.0.1:9/h", by_cidr, resolver)).ip == "127.0.0.1"
    assert (await vet_target("http://[::1]:9/h", by_cidr, resolver)).ip == "::1"
    by_host = TargetPolicy.from_entries(["internal.corp"])
    assert (await vet_target("http://internal.corp/h", by_host, resolver)).ip == "10.1.2.3"
    with pytest.raises(PermanentProviderError):
        await vet_target("http://10.1.2.3/h", by_host, resolver)


@pytest.mark.parametrize("url", ["ftp://example.com/x", "file:///etc/passwd", "not a url", "/x"])
async def test_non_http_urls_are_permanent_errors(url):
    """Only absolute http(s) URLs are webhook targets."""
    with pytest.raises(PermanentProviderError) as caught:
        await vet_target(url, TargetPolicy(), resolver_for({}))
    assert caught.value.detail_class == "invalid_webhook_url"


async def test_resolution_failure_is_transient():
    """A name that does not resolve (now) is retried: DNS can recover."""
    with pytest.raises(TransientProviderError) as caught:
        await vet_target("https://nowhere.example/", TargetPolicy(), resolver_for({}))
    assert caught.value.detail_class == "dns_error"
