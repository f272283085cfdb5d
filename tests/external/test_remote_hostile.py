"""The remote wheel reader against a hostile server on 127.0.0.1 (issue 23): a zip bomb, a
central directory too large or too full, a range answer that never ends or announces more
than was asked, a download past ``MAX_DOWNLOAD``, a server trickling a byte at a time. Each
is one ``LibdoctorError`` line naming its limit, within bounded memory (a child's peak RSS)
and time (``DEADLINE``).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from libdoctor.environment.wheel import MAX_MEMBERS, read_wheel
from libdoctor.errors import LibdoctorError
from libdoctor.external import remote
from libdoctor.external.remote import read_remote_wheel
from support.bombs import bomb_wheel, hostile_wheel, lie_about_size, many_members_wheel
from support.httpindex import Answer, FileServer, requested_range, serve
from support.rss import run_python
from support.wheels import build_wheel

RSS_BOUND_MB = 200
INFLATED = 256 << 20  # a RECORD bomb: past the member bound, and past RSS_BOUND_MB read whole

READ = """
import sys
from libdoctor.external.remote import read_remote_wheel
from libdoctor.errors import LibdoctorError
try:
    read = read_remote_wheel(sys.argv[1])
except LibdoctorError as exc:
    print(exc)
else:
    print("read", read.wheel.display)
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    dest = tmp_path_factory.mktemp("hostile-wheels")
    (dest / "lying").mkdir()
    lying = bomb_wheel(dest / "lying", INFLATED)
    lie_about_size(lying, "bomb-1.0.dist-info/RECORD", 1000)
    huge_metadata = hostile_wheel(
        dest, "fat", "1.0", {"fat/__init__.py": b""}, record=b"fat/__init__.py,,\n"
    )
    return {
        "bomb": bomb_wheel(dest, INFLATED),
        "lying": lying,
        "small": build_wheel(dest, "small", "1.0", {"small/__init__.py": b"x = 1\n"}),
        "many": many_members_wheel(dest, MAX_MEMBERS + 1),
        "fat": _inflate_metadata(huge_metadata, 40 << 20),
    }


def _inflate_metadata(wheel: Path, size: int) -> Path:
    """WHEEL with its METADATA replaced by SIZE bytes of headers (a few KB compressed)."""
    import zipfile

    out = wheel.with_name("fat_meta-" + wheel.name)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/METADATA"):
                data += b"X-Pad: " + b"x" * size + b"\n"
            dst.writestr(info.filename, data)
    return out


@pytest.fixture
def server() -> Iterator[FileServer]:
    with serve() as state:
        yield state


