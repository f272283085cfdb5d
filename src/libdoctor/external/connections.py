"""Connections kept open between requests: the process's keep-alive pool, by route, and the
addresses each host name resolved to.

Reading a wheel by range asks its host several times (the tail, the rest of the central
directory, RECORD, a build file), and a lock's wheels and index pages mostly live on two
hosts; a TCP connection, a TLS handshake and a DNS lookup per request cost more than the
bytes asked for. ``Pool`` keeps an idle connection once its answer was read to the end,
for the next request on the same route (scheme, host, port, and the proxy in between); each
connection serves one request at a time, taken out while it does. A host name is looked up
once, however many threads connect to it at once. ``Pool(0)`` keeps nothing: every request
its own connection, lookup and TLS context, the plain path beside it that the tests compare
the pool with. A forked child starts with an empty pool.

Nothing here knows a request: what may be sent on a connection (credentials, which origin)
and how long a wait may be are ``external.remote``'s, decided per request.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["IDLE", "POOL", "Pool", "Route"]

IDLE = 16  # idle connections kept per route: as many as requests in flight, and some

# getaddrinfo's (family, type, proto, canonical name, socket address)
_Address = tuple[socket.AddressFamily, socket.SocketKind, int, str, Any]


@dataclass(frozen=True, slots=True)
class Route:
    """Where a connection goes: a connection serves only requests of its own route."""

    scheme: str  # "http" or "https"
    host: str
    port: int
    proxy: tuple[str, int] | None = None  # an HTTP proxy's host and port
    proxy_auth: str | None = field(default=None, repr=False)  # its Proxy-Authorization


@dataclass(slots=True)
class _Lookup:
    """One host's lookup: made by the first thread that asks, waited for by the others."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    addresses: Sequence[_Address] | None = None


class Pool:
    """Idle connections by route, resolved addresses by host, and one TLS context; IDLE
    connections kept per route at most (0: nothing kept, not even an address)."""

    def __init__(self, idle: int = IDLE) -> None:
        self.idle = idle
        self._forget()
        mine = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forget_in_child(mine))

    def _forget(self) -> None:
        """Start empty: a forked child never shares its parent's connections (their answers
        would interleave) nor a lock another thread held at the fork."""
        self._lock = threading.Lock()
        self._connections: dict[Route, list[http.client.HTTPConnection]] = {}
        self._lookups: dict[tuple[str, int], _Lookup] = {}
        self._context: ssl.SSLContext | None = None

    def take(self, route: Route) -> http.client.HTTPConnection | None:
        """An idle connection of ROUTE, now the caller's alone; None when there is none."""
        with self._lock:
            idle = self._connections.get(route)
            return idle.pop() if idle else None

    def give(self, route: Route, connection: http.client.HTTPConnection) -> None:
        """CONNECTION, whose last answer was read to its end, back for the next request;
        closed when IDLE are kept already."""
        with self._lock:
            idle = self._connections.setdefault(route, [])
            if len(idle) < self.idle:
                idle.append(connection)
                return
        connection.close()

    def clear(self) -> None:
        """Close every idle connection and forget every address."""
        with self._lock:
            idle = [c for kept in self._connections.values() for c in kept]
            self._connections.clear()
            self._lookups.clear()
        for connection in idle:
            connection.close()

    def addresses(self, host: str, port: int) -> Sequence[_Address]:
        """HOST's addresses for a TCP connection to PORT, looked up once (a failed lookup is
        not kept: the next asks again)."""
        if self.idle <= 0:
            return _getaddrinfo(host, port)
        with self._lock:
            lookup = self._lookups.setdefault((host, port), _Lookup())
        with lookup.lock:  # threads connecting at once wait for the one lookup
            if lookup.addresses is None:
                lookup.addresses = _getaddrinfo(host, port)
            return lookup.addresses

    def connect(
        self, address: tuple[str, int], timeout: float, source: tuple[str, int] | None = None
    ) -> socket.socket:
        """A TCP connection to ADDRESS (host, port) as ``socket.create_connection`` makes
        it (each address in turn, the first error raised), with the addresses kept."""
        host, port = address
        errors: list[OSError] = []
        for family, kind, proto, _, sockaddr in self.addresses(host, port):
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(timeout)
                if source is not None:
                    sock.bind(source)
                sock.connect(sockaddr)
            except OSError as exc:
                sock.close()
                errors.append(exc)
                continue
            return sock
        if errors:
            raise errors[0]
        raise OSError(f"no address for {host}")

    def context(self) -> ssl.SSLContext:
        """The TLS context of HTTPS connections: http.client's default (the system's
        certificates, ``SSL_CERT_FILE``, hostname checked), made once."""
        if self.idle <= 0:
            return _default_context()
        with self._lock:
            if self._context is None:
                self._context = _default_context()
            return self._context


def _forget_in_child(pool: weakref.ref[Pool]) -> None:
    kept = pool()
    if kept is not None:
        kept._forget()  # the child's copies of the sockets are left to the garbage collector


def _getaddrinfo(host: str, port: int) -> Sequence[_Address]:
    """HOST's addresses; a lookup that failed for now (``EAI_AGAIN``: the resolver did not
    answer) is asked once more before it is an error."""
    try:
        return socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_AGAIN:
            raise
    return socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)


def _default_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    if context.post_handshake_auth is not None:
        context.post_handshake_auth = True
    return context


POOL = Pool()  # the process's: every Http uses it unless given another
