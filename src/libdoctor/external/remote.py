"""A wheel on an index read by HTTP range requests: its index, never its body.

``read_remote_wheel`` hands ``zipfile`` a seekable, read-only file (``RangeFile``) whose reads
are ``Range`` requests: the last 64 KiB first (the end-of-central-directory record, and in most
wheels the whole central directory and the ``.dist-info`` members with it), then whatever of
the central directory is left, then METADATA and RECORD together. A 700 MB cuDNN wheel costs
about 64 KiB. A server that refuses ranges (it answers 200 with the whole body, or 416) gets
a full download instead, streamed through the cache and checked against the index's sha256.

What was read is kept in the user cache by the wheel's sha256
(``<cache>/wheel-index/<sha256>.json``): planning the same wheel again asks nothing of the
network. What else is read of a wheel (``RemoteMembers``: a few members in part, such as its
extension modules' dynamic sections) is kept beside it (``save_note``: ``<sha256>.<key>.json``).

The standard library only (http.client): proxies (``*_proxy``, ``no_proxy``) and
certificates (``SSL_CERT_FILE``) as urllib takes them by default; credentials from the URL's
userinfo, or from an index URL on the same host (pip's report names files without them),
sent as basic auth and never along a redirect. Connections are kept open between requests
and wheels (``external.connections``: one lookup, one TLS handshake per connection, not
per request). Every failure is one ``LibdoctorError`` line.

A server is not trusted to be honest or quick: no answer is read past the bytes asked for,
a full download stops at ``MAX_DOWNLOAD``, the zip's directory and members at the bounds
``environment.wheel`` sets, and one wheel, every request and wait included, at ``DEADLINE``
(each receive waits at most ``TIMEOUT`` and never past it, so a server trickling a byte
every few seconds is cut off too). A kept connection carries no credentials and no
deadline of its own: each request sets both; one whose answer was not read to its end is
closed, never kept.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.client
import io
import json
import os
import re
import socket
import tempfile
import time
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from http.client import HTTPException, HTTPResponse, IncompleteRead
from typing import Any, BinaryIO, Literal, cast

from libdoctor.bounded import loads_json, read_file
from libdoctor.environment.distributions import canonicalize_name
from libdoctor.environment.parsed import write_atomic
from libdoctor.environment.record import RecordEntry
from libdoctor.environment.wheel import (
    WheelFile,
    dist_info_members,
    open_wheel,
    read_member,
    wheel_from_archive,
)
from libdoctor.errors import LibdoctorError
from libdoctor.external.connections import POOL, Pool, Route
from libdoctor.external.member import MemberError, member_data
from libdoctor.version import __version__

__all__ = [
    "Http",
    "RangeFile",
    "RemoteMembers",
    "RemoteRead",
    "cached_note",
    "cached_wheel",
    "read_remote_wheel",
    "save_note",
]

TAIL = 64 * 1024 + 22  # end-of-central-directory (22 bytes) after the longest zip comment
BLOCK = 64 * 1024  # the least one read on demand fetches
GAP = 256 * 1024  # wanted ranges closer than this are fetched in one request
SLACK = 1024  # a local header's extra field may be longer than the central directory's
TIMEOUT = 60.0  # seconds without a byte before a request fails
DEADLINE = 600.0  # seconds one wheel may take in all: every request, wait and download
MAX_DOWNLOAD = 8 << 30  # bytes of a full download (a server that refuses ranges)
_CHUNK = 1 << 20
_FORMAT = 1  # of the cache files
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+)")

_HEADERS = {
    "Accept-Encoding": "identity",  # byte ranges of the file, not of a compressed stream
    "User-Agent": f"libdoctor/{__version__} Python-http.client",
}

How = Literal["range", "download", "cache", "file"]


@dataclass(frozen=True, slots=True)
class RemoteRead:
    """A wheel read from a URL, and what reading it cost."""

    wheel: WheelFile
    size: int  # the wheel's bytes
    fetched: int  # bytes that came over the network (0 from the cache)
    requests: int
    how: How
    extra: tuple[tuple[str, bytes], ...] = ()  # members asked for beside the dist-info

    def member(self, name: str) -> bytes | None:
        return next((data for member, data in self.extra if member == name), None)


class _RangesRefused(Exception):
    """The server sends whole bodies: RESPONSE is one (already open), or None."""

    def __init__(self, response: HTTPResponse | None) -> None:
        super().__init__("the server does not honour ranges")
        self.response = response


# --------------------------------------------------------------------------- HTTP


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """URL without its userinfo, and the basic-auth header value that userinfo gives."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