def one_line(exc: pytest.ExceptionInfo[LibdoctorError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and text.startswith("cannot read wheel "), text
    return text


# --------------------------------------------------------------------------- zip bounds


def test_a_record_bomb_read_by_range_stops_at_the_member_bound(
    wheels: dict[str, Path], server: FileServer
) -> None:
    """1 MB of RECORD that inflates to 256 MB: refused by its declared size, before a
    byte of it is inflated, in a child that stays far below the bound."""
    url = server.add("/files/bomb-1.0-py3-none-any.whl", wheels["bomb"].read_bytes())
    run = run_python(READ, url)
    assert run.rc == 0, run.describe()
    assert run.stdout.strip() == (
        f"cannot read wheel {url}: bomb-1.0.dist-info/RECORD is {INFLATED:,} bytes, over "
        f"the {32 << 20:,} a member libdoctor reads may have (MAX_MEMBER_BYTES)"
    )
    assert run.peak_mb < RSS_BOUND_MB, run.describe()


def test_a_record_that_lies_about_its_size_inflates_no_further_than_it_says(
    wheels: dict[str, Path], server: FileServer
) -> None:
    """The central directory says 1000 bytes; the stream holds 256 MB: zipfile stops at the
    1000 and the CRC says it is damaged."""
    url = server.add("/files/lying.whl", wheels["lying"].read_bytes())
    run = run_python(READ, url)
    assert run.rc == 0, run.describe()
    assert run.stdout.strip() == (
        f"cannot read wheel {url}: Bad CRC-32 for file 'bomb-1.0.dist-info/RECORD'"
    )
    assert run.peak_mb < RSS_BOUND_MB, run.describe()
    with pytest.raises(LibdoctorError, match="Bad CRC-32"):
        read_wheel(str(wheels["lying"]))


def test_metadata_past_the_member_bound_is_refused_before_it_is_fetched(
    wheels: dict[str, Path], server: FileServer
) -> None:
    url = server.add("/files/fat.whl", wheels["fat"].read_bytes())
    with pytest.raises(LibdoctorError) as exc:
        read_remote_wheel(url)
    assert "fat-1.0.dist-info/METADATA is 41,943,0" in one_line(exc)
    assert "(MAX_MEMBER_BYTES)" in str(exc.value)
    assert server.sent < 200_000, server.ranges()


def test_a_central_directory_of_too_many_members_is_refused(
    wheels: dict[str, Path], server: FileServer
) -> None:
    url = server.add("/files/many.whl", wheels["many"].read_bytes())
    expected = f"{MAX_MEMBERS + 4:,} members, over the {MAX_MEMBERS:,} a wheel may have"
    with pytest.raises(LibdoctorError) as exc:
        read_remote_wheel(url)
    assert f"{expected} (MAX_MEMBERS)" in one_line(exc)
    with pytest.raises(LibdoctorError, match=expected):
        read_wheel(str(wheels["many"]))


def test_a_central_directory_that_claims_a_gigabyte_is_not_fetched(
    wheels: dict[str, Path], server: FileServer, tmp_path: Path
) -> None:
    data = bytearray(wheels["small"].read_bytes())
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<LL", data, end + 12, 1 << 30, 0)  # size and offset of the directory
    url = server.add("/files/claims.whl", bytes(data))
    with pytest.raises(LibdoctorError) as exc:
        read_remote_wheel(url)
    assert one_line(exc) == (
        f"cannot read wheel {url}: its central directory of {1 << 30:,} bytes is over the "
        f"{32 << 20:,} a wheel may have (MAX_CENTRAL_DIRECTORY)"
    )
    assert server.sent == len(data) and len(server.log) == 1  # the tail, nothing more
    local = tmp_path / "claims.whl"
    local.write_bytes(bytes(data))
    with pytest.raises(LibdoctorError, match="MAX_CENTRAL_DIRECTORY"):
        read_wheel(str(local))


# --------------------------------------------------------------------------- answers


def _headers(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str]) -> None:
    handler.send_response(status)
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.end_headers()


def _endless(handler: BaseHTTPRequestHandler, limit: int = 3 << 30) -> None:
    """Zeros until the client goes (or LIMIT, in case it never does)."""
    chunk = bytes(1 << 16)
    try:
        for _ in range(limit // len(chunk)):
            handler.wfile.write(chunk)
    except OSError:
        pass


def endless_range(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """A 206 naming the range asked, without Content-Length, then gigabytes."""
    start, end = requested_range(handler, len(body))
    _headers(handler, 206, {"Content-Range": f"bytes {start}-{end - 1}/{len(body)}"})
    _endless(handler)


def announces_more(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    start, end = requested_range(handler, len(body))
    content_range = f"bytes {start}-{end - 1}/{len(body)}"
    _headers(handler, 206, {"Content-Range": content_range, "Content-Length": str(1 << 34)})
    _endless(handler)


def endless_download(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """Ranges ignored: a 200 without Content-Length, the wheel, then zeros without end."""
    _headers(handler, 200, {})
    handler.wfile.write(body)
    _endless(handler)


def huge_download(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    _headers(handler, 200, {"Content-Length": str(9 << 30)})
    handler.wfile.write(body)


def trickle(where: str, every: float = 0.25) -> Answer:
    """An honest answer to the range asked, sent one byte every EVERY seconds from WHERE on
    (``status``: the whole answer; ``body``: after the headers; ``download``: a 200 of the
    whole file)."""

    def answer(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        start, end = (0, len(body)) if where == "download" else requested_range(handler, len(body))
        status = "200 OK" if where == "download" else "206 Partial Content"
        head = f"HTTP/1.0 {status}\r\nContent-Length: {end - start}\r\n"
        if where != "download":
            head += f"Content-Range: bytes {start}-{end - 1}/{len(body)}\r\n"
        answer_bytes = (head + "\r\n").encode() + body[start:end]
        fast = 0 if where == "status" else len(head) + 2
        try:
            handler.wfile.write(answer_bytes[:fast])
            for byte in answer_bytes[fast:]:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(every)
        except OSError:
            pass

    return answer


def test_a_range_answer_without_end_is_read_no_further_than_asked(
    wheels: dict[str, Path], server: FileServer
) -> None:
    """No Content-Length, then 3 GB: the reader takes the bytes it asked for and one more."""
    url = server.add("/files/small-1.0-py3-none-any.whl", wheels["small"].read_bytes())
    server.answers["/files/small-1.0-py3-none-any.whl"] = endless_range
    run = run_python(READ, url)
    size = wheels["small"].stat().st_size
    assert run.rc == 0, run.describe()
    assert run.stdout.strip() == (
        f"cannot read wheel {url}: the server sent more than the {size} bytes asked for"
    )
    assert run.peak_mb < RSS_BOUND_MB, run.describe()


def test_a_range_answer_that_announces_more_than_asked_is_refused(
    wheels: dict[str, Path], server: FileServer
) -> None:
    url = server.add("/files/small.whl", wheels["small"].read_bytes())
    server.answers["/files/small.whl"] = announces_more
    size = wheels["small"].stat().st_size
    with pytest.raises(LibdoctorError) as exc:
        read_remote_wheel(url)
    assert one_line(exc) == (
        f"cannot read wheel {url}: the server announced {1 << 34} bytes for {size} asked for"
    )


def test_a_download_past_max_download_is_refused_and_removed(
    wheels: dict[str, Path], server: FileServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that ignores ranges and streams without end is cut at MAX_DOWNLOAD (here
    lowered to 4 MiB), and the partial file is gone; one that announces more, at once."""
    monkeypatch.setattr(remote, "MAX_DOWNLOAD", 4 << 20)
    url = server.add("/files/endless.whl", wheels["small"].read_bytes())
    server.answers["/files/endless.whl"] = endless_download
    with pytest.raises(LibdoctorError) as exc:
        read_remote_wheel(url, cache_dir=str(tmp_path))
    assert one_line(exc).endswith(
        f", over the {4 << 20:,} a wheel's download may have (MAX_DOWNLOAD)"
    )
    assert "the download passed " in str(exc.value)
    assert os.listdir(tmp_path / "wheel-download") == []

    url = server.add("/files/huge.whl", wheels["small"].read_bytes())
    server.answers["/files/huge.whl"] = huge_download
    with pytest.raises(LibdoctorError) as exc:
        read_remote_wheel(url, cache_dir=str(tmp_path))
    assert f"the server announces {9 << 30:,} bytes, over the" in one_line(exc)


@pytest.mark.parametrize("where", ["status", "body", "download"])
def test_a_trickling_server_is_cut_off_at_the_deadline(
    where: str, wheels: dict[str, Path], server: FileServer
) -> None:
    """A byte every 0.25 s never trips the 1 s per-read timeout; the 2 s deadline for the
    whole wheel ends it, wherever the trickle starts."""
    url = server.add("/files/slow.whl", wheels["small"].read_bytes())
    server.answers["/files/slow.whl"] = trickle(where)
    started = time.monotonic()
    with pytest.raises(LibdoctorError) as exc:
        read_remote_wheel(url, timeout=1.0, deadline=2.0)
    elapsed = time.monotonic() - started
    assert one_line(exc) == (
        f"cannot read wheel {url}: not read within the 2 s one wheel may take in all (DEADLINE)"
    )
    assert 1.9 < elapsed < 4.0, elapsed


def test_an_honest_slow_server_within_the_deadline_is_read(
    wheels: dict[str, Path], server: FileServer
) -> None:
    """A server as slow (a byte every half millisecond, every request) but done well within the
    deadline is read as any other."""
    url = server.add("/files/small-1.0-py3-none-any.whl", wheels["small"].read_bytes())
    server.answers["/files/small-1.0-py3-none-any.whl"] = trickle("status", every=0.0005)
    read = read_remote_wheel(url, timeout=1.0, deadline=60.0)
    assert read.wheel.display == "small 1.0" and read.how == "range"
