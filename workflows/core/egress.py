"""The egress policy: which addresses outbound calls made on a definition's behalf may reach.

Pure (standard library only). By default an address is refused when it is loopback, private,
link-local, multicast, unspecified, reserved or a cloud metadata endpoint; `EgressPolicy`
carries what an admin allow-listed (SWITCHYARD_EGRESS_ALLOW). The same classification serves
the save-time check of literal addresses in a definition (`literal_refusal`) and the
connect-time check of every resolved address (`address_refusal`, called by
`workflows/handlers/egress.py`), so a name that resolves somewhere refused is caught at
connect time, DNS rebinding included.

Hosts are read the way `inet_aton` and browsers read them, so the forms written to slip past a
filter are classified by the address they mean: `2130706433`, `0x7f000001`, `0177.0.0.1`,
`127.1`, `::ffff:127.0.0.1`, `[::1]` and trailing dots.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
ALLOW_SETTING: Final = "SWITCHYARD_EGRESS_ALLOW"

# Instance metadata services: AWS/GCP/Azure/OpenStack, AWS ECS task metadata, AWS over IPv6,
# Alibaba Cloud. Checked before link-local so the message says what the address really is.
METADATA_ADDRESSES: Final = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
METADATA_NAMES: Final = frozenset({"metadata.google.internal", "metadata", "instance-data"})
LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
# NAT64's well-known prefix embeds an IPv4 address in the last 32 bits (RFC 6052).
NAT64: Final = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class Allowance:
    """One allow-list entry: a host name, or an address or network, with an optional port."""

    text: str
    name: str | None = None
    network: IPNetwork | None = None
    port: int | None = None

    def covers(self, name: str, address: IPAddress | None, port: int | None) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.name is not None:
            return self.name == name
        return address is not None and self.network is not None and address in self.network


@dataclass(frozen=True)
class EgressPolicy:
    """What an admin allowed beyond the default; everything else refused stays refused."""

    allow: tuple[Allowance, ...] = ()

    def allows_name(self, name: str, port: int | None) -> bool:
        """True if the host name itself is allow-listed (its addresses are then not checked)."""
        host = normal_host(name)
        return any(a.name is not None and a.covers(host, None, port) for a in self.allow)

    def allows_address(self, address: IPAddress, port: int | None) -> bool:
        return any(a.network is not None and a.covers("", unmapped(address), port) for a in self.allow)


@dataclass(frozen=True)
class Refusal:
    """Why a call may not go to `address`: `rule` is the rule's name, `reason` says it in words."""

    address: str
    rule: str
    reason: str

    def __str__(self) -> str:
        return (
            f"egress refused: {self.address} {self.reason} (rule: {self.rule}); "
            f"allow it with {ALLOW_SETTING}={self.address} if it is meant to be reached"
        )


class EgressRefused(Exception):
    """Raised where a connection would go to a refused address."""

    def __init__(self, refusal: Refusal) -> None:
        self.refusal = refusal
        super().__init__(str(refusal))


DEFAULT_POLICY: Final = EgressPolicy()


def parse_allow(entries: list[str] | tuple[str, ...]) -> EgressPolicy:
    """Read allow-list entries (`host`, `host:port`, `10.0.0.0/8`, `[::1]:8080`, `*:port` is not one).

    Raise ValueError naming the entry that is not a host, an address or a network.
    """
    return EgressPolicy(tuple(parse_allowance(e.strip()) for e in entries if e.strip()))


def parse_allowance(entry: str) -> Allowance:
    host, port = split_port(entry)
    if not host:
        raise ValueError(f"{ALLOW_SETTING}: {entry!r} names no host, address or network.")
    try:
        return Allowance(entry, network=ipaddress.ip_network(unbracket(host), strict=False), port=port)
    except ValueError:
        pass
    address = parse_address(host)
    if address is not None:
        return Allowance(entry, network=ipaddress.ip_network(unmapped(address)), port=port)
    if "/" in host or any(c.isspace() for c in host):
        raise ValueError(f"{ALLOW_SETTING}: {entry!r} is not a host name, an address or a network.")
    return Allowance(entry, name=normal_host(host), port=port)


