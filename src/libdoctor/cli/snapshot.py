"""``libdoctor snapshot``: an environment's facts as a compact, deterministic JSON record."""

from __future__ import annotations

import argparse
import os
import sys

from libdoctor.cli import common
from libdoctor.cli import progress as bar


def add_snapshot_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--deep", action="store_true", help="also record each file's digest, verified on disk"
    )
    parser.add_argument(
        "--cache-dir", metavar="DIR", help="hash cache location (default: user cache dir)"
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the hash cache"
    )
    bar.add_quiet_option(parser)


COMMAND = common.Command(
    help="record an environment's distributions, files, libraries and findings",
    description="Write a compact, versioned JSON record of an environment (the same "
    "environment gives the same bytes), for `libdoctor diff` and `libdoctor fleet`. "
    "Reads only.",
    options=(
        common.add_target_options,
        common.argument(
            "-o",
            "--output",
            metavar="FILE",
            help="write here instead of stdout (gzip when it ends in .gz; {node} is replaced "
            "by the machine's name: $SLURMD_NODENAME, else the host name)",
        ),
        add_snapshot_options,
        common.argument(
            "--framed",
            action="store_true",
            help="write it gzip'd and framed on stdout, for `fleet --slurm` to collect",
        ),
    ),
)


def cache_dir(args: argparse.Namespace) -> str | None:
    """As ``check``'s: parsed RECORDs and ELF files always, digests with --deep; None with
    --no-cache (the cache never changes what is recorded, only what is read again)."""
    return common.check_cache_dir(args)


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.snapshot import frame, gzipped_document, node_name, write_document
    from libdoctor.api import encoded_snapshot

    node = node_name(os.environ)
    data = encoded_snapshot(
        common.discover_target(args),
        args.deep,
        cache_dir=cache_dir(args),
        node=node,
        progress=bar.bytes_factory(args.deep and bar.wanted(args)),
    )
    if args.output:
        write_document(data, args.output.replace("{node}", _file_name(node, args.output)))
    elif args.framed:
        task = os.environ.get("SLURM_PROCID") or str(os.getpid())
        write_lines(frame(task, node, gzipped_document(data)))
    else:
        write_bytes(data)
    return common.EXIT_OK


def _file_name(node: str, output: str) -> str:
    """NODE as one file name in OUTPUT's ``{node}``: a name (``$SLURMD_NODENAME`` is
    another program's) with a ``/`` or a ``..`` would put the file elsewhere."""
    from libdoctor.errors import LibdoctorError

    if "{node}" in output and ("/" in node or "\0" in node or node in ("", ".", "..")):
        raise LibdoctorError(f"the node name {node!r} cannot be a file name in {output}")
    return node


def write_bytes(data: bytes) -> None:
    """DATA to stdout as it is (the stream's encoding must not touch the JSON's UTF-8)."""
    sys.stdout.flush()
    raw = getattr(sys.stdout, "buffer", None)
    if raw is None:  # a text-only stream (a caller capturing output)
        common.write(data.decode("utf-8"))
        return
    raw.write(data)
    raw.flush()


def write_lines(text: str) -> None:
    """TEXT to stdout one line per write(2): each line under PIPE_BUF reaches a pipe that
    other tasks write to as well (srun's stdout, a shared log) whole, never cut."""
    sys.stdout.flush()
    try:
        out = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file: no pipe to share either
        common.write(text)
        return
    for line in text.splitlines(keepends=True):
        data = line.encode("ascii")
        while data:
            data = data[os.write(out, data) :]
