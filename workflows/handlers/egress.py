"""httpx transports that hold outbound calls to the egress policy (`workflows/core/egress.py`).

The check is made where the connection is opened: the transport's network backend resolves
the host itself (`resolve`, one function a test may replace), checks every address it
resolves to, and connects to a checked address. The URL, the Host header and TLS's server name
(SNI) and certificate check keep the name, since httpcore opens the connection for the origin
it was given and only the backend sees the addresses. A name that resolves to a public address
once and to 127.0.0.1 the next time (DNS rebinding) is caught on the connection it would
open, and so is every redirect's, if a client ever follows them.

Assumption about httpx 0.28 (tests/integration/test_egress.py fails if it breaks):
`HTTPTransport` and `AsyncHTTPTransport` send through `self._pool`, an httpcore connection
pool; the guarded transports replace it with one built on the guarded backend.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import anyio.to_thread
import httpcore
import httpx

from workflows.core import egress
from workflows.core.egress import EgressPolicy, EgressRefused, Refusal

# httpx's own defaults (httpx._config.DEFAULT_LIMITS).
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


def resolve(host: str, port: int) -> list[str]:
    """Return every address `host` resolves to (the system resolver, as httpcore would use)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def checked_addresses(host: str, port: int, addresses: Iterable[str], policy: EgressPolicy) -> list[str]:
    """Return the addresses to connect to, or raise EgressRefused if any of them is refused.

    Every address is checked, not only the first: a resolver answering one public and one
    private address must not leave the choice to the order of the answer.
    """
    found = list(addresses)
    for text in found:
        refusal = egress.address_refusal(egress_address(text), port, policy)
        if refusal is not None:
            raise EgressRefused(named(refusal, host))
    return found


def egress_address(text: str) -> egress.IPAddress:
    address = egress.parse_address(text)
    if address is None:  # getaddrinfo returns numeric addresses only
        raise httpcore.ConnectError(f"the resolver returned {text!r}, which is not an address")
    return address


def named(refusal: Refusal, host: str) -> Refusal:
    """Say which name led to the address (`example.test resolves to 127.0.0.1, which is ...`)."""
    if egress.normal_host(host) == refusal.address or egress.parse_address(host) is not None:
        return refusal
    return Refusal(refusal.address, refusal.rule, f"(resolved from {host}) {refusal.reason}")


def pin(host: str, port: int, policy: EgressPolicy) -> list[str] | None:
    """Addresses to connect to; None when the name itself is allow-listed (connect by name)."""
    if policy.allows_name(host, port):
        return None
    refusal = egress.host_refusal(host, port, policy)
    if refusal is not None:
        raise EgressRefused(refusal)
    return checked_addresses(host, port, resolve(host, port), policy)


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's sync backend, connecting only to addresses the policy allows."""

    def __init__(self, policy: EgressPolicy | None = None) -> None:
        self.policy = policy  # None: the policy in settings, read at each connect
        self.inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = pin(host, port, self.policy or current_policy()) or [host]
        last: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                last = exc
        assert last is not None  # addresses is never empty: getaddrinfo raises instead
        raise last

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise EgressRefused(Refusal(path, "unix_socket", "is a Unix socket"))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    """`GuardedBackend` on the event loop; the resolver runs in a thread, as anyio's own does."""

    def __init__(self, policy: EgressPolicy | None = None) -> None:
        self.policy = policy  # None: the policy in settings, read at each connect
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        policy = self.policy or current_policy()
        addresses = await anyio.to_thread.run_sync(pin, host, port, policy) or [host]
        last: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                last = exc
        assert last is not None  # addresses is never empty: getaddrinfo raises instead
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise EgressRefused(Refusal(path, "unix_socket", "is a Unix socket"))

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def pool_options(limits: httpx.Limits) -> dict[str, Any]:
    return {
        "ssl_context": ssl_context(),
        "max_connections": limits.max_connections,
        "max_keepalive_connections": limits.max_keepalive_connections,
        "keepalive_expiry": limits.keepalive_expiry,
    }


@lru_cache(maxsize=1)
def ssl_context() -> ssl.SSLContext:
    """httpx's default context (certifi's roots); built once, it loads a file each time."""
    return httpx.create_ssl_context()


class GuardedTransport(httpx.HTTPTransport):
    """`httpx.HTTPTransport` whose connections go only where `policy` (by default, the
    settings' policy at the time of each connect) allows."""

    def __init__(self, policy: EgressPolicy | None = None, limits: httpx.Limits = DEFAULT_LIMITS) -> None:
        super().__init__(verify=ssl_context(), limits=limits)  # its pool is replaced below
        backend = GuardedBackend(policy)
        self._pool = httpcore.ConnectionPool(network_backend=backend, **pool_options(limits))


class AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    """`httpx.AsyncHTTPTransport` whose connections go only where the policy allows."""

    def __init__(self, policy: EgressPolicy | None = None, limits: httpx.Limits = DEFAULT_LIMITS) -> None:
        super().__init__(verify=ssl_context(), limits=limits)  # its pool is replaced below
        backend = AsyncGuardedBackend(policy)
        self._pool = httpcore.AsyncConnectionPool(network_backend=backend, **pool_options(limits))


def current_policy() -> EgressPolicy:
    """The policy in settings (SWITCHYARD["EGRESS_ALLOW"]); the default when Django is not set up."""
    from django.conf import settings  # lazy: handlers import and run without Django set up

    if not settings.configured:
        return egress.DEFAULT_POLICY
    return policy_of(tuple(getattr(settings, "SWITCHYARD", {}).get("EGRESS_ALLOW", ())))


@lru_cache(maxsize=8)
def policy_of(entries: tuple[str, ...]) -> EgressPolicy:
    return egress.parse_allow(entries)


def client(**options: Any) -> httpx.Client:
    """An httpx.Client held to the policy. Proxies from the environment are not used: a proxy
    would open the connection instead, out of the check's reach."""
    return httpx.Client(transport=GuardedTransport(), trust_env=False, **options)


def async_client(limits: httpx.Limits = DEFAULT_LIMITS, **options: Any) -> httpx.AsyncClient:
    """`client` for the event loop."""
    return httpx.AsyncClient(transport=AsyncGuardedTransport(limits=limits), trust_env=False, **options)