def _authorization(url: str, credentials: Iterable[str]) -> tuple[str, str | None]:
    """URL without userinfo, and the credentials for it: its own, else those of the first
    index URL (``--index-url``, ``--extra-index-url``) on the same scheme, host and port."""
    bare, auth = _split_userinfo(url)
    if auth is not None:
        return bare, auth
    where = _origin(bare)
    for source in credentials:
        if where is not None and _origin(source) == where:
            auth = _split_userinfo(source)[1]
            if auth is not None:
                return bare, auth
    return bare, None


def _origin(url: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of URL; None for a path, or a URL with a port that is no number."""
    try:
        parts = urllib.parse.urlsplit(url)
        return (parts.scheme, parts.hostname, parts.port) if parts.hostname else None
    except ValueError:
        return None


class _Deadline:
    """When one wheel's reading must be over: ``DEADLINE`` seconds from its first request."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def wait(self, timeout: float) -> float:
        """How long the next receive or send may wait: TIMEOUT, cut to what is left."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise self.passed()
        return min(timeout, left)

    def passed(self) -> TimeoutError:
        return TimeoutError(
            f"not read within the {self.seconds:g} s one wheel may take in all (DEADLINE)"
        )


class _DeadlineReader(io.RawIOBase):
    """A socket's reading side whose every receive ends by its connection's deadline (the
    request's in progress: a kept connection serves one wheel, then another)."""

    def __init__(self, sock: socket.socket, bound: _Bounded) -> None:
        super().__init__()
        self._sock, self._bound = sock, bound
        self._raw = sock.makefile("rb", buffering=0)  # socket.makefile's close refcount

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        deadline = self._bound.deadline
        self._sock.settimeout(deadline.wait(self._bound.per_read))
        try:
            return self._raw.readinto(buffer)
        except TimeoutError:
            if time.monotonic() >= deadline.end:
                raise deadline.passed() from None
            raise

    def close(self) -> None:
        self._raw.close()
        super().close()


class _DeadlineSocket:
    """A connected socket (plain or TLS) as http.client uses it, every wait on it bounded
    by TIMEOUT and by the deadline of the request its connection serves."""

    def __init__(self, sock: socket.socket, bound: _Bounded) -> None:
        self._sock, self._bound = sock, bound

    def makefile(self, mode: str = "rb", *_args: Any, **_kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self._sock, self._bound))

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._bound.deadline.wait(self._bound.per_read))
        self._sock.sendall(data)

    def close(self) -> None:
        self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _Response(http.client.HTTPResponse):
    """An answer that, once closed, hands its connection back (``release(True)``) when its
    body was read to its announced end and the server keeps the connection open, and has
    it closed (``release(False)``) otherwise: unread bytes never meet the next request."""

    release: Callable[[bool], None] | None = None
    url: str = ""

    def geturl(self) -> str:
        return self.url

    def close(self) -> None:
        whole = self.isclosed() and not self.will_close  # http.client's end of the body
        super().close()
        release, self.release = self.release, None
        if release is not None:
            release(whole)


