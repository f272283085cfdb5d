"""Kept connections (``external.connections``) under ``remote.Http``, against a real
HTTP/1.1 server on 127.0.0.1 that counts the connections it accepts: several requests and
several wheels on one connection, the same bytes as the plain path (``Pool(0)``: a
connection per request), a server that closes kept connections without saying so, a
wheel's deadline on a connection another wheel opened, and a proxy from the environment.
"""

from __future__ import annotations

import dataclasses
import http.client
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from libdoctor.environment.wheel import read_wheel
from libdoctor.errors import LibdoctorError
from libdoctor.external import connections
from libdoctor.external.connections import Pool, Route
from libdoctor.external.remote import Http, read_remote_wheel
from support.httpindex import FileServer, serve
from support.wheels import build_wheel

RANGES = [(0, 100), (1000, 5000), (20_000, 20_010)]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("kept")
    noise = random.Random(0)
    files = {f"kept/m{i}.bin": noise.randbytes(8000) for i in range(20)}  # past the tail
    return build_wheel(dest, "kept", "1.0", files)


@pytest.fixture
def server() -> Iterator[FileServer]:
    with serve(FileServer(keep_alive=True)) as state:
        yield state


def read_ranges(url: str, size: int, pool: Pool, times: int = 2) -> list[bytes]:
    """RANGES of URL, read TIMES over, each time as another wheel would (its own Http)."""
    out = []
    for _ in range(times):
        http = Http(url, pool=pool)
        out += [http.range(start, end, size) for start, end in RANGES]
    return out


def test_one_kept_connection_serves_every_request_the_same_bytes(
    wheel: Path, server: FileServer
) -> None:
    data = wheel.read_bytes() + bytes(30_000)
    url = server.add("/files/kept.bin", data)
    kept = read_ranges(url, len(data), Pool())
    assert kept == [data[a:b] for a, b in RANGES] * 2
    assert (server.connections, len(server.log)) == (1, 6)
    plain = read_ranges(url, len(data), Pool(0))
    assert plain == kept
    assert (server.connections, len(server.log)) == (1 + 6, 12)


def test_a_whole_wheel_and_a_redirect_keep_the_connection(wheel: Path, server: FileServer) -> None:
    """``read_remote_wheel`` through the process's pool (its tail, then a member), then
    again by a URL that redirects to it (the redirect's empty body read, the connection
    kept): one connection for all."""
    url = server.add(f"/files/{wheel.name}", wheel.read_bytes())
    server.redirects["/files/moved.whl"] = url
    connections.POOL.clear()
    try:
        first = read_remote_wheel(url, members=["kept/m0.bin"])  # the first member: a request more
        again = read_remote_wheel(server.url + "/files/moved.whl", members=["kept/m0.bin"])
    finally:
        connections.POOL.clear()
    assert first.wheel == dataclasses.replace(read_wheel(str(wheel)), path=url)
    assert again.wheel == dataclasses.replace(first.wheel, path=server.url + "/files/moved.whl")
    assert server.connections == 1 and first.requests > 1
    assert len(server.log) == 3 * first.requests  # each request of the second redirected


def test_a_server_closing_kept_connections_is_asked_again_on_a_new_one(wheel: Path) -> None:
    """Each connection closed after one answer, without a ``Connection: close``: every
    kept one is found closed at the next request, which goes once more on a new
    connection; the server sees each request once."""
    data = wheel.read_bytes() + bytes(30_000)
    with serve(FileServer(keep_alive=True, close_after=1)) as server:
        url = server.add("/files/closing.bin", data)
        assert read_ranges(url, len(data), Pool()) == [data[a:b] for a, b in RANGES] * 2
        assert len(server.log) == 6 and server.connections == 6


def trickle(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """A 206 of 100 bytes, sent a byte every 0.1 s: each receive well within the timeout."""
    handler.wfile.write(b"HTTP/1.1 206 Partial Content\r\nContent-Length: 100\r\n")
    handler.wfile.write(f"Content-Range: bytes 0-99/{len(body)}\r\n\r\n".encode())
    try:
        for byte in body[:100]:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.1)
    except OSError:
        pass


