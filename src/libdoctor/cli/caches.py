"""``libdoctor caches [TARGET]`` and ``libdoctor caches clear [--stale|--all] [NAME...] [TARGET]``.

The first reads only: every compile cache the target's tools use, each entry's size, age and
the versions it records, judged against the target's. The second removes entries (the stale
ones, or with ``--all`` every one the cache's layout recognises; never a file that is not the
tool's), each cache root's removal backed up first (``libdoctor restore ID`` puts it back).

Exit codes: ``caches``: 0 no stale entry, 1 stale entries; ``clear``: 0 done; 2 refused or
libdoctor could not run (one line, nothing removed).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from libdoctor.cli import common

if TYPE_CHECKING:
    from libdoctor.environment.target import Target
    from libdoctor.repair.caches import Cleared
    from libdoctor.stack.caches import CacheScan, Entry, Versions


def _clear_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("clear")
    mode = group.add_mutually_exclusive_group()
    mode.add_argument("--stale", action="store_true", help="only stale entries (the default)")
    mode.add_argument("--all", action="store_true", help="every entry the layout recognises")
    group.add_argument("--no-backup", action="store_true", help="remove without a backup")
    group.add_argument("--dry-run", action="store_true", help="show what would be removed")
    group.add_argument("-y", "--yes", action="store_true", help="do not ask")
    group.add_argument("--cache-dir", metavar="DIR", help="where backups live")


COMMAND = common.Command(
    help="compile caches (torch, triton, CUDA, bytecode): stale entries, and clearing them",
    description="List the compile caches the target's tools use and judge each entry by "
    "the versions it records; `caches clear` removes entries, backed up first.",
    options=(
        common.argument(
            "items",
            nargs="*",
            metavar="[clear] [NAME...] [TARGET]",
            help="`clear`, then cache kinds to clear (default: every kind), then the target",
        ),
        common.argument("--python", metavar="PATH", help="the environment of this interpreter"),
        common.argument(
            "--env-file",
            metavar="FILE",
            help="KEY=VALUE lines: the variables the tools run with (TRITON_CACHE_DIR, ...), "
            "over libdoctor's own",
        ),
        common.add_output_options,
        _clear_options,
    ),
    intermixed=True,
)


def _environ(args: argparse.Namespace) -> Mapping[str, str]:
    from libdoctor.bounded import MAX_SMALL_FILE_BYTES, read_file
    from libdoctor.errors import LibdoctorError
    from libdoctor.stack.caches import read_env_file

    environ = dict(os.environ)
    if args.env_file:
        try:  # a process substitution (<(env)) is a FIFO: read, up to the limit
            data = read_file(args.env_file, MAX_SMALL_FILE_BYTES, stream_ok=True)
        except OSError as exc:
            raise LibdoctorError(f"cannot read {args.env_file}: {exc.strerror}") from None
        except ValueError as exc:
            raise LibdoctorError(f"{args.env_file}: {exc}") from None
        environ.update(read_env_file(data.decode("utf-8", "replace")))
    return environ


def _kinds(names: list[str]) -> list[str]:
    from libdoctor.errors import LibdoctorError
    from libdoctor.stack.caches import KINDS

    known = [k.name for k in KINDS]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise LibdoctorError(
            f"unknown cache kind(s) {', '.join(unknown)}; known: {', '.join(known)}"
        )
    return names


def run(args: argparse.Namespace) -> int:
    from libdoctor.environment.distributions import scan_target
    from libdoctor.environment.paths import NATIVE_ROWS
    from libdoctor.stack.caches import Versions, scan_caches

    clearing = bool(args.items) and args.items[0] == "clear"
    items = args.items[1:] if clearing else args.items
    names, args.target = common.split_target(items) if clearing else ([], None)
    if not clearing:
        if len(items) > 1:
            from libdoctor.errors import LibdoctorError

            raise LibdoctorError(
                "`caches` takes one TARGET; to clear: `caches clear NAME... TARGET`"
            )
        args.target = items[0] if items else None
    if clearing and len(names) == 1 and os.path.isdir(names[0]) and args.target is None:
        names, args.target = [], names[0]
    kinds = _kinds(names) or None
    target = common.discover_target(args)
    environ = _environ(args)
    versions = Versions.of(target, scan_target(target, only_containing=NATIVE_ROWS))
    scans = scan_caches(environ, target, versions, kinds)
    if clearing:
        return _clear(args, target.prefix, scans, environ)
    return _show(args, target, versions, scans)


def _show(
    args: argparse.Namespace, target: Target, versions: Versions, scans: Sequence[CacheScan]
) -> int:
    from libdoctor.checks.caches import stale_entry_findings
    from libdoctor.document import target_dict
    from libdoctor.report.caches import scan_json, scan_text

    findings = stale_entry_findings(scans, target.prefix)
    if args.json:
        common.write(scan_json(target_dict(target), versions, scans, findings))
    else:
        color = common.use_color(args)
        common.write(
            scan_text(target.prefix, versions, scans, findings, color=color, verbose=args.verbose)
        )
    return common.EXIT_FINDINGS if findings else common.EXIT_OK


def _clear(
    args: argparse.Namespace,
    prefix: str,
    scans: Sequence[CacheScan],
    environ: Mapping[str, str],
) -> int:
    from libdoctor.cli import changes
    from libdoctor.repair.caches import clear, refuse, select
    from libdoctor.report.caches import cleared_json, cleared_text

    selection = select(scans, stale_only=not args.all)
    if args.dry_run or not selection:
        refuse(selection, environ)  # what the real run would say, it says
        cleared = [_planned(scan, entries) for scan, entries in selection]
    else:
        count = sum(len(e) for _, e in selection)
        changes.confirm(f"remove {count} cache entries?", args.yes, "caches clear")
        command = shlex.join(["libdoctor", "caches", *args.items])
        backups = None if args.no_backup else changes.backups_dir(args)
        cleared = clear(
            selection, backups=backups, command=command, environ=environ, notify=changes.say
        )
        _prune(args, cleared)
    if args.json:
        common.write(cleared_json({"prefix": prefix}, cleared, args.dry_run))
    else:
        where = f" --cache-dir {shlex.quote(args.cache_dir)}" if args.cache_dir else ""
        common.write(cleared_text(cleared, args.dry_run, where))
    return common.EXIT_OK


def _planned(scan: CacheScan, entries: Sequence[Entry]) -> Cleared:
    from libdoctor.repair.caches import Cleared

    files = sum(e.files for e in entries)
    size = sum(e.size for e in entries)
    return Cleared(scan.kind, scan.root, tuple(e.name for e in entries), files, size, None)


def _prune(args: argparse.Namespace, cleared: Sequence[Cleared]) -> None:
    """After a successful clear: keep the newest N backups of each cache root."""
    from libdoctor.cli import changes
    from libdoctor.repair.retention import keep_count, prune

    keep = keep_count(os.environ)
    for item in cleared:
        if item.backup:
            for info in prune(changes.backups_dir(args), item.root, keep):
                changes.say(f"pruned backup {info.id} (the newest {keep} are kept)")