class _Bounded:
    """An HTTP(S) connection whose socket, once connected (through a proxy's tunnel and the
    TLS handshake, when there are), is a ``_DeadlineSocket``; its TCP connection made
    through the pool (the address looked up once). DEADLINE and PER_READ are the request's
    it serves now, set again when a kept connection serves another wheel."""

    sock: Any
    response_class: type[HTTPResponse] = _Response

    def __init__(self, *args: Any, pool: Pool, deadline: _Deadline, per_read: float,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.deadline, self.per_read = deadline, per_read
        self._create_connection = pool.connect

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self.sock = _DeadlineSocket(self.sock, self)


class _Connection(_Bounded, http.client.HTTPConnection):
    pass


class _TLSConnection(_Bounded, http.client.HTTPSConnection):
    pass


def _route(url: str) -> tuple[Route, str, dict[str, str]]:
    """Where a GET of URL (without userinfo) goes: its route, the request target, and the
    headers the proxy takes. Proxies as urllib takes them (``*_proxy``, ``no_proxy``): an
    HTTPS URL through a CONNECT tunnel, an HTTP one as an absolute URL to the proxy."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url}")
    port = parts.port or (443 if scheme == "https" else 80)
    target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return Route(scheme, parts.hostname, port), target, {}
    bare, auth = _split_userinfo(proxy if "://" in proxy else f"http://{proxy}")
    via = urllib.parse.urlsplit(bare)
    if not via.hostname:
        raise ValueError(f"not a proxy URL: {bare}")
    route = Route(scheme, parts.hostname, port, (via.hostname, via.port or 80), auth)
    if scheme == "https":
        return route, target, {}
    headers = {"Proxy-Authorization": auth} if auth else {}
    return route, urllib.parse.urlunsplit(parts._replace(fragment="")), headers


_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 10  # as urllib
_DRAIN = 64 * 1024  # the body of an unwanted answer read to keep its connection, at most
# What a kept connection the server has closed meanwhile looks like, before an answer's
# first byte: its request is sent again, once, on a new connection.
_GONE = (ConnectionError, http.client.BadStatusLine)


class Http:
    """GET requests for one URL, every one of them within one deadline, on the pool's kept
    connections (``external.connections``); redirects followed; counts what came."""

    def __init__(
        self,
        url: str,
        credentials: Iterable[str] = (),
        timeout: float = TIMEOUT,
        deadline: float = DEADLINE,
        what: str = "wheel",
        pool: Pool = POOL,
    ):
        self.url, self._auth = _authorization(url, credentials)
        self._what = what
        self._timeout = timeout
        self._deadline = _Deadline(deadline)
        self._pool = pool
        self.requests = 0
        self.fetched = 0

    def fail(self, reason: str) -> LibdoctorError:
        return LibdoctorError(f"cannot read {self._what} {self.url}: {reason}")

    def open(self, byte_range: str | None, accept: str | None = None) -> HTTPResponse:
        """The response to a GET (with ``Range: BYTE_RANGE``); a 416 is ``_RangesRefused``.
        The credentials go with the first request only: never along a redirect."""
        headers = dict(_HEADERS)
        if accept is not None:
            headers["Accept"] = accept
        if byte_range is not None:
            headers["Range"] = byte_range
        self.requests += 1
        url, auth = self.url, self._auth
        try:
            for _ in range(_MAX_REDIRECTS + 1):
                sent = headers if auth is None else {**headers, "Authorization": auth}
                response = self._get(url, sent)
                location = response.headers.get("Location")
                if response.status not in _REDIRECTS or not location:
                    break
                _discard(response)
                url = _split_userinfo(urllib.parse.urljoin(url, location.strip()))[0]
                auth = None
            else:
                _discard(response)
                raise self.fail(f"HTTP {response.status}: more than {_MAX_REDIRECTS} redirects")
        except (OSError, HTTPException, ValueError) as exc:
            raise self.fail(_describe(exc)) from None
        response.url = url
        if not 200 <= response.status < 300:
            _discard(response)
            if response.status == 416 and byte_range is not None:
                raise _RangesRefused(None)
            raise self.fail(f"HTTP {response.status} {response.reason}")
        return response

    def _get(self, url: str, headers: dict[str, str]) -> _Response:
        """One GET of URL on a kept connection of its route, or a new one; a kept one the
        server has closed meanwhile is replaced once (a GET may be sent again)."""
        route, target, more = _route(url)
        for kept in (True, False):
            connection = self._take(route) if kept else self._connection(route)
            if connection is None:
                continue
            try:
                connection.request("GET", target, headers={**headers, **more})
                response = connection.getresponse()
            except _GONE:
                connection.close()
                if kept:
                    continue
                raise
            except BaseException:
                connection.close()
                raise
            assert isinstance(response, _Response)
            response.release = functools.partial(self._release, route, connection)
            return response
        raise AssertionError("unreachable: the new connection's request returns or raises")

    def _take(self, route: Route) -> _Connection | _TLSConnection | None:
        """A kept connection of ROUTE, bound to this request's deadline."""
        timeout = self._deadline.wait(self._timeout)  # were it to connect again
        connection = self._pool.take(route)
        if not isinstance(connection, (_Connection, _TLSConnection)):  # only ours come back
            return None
        connection.deadline, connection.per_read = self._deadline, self._timeout
        connection.timeout = timeout
        return connection

    def _connection(self, route: Route) -> _Connection | _TLSConnection:
        """A new connection of ROUTE (it connects on its first request)."""
        timeout = self._deadline.wait(self._timeout)  # the connect, before any socket
        host, port = route.proxy or (route.host, route.port)
        pool, deadline, per_read = self._pool, self._deadline, self._timeout
        if route.scheme == "http":
            return _Connection(host, port, timeout, pool=pool, deadline=deadline,
                               per_read=per_read)  # fmt: skip
        connection = _TLSConnection(host, port, timeout=timeout, context=pool.context(),
                                    pool=pool, deadline=deadline, per_read=per_read)  # fmt: skip
        if route.proxy is not None:
            tunnel = {"Proxy-Authorization": route.proxy_auth} if route.proxy_auth else {}
            connection.set_tunnel(route.host, route.port, tunnel)
        return connection

    def _release(self, route: Route, connection: http.client.HTTPConnection, whole: bool) -> None:
        if whole:
            self._pool.give(route, connection)
        else:
            connection.close()

    def body(self, response: HTTPResponse, expected: int) -> bytes:
        """The body of RESPONSE, which must be EXPECTED bytes long: never more is read (a
        server that sends more, or announces more, is refused after EXPECTED + 1)."""
        announced = response.headers.get("Content-Length")
        try:
            if announced is not None and announced.strip() != str(expected):
                raise self.fail(f"the server announced {announced} bytes for {expected} asked for")
            data = response.read(expected)
            more = response.read(1) if len(data) == expected else b""
        except IncompleteRead as exc:
            self.fetched += len(exc.partial)
            raise self.fail(
                f"the connection closed after {len(exc.partial)} of {expected} bytes"
            ) from None
        except (OSError, HTTPException) as exc:
            raise self.fail(_describe(exc)) from None
        finally:
            response.close()
        self.fetched += len(data) + len(more)
        if more:
            raise self.fail(f"the server sent more than the {expected} bytes asked for")
        if len(data) != expected:
            raise self.fail(f"the connection closed after {len(data)} of {expected} bytes")
        return data

    def range(self, start: int, end: int, size: int) -> bytes:
        """Bytes START..END (exclusive) of a file of SIZE bytes."""
        response = self.open(f"bytes={start}-{end - 1}")
        if response.status != 206:
            response.close()
            raise _RangesRefused(None)
        got = _content_range(response)
        if got != (start, end, size):
            response.close()
            raise self.fail(
                f"asked for bytes {start}-{end - 1}/{size}, the server sent "
                f"{response.headers.get('Content-Range')}"
            )
        return self.body(response, end - start)


def _discard(response: HTTPResponse) -> None:
    """Close an answer not wanted (a redirect, an error): its body read first when it is
    short, so that its connection may serve the next request."""
    try:
        if response.length is not None and response.length <= _DRAIN:
            response.read()
    except (OSError, HTTPException):
        pass
    response.close()


def _describe(problem: object) -> str:
    """One line for an exception (or urllib's reason, which may be a string)."""
    text = str(problem).strip()
    return text.splitlines()[0] if text else type(problem).__name__


def _content_range(response: HTTPResponse) -> tuple[int, int, int] | None:
    """(start, end exclusive, size) from ``Content-Range: bytes A-B/SIZE``."""
    match = _CONTENT_RANGE.fullmatch((response.headers.get("Content-Range") or "").strip())
    if match is None:
        return None
    first, last, size = (int(g) for g in match.groups())
    return (first, last + 1, size) if first <= last < size else None


# --------------------------------------------------------------------------- the file


class RangeFile:
    """A read-only, seekable file of SIZE bytes whose reads are range requests.

    What was fetched is kept in sorted, merged spans; a read fetches only the bytes it lacks
    (at least ``BLOCK`` of them, never again what is held), and ``prefetch`` asks for several
    ranges in as few requests as their distance allows. What ``zipfile`` needs: ``read``,
    ``seek``, ``tell``, ``seekable``.
    """

    def __init__(self, conn: Http, size: int, start: int, data: bytes) -> None:
        self._conn = conn
        self.size = size
        self._pos = 0
        self._spans: list[tuple[int, bytes]] = [(start, data)] if data else []

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError(f"seek to {base + offset}, before the start of the file")
        self._pos = base + offset
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self._pos + n)
        if end <= self._pos:
            return b""
        for start, stop in self._gaps(self._pos, end):
            self._fetch(start, max(stop, min(start + BLOCK, self._next_span(start))))
        data = self._slice(self._pos, end)
        self._pos = end
        return data

    def close(self) -> None:
        self._spans = []

    def prefetch(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Fetch RANGES (start, end exclusive) now: the missing parts, near ones together."""
        gaps = sorted(g for a, b in ranges for g in self._gaps(max(a, 0), min(b, self.size)))
        merged: list[list[int]] = []
        for start, end in gaps:
            if merged and start - merged[-1][1] < GAP:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        for start, end in merged:
            self._fetch(start, end)

    def _gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        gaps: list[tuple[int, int]] = []
        at = start
        for span_start, data in self._spans:
            span_end = span_start + len(data)
            if span_end <= at:
                continue
            if span_start >= end:
                break
            if span_start > at:
                gaps.append((at, span_start))
            at = span_end
            if at >= end:
                break
        if at < end:
            gaps.append((at, end))
        return gaps

    def _next_span(self, at: int) -> int:
        return min((s for s, _ in self._spans if s > at), default=self.size)

    def _fetch(self, start: int, end: int) -> None:
        data = self._conn.range(start, end, self.size)
        spans = sorted([*self._spans, (start, data)], key=lambda span: span[0])
        merged = [spans[0]]
        for span_start, span in spans[1:]:
            last_start, last = merged[-1]
            reach = last_start + len(last)
            if span_start <= reach:
                merged[-1] = (last_start, last + span[reach - span_start :])
            else:
                merged.append((span_start, span))
        self._spans = merged

    def _slice(self, start: int, end: int) -> bytes:
        for span_start, data in self._spans:
            if span_start <= start and end <= span_start + len(data):
                return data[start - span_start : end - span_start]
        raise self._conn.fail(f"bytes {start}-{end} were fetched but are not held")  # a bug


# --------------------------------------------------------------------------- reading


def read_remote_wheel(
    url: str,
    *,
    sha256: str | None = None,
    cache_dir: str | None = None,
    credentials: Sequence[str] = (),
    timeout: float = TIMEOUT,
    deadline: float = DEADLINE,
    members: Sequence[str] = (),
    download: bool = True,
) -> RemoteRead:
    """The wheel at URL (its central directory, METADATA and RECORD), by range requests.

    SHA256 is the index's digest of the whole file: the cache key, and what a full download
    (when the server refuses ranges) is checked against. CREDENTIALS are index URLs whose
    userinfo is sent to a URL on the same host. TIMEOUT bounds each wait for a byte,
    DEADLINE the whole read. MEMBERS: other members read too, where the wheel has them
    (``torch/version.py``), each bounded as METADATA is. DOWNLOAD false: a server that
    refuses ranges is one line, never a full download.
    """
    cached = cached_wheel(cache_dir, sha256, url, members)
    if cached is not None:
        return cached
    conn = Http(url, credentials, timeout, deadline)
    try:
        read = _read_by_range(conn, members)
    except _RangesRefused as refused:
        if not download:
            if refused.response is not None:
                refused.response.close()
            raise conn.fail("the server does not answer range requests") from None
        read = _download(conn, refused.response, sha256, cache_dir, members)
    _save(cache_dir, sha256, read, members)
    return read


def _extra_members(
    archive: zipfile.ZipFile, names: Sequence[str], where: str
) -> tuple[tuple[str, bytes], ...]:
    wanted = [n for n in names if n in archive.NameToInfo]
    return tuple((name, read_member(archive, name, where)) for name in wanted)


def _read_by_range(conn: Http, members: Sequence[str] = ()) -> RemoteRead:
    response = conn.open(f"bytes=-{TAIL}")
    if response.status != 206:
        raise _RangesRefused(response)
    got = _content_range(response)
    if got is None:
        response.close()
        raise conn.fail(f"unusable Content-Range {response.headers.get('Content-Range')!r}")
    start, end, size = got
    file = RangeFile(conn, size, start, conn.body(response, end - start))
    try:
        with open_wheel(cast(BinaryIO, file), conn.url) as archive:
            _, wanted = dist_info_members(archive, conn.url)
            wanted += [archive.NameToInfo[n] for n in members if n in archive.NameToInfo]
            file.prefetch(_member_range(info) for info in wanted)
            wheel = wheel_from_archive(archive, conn.url)
            extra = _extra_members(archive, members, conn.url)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise conn.fail(_describe(exc)) from None
    return RemoteRead(wheel, size, conn.fetched, conn.requests, "range", extra)


def _member_range(info: zipfile.ZipInfo) -> tuple[int, int]:
    """Where a member lies: its local header (30 bytes, name, extra) and compressed data."""
    header = 30 + len(info.orig_filename.encode("utf-8")) + len(info.extra)
    return info.header_offset, info.header_offset + header + info.compress_size + SLACK


def _download(
    conn: Http,
    response: HTTPResponse | None,
    sha256: str | None,
    cache_dir: str | None,
    members: Sequence[str] = (),
) -> RemoteRead:
    """The whole wheel streamed to a file in the cache, checked, read, and removed: the
    index read from it is what the cache keeps."""
    if response is None:
        response = conn.open(None)
    if response.status != 200:
        response.close()
        raise conn.fail(f"HTTP {response.status} {response.reason}")
    directory = os.path.join(cache_dir or tempfile.gettempdir(), "wheel-download")
    os.makedirs(directory, exist_ok=True)
    fd, temp = tempfile.mkstemp(suffix=".whl", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            digest = _stream(conn, response, out)
        if sha256 is not None and digest != sha256.lower():
            raise conn.fail(
                f"the downloaded file does not match the index's sha256 "
                f"(got {digest[:16]}..., expected {sha256.lower()[:16]}...)"
            )
        size = os.path.getsize(temp)
        try:
            with open(temp, "rb") as handle, open_wheel(handle, conn.url) as archive:
                wheel = wheel_from_archive(archive, conn.url)
                extra = _extra_members(archive, members, conn.url)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise conn.fail(_describe(exc)) from None
    finally:
        os.unlink(temp)
    return RemoteRead(wheel, size, conn.fetched, conn.requests, "download", extra)


def _stream(conn: Http, response: HTTPResponse, out: BinaryIO) -> str:
    """Copy RESPONSE's body into OUT, as far as ``MAX_DOWNLOAD``; its sha256 (hex)."""
    digest = hashlib.sha256()
    expected = response.headers.get("Content-Length")
    received = 0
    if expected is not None and expected.isdigit() and int(expected) > MAX_DOWNLOAD:
        response.close()
        raise conn.fail(_too_big(f"the server announces {int(expected):,} bytes"))
    try:
        with response:
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
                received += len(chunk)
                conn.fetched += len(chunk)
                if received > MAX_DOWNLOAD:
                    raise conn.fail(_too_big(f"the download passed {received:,} bytes"))
    except IncompleteRead as exc:
        raise conn.fail(
            f"the connection closed after {received + len(exc.partial)} bytes"
        ) from None
    except (OSError, HTTPException) as exc:
        raise conn.fail(_describe(exc)) from None
    if expected is not None and expected.isdigit() and int(expected) != received:
        raise conn.fail(f"the connection closed after {received} of {expected} bytes")
    return digest.hexdigest()


def _too_big(what: str) -> str:
    return f"{what}, over the {MAX_DOWNLOAD:,} a wheel's download may have (MAX_DOWNLOAD)"


class RemoteMembers:
    """A wheel's members read in part, by range after its central directory: where
    ``read_remote_wheel`` reads the dist-info whole, this gives a ``Fetch`` of one member's
    compressed data for ``external.member.MemberView`` to inflate as far as it needs."""

    def __init__(self, url: str, credentials: Sequence[str] = ()) -> None:
        self._conn = Http(url, credentials)
        response = self._conn.open(f"bytes=-{TAIL}")
        got = _content_range(response) if response.status == 206 else None
        if got is None:
            response.close()
            raise self._conn.fail("the server does not answer range requests")
        start, end, size = got
        self._file = RangeFile(self._conn, size, start, self._conn.body(response, end - start))
        try:
            self._archive = open_wheel(cast(BinaryIO, self._file), self._conn.url)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise self._conn.fail(_describe(exc)) from None

    @property
    def fetched(self) -> int:
        return self._conn.fetched

    @property
    def requests(self) -> int:
        return self._conn.requests

    def info(self, name: str) -> zipfile.ZipInfo | None:
        return self._archive.NameToInfo.get(name)

    def prefetch(self, infos: Sequence[zipfile.ZipInfo], ahead: int) -> None:
        """Each member's local header and its first AHEAD compressed bytes, near ones in one
        request."""
        self._file.prefetch(
            (i.header_offset, _member_range(i)[1] - i.compress_size + min(i.compress_size, ahead))
            for i in infos
        )

    def fetch(self, info: zipfile.ZipInfo) -> Callable[[int, int], bytes]:
        """Bytes START..END of INFO's compressed data (past its local header)."""
        try:
            return member_data(self._read, info)
        except MemberError as exc:
            raise self._conn.fail(f"{info.filename}: {exc}") from None

    def _read(self, start: int, end: int) -> bytes:
        self._file.seek(start)
        return self._file.read(end - start)

    def close(self) -> None:
        self._archive.close()
        self._file.close()


# --------------------------------------------------------------------------- the cache


def _cache_file(cache_dir: str | None, sha256: str | None) -> str | None:
    if cache_dir is None or sha256 is None or not _SHA256.fullmatch(sha256.lower()):
        return None
    return os.path.join(cache_dir, "wheel-index", f"{sha256.lower()}.json")


def cached_wheel(
    cache_dir: str | None, sha256: str | None, url: str, members: Sequence[str] = ()
) -> RemoteRead | None:
    """The wheel read before from a file with this SHA256, named URL now; None if not kept
    (or the kept copy is unreadable, or lacks one of MEMBERS: it is read again)."""
    file = _cache_file(cache_dir, sha256)
    if file is None:
        return None
    try:
        doc = _cache_document(file)
        if doc["format"] != _FORMAT:
            return None
        wheel = _wheel_from_json(doc["wheel"], _split_userinfo(url)[0])
        kept = {str(k): base64.b64decode(v) for k, v in doc.get("extra", {}).items()}
        absent = set(doc.get("absent", ()))
        if any(m not in kept and m not in absent for m in members):
            return None
        extra = tuple((m, kept[m]) for m in members if m in kept)
        return RemoteRead(wheel, int(doc["size"]), 0, 0, "cache", extra)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save(
    cache_dir: str | None, sha256: str | None, read: RemoteRead, members: Sequence[str] = ()
) -> None:
    """Best effort: a cache that cannot be written costs the next run a read, nothing else.
    MEMBERS asked for and not in the wheel are kept as absent."""
    file = _cache_file(cache_dir, sha256)
    if file is None:
        return
    doc: dict[str, Any] = {"format": _FORMAT, "size": read.size, "wheel": _wheel_json(read.wheel)}
    if members:
        doc["extra"] = {m: base64.b64encode(d).decode("ascii") for m, d in read.extra}
        doc["absent"] = [m for m in members if read.member(m) is None]
    write_atomic(file, json.dumps(doc, separators=(",", ":")).encode())  # one C-encoded write


def _note_file(cache_dir: str | None, sha256: str | None, key: str) -> str | None:
    file = _cache_file(cache_dir, sha256)
    if file is None or not re.fullmatch(r"[a-z0-9-]+", key):
        return None
    return f"{file.removesuffix('.json')}.{key}.json"


def cached_note(cache_dir: str | None, sha256: str | None, key: str) -> Any:
    """What ``save_note`` kept under KEY for the wheel of this SHA256; None if nothing."""
    file = _note_file(cache_dir, sha256, key)
    if file is None:
        return None
    try:
        doc = _cache_document(file)
        return doc.get("note") if doc.get("format") == _FORMAT else None
    except (OSError, ValueError, AttributeError):
        return None


def _cache_document(file: str) -> Any:
    """A cache file's JSON, read as any input is (``bounded``): a regular file of at most
    MAX_FILE_BYTES, nested at most MAX_JSON_DEPTH; a ValueError (``InputRefused``)
    otherwise, never a RecursionError, nor a wait on a FIFO put in its place."""
    return loads_json(read_file(file))


def save_note(cache_dir: str | None, sha256: str | None, key: str, value: Any) -> None:
    """Keep VALUE (JSON) under KEY beside the cache file of the wheel of this SHA256
    (``<sha256>.<key>.json``: a wheel's bytes never change, so neither does what was read
    of them). Best effort, as ``_save``."""
    file = _note_file(cache_dir, sha256, key)
    if file is None:
        return
    try:
        data = json.dumps({"format": _FORMAT, "note": value}, separators=(",", ":")).encode()
    except (ValueError, TypeError):
        return
    write_atomic(file, data)


def _wheel_json(wheel: WheelFile) -> dict[str, Any]:
    return {
        "name": wheel.name,
        "version": wheel.version,
        "requires_dist": list(wheel.requires_dist),
        "dist_info": wheel.dist_info,
        "members": [list(m) for m in wheel.members],
        "crc32": list(wheel.crc32),
    }


def _wheel_from_json(doc: dict[str, Any], path: str) -> WheelFile:
    members = tuple(
        RecordEntry(str(p), None if h is None else str(h), None if s is None else int(s))
        for p, h, s in doc["members"]
    )
    return WheelFile(
        path=path,
        name=str(doc["name"]),
        version=str(doc["version"]),
        key=canonicalize_name(str(doc["name"])),
        requires_dist=tuple(str(r) for r in doc["requires_dist"]),
        dist_info=str(doc["dist_info"]),
        members=members,
        crc32=tuple(int(c) for c in doc["crc32"]),
    )