def test_the_deadline_holds_on_a_connection_another_wheel_opened(
    wheel: Path, server: FileServer
) -> None:
    """A byte every 0.1 s never trips the 0.5 s per-read timeout; the 1 s deadline of the
    second wheel, set on the connection the first wheel opened, ends it."""
    data = wheel.read_bytes()
    fast = server.add("/files/fast.bin", data)
    slow = server.add("/files/slow.bin", data)
    server.answers["/files/slow.bin"] = trickle
    pool = Pool()
    assert Http(fast, pool=pool).range(0, 10, len(data)) == data[:10]
    with pytest.raises(LibdoctorError) as exc:
        Http(slow, timeout=0.5, deadline=1.0, pool=pool).range(0, 100, len(data))
    assert str(exc.value) == (
        f"cannot read wheel {slow}: not read within the 1 s one wheel may take in all (DEADLINE)"
    )
    assert server.connections == 1  # the trickle came on the connection the first opened


def lying_range(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """A 206 of the first ten bytes, whatever was asked."""
    handler.wfile.write(b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n")
    handler.wfile.write(f"Content-Range: bytes 0-9/{len(body)}\r\n\r\n".encode() + body[:10])


def test_a_lying_content_range_is_one_line_and_its_connection_is_not_kept(
    wheel: Path, server: FileServer
) -> None:
    """An answer read to its end goes back to the pool; one refused before its body was
    read (here: other bytes than asked) is closed, never met by the next request."""
    data = wheel.read_bytes()
    honest = server.add("/files/honest.bin", data)
    lying = server.add("/files/lying.bin", data)
    server.answers["/files/lying.bin"] = lying_range
    pool, route = Pool(), Route("http", "127.0.0.1", server.port)
    assert Http(honest, pool=pool).range(100, 200, len(data)) == data[100:200]
    kept = pool.take(route)
    assert kept is not None
    pool.give(route, kept)
    with pytest.raises(LibdoctorError) as exc:
        Http(lying, pool=pool).range(100, 200, len(data))
    assert str(exc.value) == (
        f"cannot read wheel {lying}: asked for bytes 100-199/{len(data)}, the server sent "
        f"bytes 0-9/{len(data)}"
    )
    assert pool.take(route) is None and server.connections == 1


proxied: list[tuple[str, str | None]] = []  # (request target, Proxy-Authorization)


class _Proxy(BaseHTTPRequestHandler):
    """A forwarding HTTP proxy: a GET of an absolute URL fetched from its server, relayed."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        proxied.append((self.path, self.headers.get("Proxy-Authorization")))
        parts = urllib.parse.urlsplit(self.path)
        upstream = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=5)
        forwarded = {k: v for k, v in self.headers.items() if not k.lower().startswith("proxy-")}
        upstream.request("GET", parts.path, headers=forwarded)
        answer = upstream.getresponse()
        body = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("server", "date", "connection"):
                self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
        upstream.close()


def test_an_http_proxy_from_the_environment_is_asked_and_no_proxy_bypasses_it(
    wheel: Path, server: FileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As urllib took them: ``http_proxy`` (its userinfo as Proxy-Authorization, for the
    proxy only) gets the absolute URL; ``no_proxy`` naming the host goes around it."""
    data = wheel.read_bytes()
    url = server.add("/files/proxied.bin", data)
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    thread = threading.Thread(target=proxy.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    proxied.clear()
    try:
        monkeypatch.setenv("http_proxy", f"http://me:pw@127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.setenv("no_proxy", "")
        assert Http(url, pool=Pool()).range(0, 10, len(data)) == data[:10]
        assert proxied == [(url, "Basic bWU6cHc=")]
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        assert Http(url, pool=Pool()).range(10, 20, len(data)) == data[10:20]
        assert len(proxied) == 1 and len(server.log) == 2
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join()


def test_a_forked_child_starts_with_an_empty_pool(wheel: Path, server: FileServer) -> None:
    """Parent and child on one kept connection would read each other's answers."""
    data = wheel.read_bytes()
    url = server.add("/files/forked.bin", data)
    pool, route = Pool(), Route("http", "127.0.0.1", server.port)
    Http(url, pool=pool).range(0, 10, len(data))
    pid = os.fork()
    if pid == 0:  # the child: nothing kept, and a request of its own on a new connection
        ok = pool.take(route) is None and Http(url, pool=pool).range(0, 10, len(data)) == data[:10]
        os._exit(0 if ok else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert pool.take(route) is not None and server.connections == 2
