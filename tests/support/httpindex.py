"""A real HTTP server on 127.0.0.1, in a thread of the test: files and a PEP 503 simple index.

``mode`` says how it answers a ``Range`` request: ``range`` honours it (206), ``full`` ignores
it (200 and the whole body, as many simple servers do), ``drop`` sends the 206 headers and half
the body, then closes the connection. Every request is logged (path and Range header), so a
test can count what went over the wire. ``auth`` ("user:password") makes it demand basic auth.
``answers`` puts a hostile server behind a path: a function given the request's handler (and
the file's bytes there, if any) that writes the status line, headers and body itself.
``keep_alive`` answers in HTTP/1.1 and keeps connections open between requests (counted in
``connections``); ``close_after`` then closes one after that many answers without saying so,
as a server whose idle timeout passed does.
"""

from __future__ import annotations

import base64
import hashlib
import re
import socket
import threading
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal

__all__ = ["Answer", "FileServer", "Request", "requested_range", "serve"]

Mode = Literal["range", "full", "drop"]
Answer = Callable[[BaseHTTPRequestHandler, bytes], None]


@dataclass
class Request:
    path: str
    range: str | None  # the Range header
    agent: str  # the User-Agent header: pip's requests are told from libdoctor's
    sent: int = 0  # body bytes written in reply
    method: str = "GET"


@dataclass
class FileServer:
    """What the handler serves, and what it was asked."""

    files: dict[str, bytes] = field(default_factory=dict)  # URL path -> body
    redirects: dict[str, str] = field(default_factory=dict)  # URL path -> Location (302)
    answers: dict[str, Answer] = field(default_factory=dict)  # URL path -> a raw answer
    mode: Mode = "range"
    auth: str | None = None
    log: list[Request] = field(default_factory=list)
    port: int = 0
    sent: int = 0  # body bytes written
    keep_alive: bool = False
    close_after: int | None = None  # answers on one kept connection, then it is closed
    connections: int = 0  # accepted
    open_sockets: list[socket.socket] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, path: str, data: bytes) -> str:
        self.files[path] = data
        return self.url + path

    def add_wheel(self, wheel: Path, *, metadata: bool = True) -> str:
        """Serve WHEEL under /files/ and list it in /simple/<project>/ (PEP 503, with its
        sha256); its URL. METADATA: serve its METADATA beside it (PEP 658/714), as PyPI does,
        so a pip resolves without downloading the wheel."""
        data = wheel.read_bytes()
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        url = self.add(f"/files/{wheel.name}", data)
        digest = hashlib.sha256(data).hexdigest()
        attributes = ""
        if metadata:
            with zipfile.ZipFile(wheel) as archive:
                name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
                text = archive.read(name)
            self.add(f"/files/{wheel.name}.metadata", text)
            meta_hash = f"sha256={hashlib.sha256(text).hexdigest()}"
            attributes = f' data-dist-info-metadata="{meta_hash}" data-core-metadata="{meta_hash}"'
        page = f"/simple/{project}/"
        links = self.files.get(page, b"").decode()
        links += f'<a href="/files/{wheel.name}#sha256={digest}"{attributes}>{wheel.name}</a>\n'
        self.files[page] = links.encode()
        projects = sorted({p.split("/")[2] for p in self.files if p.startswith("/simple/")})
        index = "".join(f'<a href="/simple/{p}/">{p}</a>\n' for p in projects if p)
        self.files["/simple/"] = index.encode()
        return url

    def ranges(self) -> list[str]:
        return [r.range for r in self.log if r.range is not None]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    request_log: Request
    head: bool = False
    answered: int = 0  # on this connection

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        state = self.server.state
        state.connections += 1
        state.open_sockets.append(self.connection)
        self.answered = 0
        if state.keep_alive:
            self.protocol_version = "HTTP/1.1"
            # headers and body are two writes: without this, the body of an answer on a
            # kept connection waits for the client's delayed ACK of the headers (40 ms)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle_one_request(self) -> None:
        super().handle_one_request()
        self.answered += 1
        if self.answered == self.server.state.close_after:
            self.close_connection = True  # without a Connection: close header

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def do_GET(self, head: bool = False) -> None:
        state = self.server.state
        path = self.path.split("?")[0]
        if path == "/simple":
            path = "/simple/"
        byte_range = self.headers.get("Range")
        agent = self.headers.get("User-Agent", "")
        self.request_log = Request(path, byte_range, agent, method="HEAD" if head else "GET")
        self.head = head
        state.log.append(self.request_log)
        if path in state.answers:
            state.answers[path](self, state.files.get(path, b""))
            self.close_connection = True
            return
        if path in state.redirects:
            self.send_response(302)
            self.send_header("Location", state.redirects[path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if state.auth is not None and not self._authorized(state.auth):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = state.files.get(path)
        if body is None:
            self.send_error(404)
            return
        if byte_range is None or state.mode == "full":
            self._send(200, body, {"Content-Type": _type(path)})
            return
        start, end = _parse_range(byte_range, len(body))
        if start >= end:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(body)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        headers = {"Content-Range": f"bytes {start}-{end - 1}/{len(body)}"}
        self._send(206, body[start:end], headers, drop=state.mode == "drop")

    def _authorized(self, auth: str) -> bool:
        expected = "Basic " + base64.b64encode(auth.encode()).decode()
        return self.headers.get("Authorization") == expected

    def _send(self, code: int, body: bytes, headers: dict[str, str], drop: bool = False) -> None:
        self.send_response(code)
        for key, value in {**headers, "Accept-Ranges": "bytes"}.items():
            if not (self.server.state.mode == "full" and key == "Accept-Ranges"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        written = b"" if self.head else body[: len(body) // 2] if drop else body
        self.server.state.sent += len(written)  # counted first: the client may look at once
        self.request_log.sent += len(written)
        self.wfile.write(written)
        if drop:
            self.wfile.flush()
            self.close_connection = True


def _type(path: str) -> str:
    return "text/html" if path.endswith("/") else "application/octet-stream"


def requested_range(handler: BaseHTTPRequestHandler, size: int) -> tuple[int, int]:
    """(start, end exclusive) of the ``Range`` HANDLER's request asks of SIZE bytes."""
    return _parse_range(handler.headers.get("Range") or "bytes=0-", size)


def _parse_range(header: str, size: int) -> tuple[int, int]:
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", header.strip())
    if match is None:
        return 0, 0
    first, last = match.groups()
    if not first:
        return max(size - int(last or 0), 0), size
    return int(first), min(size, int(last) + 1 if last else size)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: FileServer


@contextmanager
def serve(state: FileServer | None = None) -> Iterator[FileServer]:
    """A server on 127.0.0.1 (a free port) answering from STATE, for the with-block."""
    state = state or FileServer()
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = state
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        for sock in state.open_sockets:  # kept connections end with the server
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