def split_port(entry: str) -> tuple[str, int | None]:
    """Split `host:port` (`[v6]:port`); a bare IPv6 address or network has no port."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, port_of(rest[1:], entry) if rest.startswith(":") else None
    if entry.count(":") == 1:
        host, port = entry.split(":")
        return host, port_of(port, entry)
    return entry, None


def port_of(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{ALLOW_SETTING}: {entry!r} has a port that is not a number in 1..65535.")
    return int(text)


def unbracket(host: str) -> str:
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def normal_host(host: str) -> str:
    """Lower-case, without brackets and without trailing dots (`Example.COM.` is `example.com`)."""
    return unbracket(host).rstrip(".").lower()


def parse_address(host: str) -> IPAddress | None:
    """Return the address a host means if it is an IP literal in any form `inet_aton` takes, else None."""
    text = normal_host(host).split("%", 1)[0]
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            return None
    return parse_ipv4(text)


def parse_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """`inet_aton`: 1 to 4 parts, each decimal, octal (leading 0) or hex (0x); the last fills the rest."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = [parse_part(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    values = [n for n in numbers if n is not None]
    head, last = values[:-1], values[-1]
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    value = last
    for index, part in enumerate(head):
        value += part << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def parse_part(part: str) -> int | None:
    lowered = part.lower()
    try:
        if lowered.startswith("0x"):
            return int(lowered[2:] or "0", 16)
        if len(lowered) > 1 and lowered.startswith("0"):
            return int(lowered[1:], 8)
        return int(lowered, 10) if lowered.isdigit() else None
    except ValueError:
        return None


def unmapped(address: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped, IPv4-compatible or NAT64 IPv6 address, else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in NAT64 or (int(address) >> 32 == 0 and int(address) > 1):
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def classify(address: IPAddress) -> tuple[str, str] | None:
    """Return (rule, reason) if the default refuses `address`, else None."""
    ip = unmapped(address)
    if ip in METADATA_ADDRESSES:
        return "metadata", "is a cloud metadata address"
    checks: tuple[tuple[bool, str, str], ...] = (
        (ip.is_unspecified, "unspecified", "is the unspecified address (it reaches this host)"),
        (ip.is_loopback, "loopback", "is a loopback address"),
        (ip.is_link_local, "link_local", "is a link-local address"),
        (ip.is_multicast, "multicast", "is a multicast address"),
        (ip.is_reserved, "reserved", "is a reserved address"),
        (ip.is_private, "private", "is a private address"),
        (not ip.is_global, "reserved", "is a reserved or non-public address"),
    )
    return next(((rule, reason) for hit, rule, reason in checks if hit), None)


def address_refusal(address: IPAddress, port: int | None, policy: EgressPolicy) -> Refusal | None:
    """Refusal of a resolved (or literal) address, unless the policy allows it."""
    found = classify(address)
    if found is None or policy.allows_address(address, port):
        return None
    return Refusal(str(unmapped(address)), *found)


def name_refusal(host: str, port: int | None, policy: EgressPolicy) -> Refusal | None:
    """Refusal of a host name that is loopback or metadata by its name alone (`localhost`)."""
    name = normal_host(host)
    if policy.allows_name(name, port):
        return None
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return Refusal(name, "loopback", "is a name for the loopback address")
    if name in METADATA_NAMES:
        return Refusal(name, "metadata", "is a cloud metadata name")
    return None


def host_refusal(host: str, port: int | None, policy: EgressPolicy) -> Refusal | None:
    """Refusal of a URL's host as written: an IP literal in any form, or a refused name."""
    address = parse_address(host)
    if address is None:
        return name_refusal(host, port, policy)
    if policy.allows_name(host, port):
        return None
    return address_refusal(address, port, policy)


def literal_refusal(url: str, policy: EgressPolicy) -> Refusal | None:
    """Refusal of a URL whose host is refused as written; names are left to connect time.

    A URL with placeholders in its host cannot be judged here (the connect-time check does).
    """
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None
    host = parts.hostname or ""
    if not host or "{" in host:
        return None
    return host_refusal(host, port, policy)
