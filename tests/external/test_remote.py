"""A wheel read from a real HTTP server by range requests (``external.remote``): the same
``WheelFile`` as reading the file, for a fraction of its bytes; the full download when the
server ignores ranges; the cache; one-line errors for every way the network or the zip fails.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from libdoctor.environment.wheel import WheelFile, read_wheel
from libdoctor.errors import LibdoctorError
from libdoctor.external.remote import RangeFile, read_remote_wheel
from support.httpindex import FileServer, serve
from support.wheels import build_wheel

BIG = 20 * 1024 * 1024


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    dest = tmp_path_factory.mktemp("remote-wheels")
    noise = random.Random(14).randbytes(BIG)  # incompressible: the wheel stays ~20 MB
    many = {f"pkg/mod{i:04d}.py": f"x = {i}\n".encode() for i in range(3000)}
    return {
        "small": build_wheel(dest, "small", "1.0", {"small/__init__.py": b"x = 1\n"}),
        "big": build_wheel(
            dest,
            "big-native",
            "2.0",
            {"big/__init__.py": b"", "big/lib/libbig.so.1": noise, "big/x.py": b"y = 2\n"},
            requires=["numpy>=1.20", 'extra-thing; extra == "more"'],
        ),
        "many": build_wheel(dest, "many", "3.0", many),  # a central directory over 64 KiB
    }


@pytest.fixture
def server() -> Iterator[FileServer]:
    with serve() as state:
        yield state


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def same(wheel: WheelFile, path: Path) -> None:
    local = read_wheel(str(path))
    assert dataclasses.replace(wheel, path=local.path) == local
    assert len(wheel.crc32) == len(wheel.members) and wheel.members


@pytest.mark.parametrize("which", ["small", "big", "many"])
def test_a_wheel_read_by_range_is_the_wheel_read_from_disk(
    which: str, wheels: dict[str, Path], server: FileServer, tmp_path: Path
) -> None:
    url = server.add(f"/files/{wheels[which].name}", wheels[which].read_bytes())
    read = read_remote_wheel(url, sha256=sha256(wheels[which]), cache_dir=str(tmp_path))
    same(read.wheel, wheels[which])
    assert read.wheel.path == url
    assert (read.how, read.size) == ("range", wheels[which].stat().st_size)
    assert read.fetched == server.sent and read.requests == len(server.log)
    assert all(r is not None for r in server.ranges()) and len(server.ranges()) <= 3


def test_a_large_wheel_costs_a_small_fraction_of_its_bytes(
    wheels: dict[str, Path], server: FileServer
) -> None:
    url = server.add("/files/big.whl", wheels["big"].read_bytes())
    read = read_remote_wheel(url)
    assert read.size > BIG
    assert read.fetched < read.size * 0.01, (read.fetched, server.ranges())
    assert read.requests == 1  # the last 64 KiB hold the central directory and .dist-info
    assert read.wheel.requires_dist == ("numpy>=1.20", 'extra-thing; extra == "more"')
    members = {m.path: m for m in read.wheel.members}
    assert members["big/lib/libbig.so.1"].size == BIG
    assert members["big/lib/libbig.so.1"].hash is not None


def test_a_server_that_ignores_ranges_gets_one_full_download(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    with serve(FileServer(mode="full")) as server:
        url = server.add("/files/big.whl", wheels["big"].read_bytes())
        read = read_remote_wheel(url, sha256=sha256(wheels["big"]), cache_dir=str(tmp_path))
        same(read.wheel, wheels["big"])
        assert (read.how, read.requests, read.fetched) == ("download", 1, read.size)
    assert os.listdir(tmp_path / "wheel-download") == []  # the download is not kept


def test_the_cache_makes_a_second_read_network_free(
    wheels: dict[str, Path], server: FileServer, tmp_path: Path
) -> None:
    url = server.add("/files/big.whl", wheels["big"].read_bytes())
    digest = sha256(wheels["big"])
    first = read_remote_wheel(url, sha256=digest, cache_dir=str(tmp_path))
    asked = len(server.log)
    second = read_remote_wheel(url + "?again", sha256=digest, cache_dir=str(tmp_path))
    assert len(server.log) == asked
    assert (second.how, second.fetched, second.requests) == ("cache", 0, 0)
    assert dataclasses.replace(second.wheel, path=url) == first.wheel
    assert (tmp_path / "wheel-index" / f"{digest}.json").is_file()


def test_credentials_of_the_index_url_are_sent_to_its_host(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    with serve(FileServer(auth="me:s3cr@t")) as server:
        url = server.add("/files/small.whl", wheels["small"].read_bytes())
        index = f"http://me:s3cr%40t@127.0.0.1:{server.port}/simple"
        same(read_remote_wheel(url, credentials=[index]).wheel, wheels["small"])
        userinfo = url.replace("http://", "http://me:s3cr%40t@")
        assert read_remote_wheel(userinfo).wheel.path == url  # never shown with its secret
        with pytest.raises(LibdoctorError, match="HTTP 401"):
            read_remote_wheel(url, credentials=["http://me:x@elsewhere.invalid/simple"])


def test_credentials_never_follow_a_redirect(wheels: dict[str, Path]) -> None:
    """The index's host redirects to another that asks for the same credentials: urllib
    follows, the Authorization header stays behind (it is the index's, not the CDN's)."""
    with serve(FileServer(auth="me:pw")) as elsewhere, serve() as index:
        target = elsewhere.add("/files/small.whl", wheels["small"].read_bytes())
        index.redirects["/files/small.whl"] = target
        url = index.url + "/files/small.whl"
        with pytest.raises(LibdoctorError, match="HTTP 401"):
            read_remote_wheel(url, credentials=[f"http://me:pw@127.0.0.1:{index.port}/simple"])
        assert [r.path for r in elsewhere.log] == ["/files/small.whl"]


def one_line_error(url: str, **kwargs: object) -> str:
    with pytest.raises(LibdoctorError) as caught:
        read_remote_wheel(url, **kwargs)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message and message.startswith("cannot read wheel "), message
    return message


def test_a_connection_dropped_mid_range_is_one_line(wheels: dict[str, Path]) -> None:
    with serve(FileServer(mode="drop")) as server:
        url = server.add("/files/big.whl", wheels["big"].read_bytes())
        assert "connection closed after" in one_line_error(url)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"", "not a zip|unusable Content-Range|HTTP 416"),
        (b"<html>not found, really</html>", "not a zip file"),
        (random.Random(1).randbytes(300_000), "not a zip file"),
    ],
)
def test_garbage_is_one_line(body: bytes, expected: str, server: FileServer) -> None:
    assert re.search(expected, one_line_error(server.add("/files/bad.whl", body)), re.I)


def test_a_truncated_wheel_is_one_line(wheels: dict[str, Path], server: FileServer) -> None:
    data = wheels["many"].read_bytes()
    head = server.add("/files/head.whl", data[: len(data) // 2])
    assert "not a zip file" in one_line_error(head).lower()


def test_a_damaged_record_member_is_one_line(wheels: dict[str, Path], server: FileServer) -> None:
    """One byte of RECORD's compressed data flipped (a byte-patched good wheel): the CRC-32
    of the central directory, or the inflater, says so."""
    import struct
    import zipfile

    data = bytearray(wheels["big"].read_bytes())
    with zipfile.ZipFile(wheels["big"]) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith("/RECORD"))
    name_len, extra_len = struct.unpack(
        "<HH", data[info.header_offset + 26 : info.header_offset + 30]
    )
    start = info.header_offset + 30 + name_len + extra_len
    data[start + info.compress_size // 2] ^= 0xFF
    message = one_line_error(server.add("/files/damaged.whl", bytes(data)))
    assert re.search("crc|invalid|error", message, re.I), message


def test_a_missing_wheel_is_one_line(server: FileServer) -> None:
    assert "HTTP 404" in one_line_error(server.url + "/files/none-1.0-py3-none-any.whl")


def test_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    with serve() as server:
        url = server.url + "/files/x.whl"
    one_line_error(url, timeout=5)


def test_a_download_that_does_not_match_the_index_sha256_is_refused(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    with serve(FileServer(mode="full")) as server:
        url = server.add("/files/big.whl", wheels["big"].read_bytes())
        message = one_line_error(url, sha256="0" * 64, cache_dir=str(tmp_path))
    assert "does not match the index's sha256" in message
    assert not (tmp_path / "wheel-index").exists()
    assert os.listdir(tmp_path / "wheel-download") == []


def test_range_file_fetches_only_what_it_lacks(wheels: dict[str, Path], server: FileServer) -> None:
    """The reader's own bookkeeping: reads inside fetched spans cost nothing, a prefetch of
    near ranges is one request, and every byte is the file's."""
    from libdoctor.external.remote import Http

    data = wheels["big"].read_bytes()
    url = server.add("/files/big.whl", data)
    http = Http(url)
    file = RangeFile(http, len(data), len(data) - 100, data[-100:])
    file.seek(-50, os.SEEK_END)
    assert file.read() == data[-50:] and http.requests == 0
    file.prefetch([(1000, 2000), (3000, 4000), (10_000_000, 10_000_010)])
    assert http.requests == 2
    assert server.ranges()[-2:] == ["bytes=1000-3999", "bytes=10000000-10000009"]
    file.seek(500)
    assert file.read(4000) == data[500:4500]  # 500..1000 and 4000..4500 are fetched
    assert http.requests == 4
    file.seek(5_000_000)
    assert file.read(10) == data[5_000_000:5_000_010]
    assert server.ranges()[-1] == f"bytes=5000000-{5_000_000 + 64 * 1024 - 1}"  # read ahead
    assert http.fetched == server.sent
