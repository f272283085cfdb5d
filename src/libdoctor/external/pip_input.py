"""What pip is given, read as pip reads it: options (``optparse``, with pip's own option
tables), a requirement word (``req.constructors``: a name, a specifier, extras, a marker, a
wheel file name, a URL with ``#egg=``, ``name @ URL``), requirements files (``req.req_file``:
continuations, comments, ``${VAR}``, nested ``-r`` and ``-c``, ``-e``) and pip's configuration
(``pip.conf`` files and ``PIP_*`` variables).

The guard reads an uninstall with it: pip uninstalls every distribution a word names, whatever
version, extras or marker it gives (``idna==9``, ``idna[x]`` and ``idna-3.20-py3-none-any.whl``
all remove idna), and every name a ``-r`` file lists, constraints included. Where libdoctor
cannot be sure what pip reads (a file over the network, a FIFO, a word pip would reject), the
``Asked`` says so, with the name it may mean: the guard then plans that name too, or refuses.

Every read here is bounded (``REQFILE_LIMIT`` bytes a file, ``REQFILE_DEPTH`` nested files,
``REQFILE_FILES`` files in all, ``CONFIG_LIMIT`` bytes a config file) and never opens a FIFO
or a device. A test compares the tables and readings with the real pip's.
"""

from __future__ import annotations

import codecs
import configparser
import optparse
import os
import posixpath
import re
import shlex
import stat
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = [
    "CONFIG_LIMIT",
    "PIP_GENERAL",
    "PIP_INSTALL",
    "PIP_UNINSTALL",
    "REQFILE_DEPTH",
    "REQFILE_FILES",
    "REQFILE_LIMIT",
    "REQFILE_OPTIONS",
    "Asked",
    "Option",
    "OptionTable",
    "Unreadable",
    "pip_config_list",
    "read_options",
    "requirement_files",
    "requirement_name",
]

REQFILE_LIMIT = 8 << 20  # bytes of one requirements file
REQFILE_DEPTH = 64  # -r/-c files nested in each other
REQFILE_FILES = 1000  # requirements files read for one command
CONFIG_LIMIT = 1 << 20  # bytes of one pip.conf


# --------------------------------------------------------------------------- options

OptionTable = tuple[tuple[tuple[str, ...], bool], ...]
"""Each option's spellings (short and long) and whether it takes a value."""


def _table(text: str) -> OptionTable:
    """``-r --requirement=, -y --yes``: an option per comma, ``=`` when it takes a value."""
    rows = []
    for item in text.split(","):
        spelled = item.split()
        if spelled:
            valued = spelled[-1].endswith("=")
            rows.append((tuple(s.rstrip("=") for s in spelled), valued))
    return tuple(rows)


# The union of pip 23.2's and pip 26's tables (an option a pip dropped stays: an older pip
# still reads it), from cmdoptions; tests/external/test_pip_input.py checks them against
# the real pip's parsers.
PIP_GENERAL = _table("""
    -h --help, --debug, --isolated, --require-virtualenv --require-venv, --python=,
    -v --verbose, -q --quiet, --log --log-file --local-log=, --no-input, --keyring-provider=,
    --proxy=, --no-proxy-env, --retries=, --timeout --default-timeout=, --exists-action=,
    --trusted-host=, --cert=, --client-cert=, --cache-dir=, --no-cache-dir,
    --disable-pip-version-check, --no-color, --no-python-version-warning, --use-feature=,
    --use-deprecated=, --resume-retries=, -V --version
""")
PIP_INSTALL = _table("""
    -r --requirement=, -c --constraint=, --build-constraint=, --requirements-from-script=,
    --no-deps --no-dependencies, --only-deps --only-dependencies, -e --editable=, --dry-run,
    -t --target=, --platform=, --python-version=, --implementation=, --abi=, --user, --no-user,
    --root=, --prefix=, --src --source --source-dir --source-directory=, -U --upgrade,
    --upgrade-strategy=, --force-reinstall, -I --ignore-installed, --ignore-requires-python,
    --no-build-isolation, --use-pep517, --no-use-pep517, --check-build-dependencies,
    --break-system-packages, -C --config-settings=, --global-option=, --compile, --no-compile,
    --no-warn-script-location, --no-warn-conflicts, --require-hashes, --no-require-hashes,
    --progress-bar=, --root-user-action=, --report=, --group=, --no-clean, --pre,
    --all-releases=, --only-final=, --no-binary=, --only-binary=, --prefer-binary,
    -i --index-url --pypi-url=, --extra-index-url=, --no-index, --refresh-package=,
    -f --find-links=, --uploaded-prior-to=
""")
PIP_UNINSTALL = _table("-r --requirement=, -y --yes, --root-user-action=, --break-system-packages")
REQFILE_OPTIONS = _table("""
    -i --index-url --pypi-url=, --extra-index-url=, --no-index, -c --constraint=,
    -r --requirement=, -e --editable=, -f --find-links=, --no-binary=, --only-binary=,
    --prefer-binary, --require-hashes, --no-require-hashes, --pre, --all-releases=,
    --only-final=, --trusted-host=, --use-feature=, --hash=, -C --config-settings=,
    --global-option=
""")


@dataclass(frozen=True, slots=True)
class Option:
    name: str  # the long spelling ("--requirement" for -r, --req, --requirement=...)
    value: str | None  # None for a flag


class Unreadable(ValueError):
    """pip would stop here with a usage error (no such option, a value missing)."""


class _Parser(optparse.OptionParser):
    def error(self, msg: str) -> NoReturn:
        raise Unreadable(msg)

    def exit(self, status: int = 0, msg: str | None = None) -> NoReturn:
        raise Unreadable(msg or f"exit {status}")


def read_options(
    args: Sequence[str], table: OptionTable, *, interspersed: bool = True
) -> tuple[list[Option], list[str]]:
    """ARGS as pip's ``optparse`` reads them with TABLE: abbreviated long options
    (``--req``), clusters (``-yr FILE``), joined values (``-rFILE``, ``--requirement=FILE``)
    and ``--``. The options in order, by their long name, and the positional words."""
    seen: list[Option] = []

    def record(_option: Any, _spelled: str, value: str | None, _parser: Any, name: str) -> None:
        seen.append(Option(name, value))

    parser = _Parser(prog="pip", add_help_option=False, usage=optparse.SUPPRESS_USAGE)
    for spellings, valued in table:
        name = next((s for s in spellings if s.startswith("--")), spellings[0])
        parser.add_option(
            *spellings,
            action="callback",
            callback=record,
            callback_args=(name,),
            type="string" if valued else None,
            dest=name.lstrip("-").replace("-", "_"),
        )
    if not interspersed:
        parser.disable_interspersed_args()
    _, words = parser.parse_args(list(args))
    return seen, list(words)


# --------------------------------------------------------------------------- one word


@dataclass(frozen=True, slots=True)
class Asked:
    """One requirement as pip reads it: the distribution NAME it names, or None (pip
    ignores an unnamed one: a project directory, an sdist). DOUBT: why libdoctor cannot be
    sure what pip reads there; NAME is then the name it may mean, if any."""

    source: str  # the word, or FILE:LINE
    name: str | None
    doubt: str | None = None


_VCS_SCHEMES = (
    *("ssh", "git", "hg", "bzr", "sftp", "svn"),
    *("git+http", "git+https", "git+ssh", "git+git", "git+file"),
    *("hg+file", "hg+http", "hg+https", "hg+ssh", "hg+static-http"),
    *("bzr+http", "bzr+https", "bzr+ssh", "bzr+sftp", "bzr+ftp", "bzr+lp", "bzr+file"),
    *("svn+ssh", "svn+http", "svn+https", "svn+svn", "svn+file"),
)  # pip's vcs.all_schemes
_URL_SCHEMES = frozenset(("http", "https", "file", "ftp", *_VCS_SCHEMES))
_ARCHIVES = frozenset(
    (".zip", ".whl", ".tar.bz2", ".tbz", ".tar.gz", ".tgz", ".tar", ".tar.xz", ".txz", ".tlz",
     ".tar.lz", ".tar.lzma")
)  # fmt: skip
_EXTRAS = re.compile(r"^(.+)(\[[^\]]+\])$")
_EGG = re.compile(r"[#&]egg=([^&]*)")
_PROJECT = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_LEADING_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _is_url(text: str) -> bool:
    try:
        scheme = urllib.parse.urlsplit(text).scheme
    except ValueError:
        return False
    return scheme in _URL_SCHEMES


def _splitext(path: str) -> tuple[str, str]:
    base, ext = posixpath.splitext(path)
    if base.lower().endswith(".tar"):
        ext, base = base[-4:] + ext, base[:-4]
    return base, ext


def _looks_like_path(text: str) -> bool:
    return os.sep in text or text.startswith(".")


def _wheel_name(filename: str, source: str) -> Asked:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        return Asked(source, str(parse_wheel_filename(filename)[0]))
    except InvalidWheelFilename:
        guess = filename.split("-", 1)[0].replace("_", "-")
        return Asked(source, guess or None, "not a wheel file name pip reads")


def _link_name(url: str, source: str) -> Asked:
    """The name of a link: a wheel's, else its ``#egg=`` fragment's (none: unnamed)."""
    try:
        path = urllib.parse.unquote(urllib.parse.urlsplit(url).path, errors="surrogateescape")
    except ValueError:
        return Asked(source, None, "not a URL pip reads")
    filename = posixpath.basename(path.rstrip("/"))
    if _splitext(filename)[1] == ".whl":
        return _wheel_name(filename, source)
    egg = _EGG.search(url)
    if egg is None:
        return Asked(source, None)
    if not _PROJECT.match(egg.group(1)):
        return Asked(source, None, f"#egg={egg.group(1)} is no project name pip reads")
    return Asked(source, egg.group(1))


def _path_link(path: str, text: str) -> str | None:
    """pip's ``_get_url_from_path``: PATH as a link (a project dir, an archive), or None
    when TEXT is a requirement string."""
    if _looks_like_path(text) and os.path.isdir(path):
        return path  # a project directory: unnamed (pip stops at one that is none)
    if _splitext(path)[1].lower() not in _ARCHIVES:
        return None
    if os.path.isfile(path):
        return path
    before, at, _ = text.partition("@")
    if at and not _looks_like_path(before):
        return None  # `name @ URL`
    return path  # an archive that does not exist (pip warns and goes on)


def requirement_name(word: str, cwd: str) -> Asked:
    """The distribution ``pip uninstall WORD`` acts on, as ``install_req_from_line`` reads
    WORD (a relative path against CWD): specifiers, extras and markers do not matter."""
    from packaging.requirements import InvalidRequirement, Requirement

    url = _is_url(word)
    text = word.split("; " if url else ";", 1)[0].strip()
    if url:
        return _link_name(text, word)
    path = os.path.normpath(os.path.join(cwd, text))
    match = _EXTRAS.match(path)
    link = _path_link(match.group(1).rstrip() if match else path, text)
    if link is not None:
        if os.path.isdir(link):
            return Asked(word, None)
        return _link_name(urllib.parse.quote(link, errors="surrogateescape"), word)
    try:
        return Asked(word, Requirement(text).name)
    except InvalidRequirement:
        guess = _LEADING_NAME.match(text)
        return Asked(word, guess.group(1) if guess else None, "not a requirement pip reads")


def editable_name(text: str, source: str) -> Asked:
    """The name of ``-e TEXT`` as pip's ``parse_editable`` finds it: ``name @ URL``, else
    the ``#egg=`` fragment (a local project directory without one is unnamed)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text)
    except InvalidRequirement:
        req = None
    if req is not None and req.url:
        return Asked(source, req.name)
    match = _EXTRAS.match(text)
    return _link_name(match.group(1) if match else text, source)


# --------------------------------------------------------------------------- files


_COMMENT = re.compile(r"(^|\s+)#.*$")
_ENV_VAR = re.compile(r"\$\{([A-Z0-9_]+)\}")
_SCHEME = re.compile(r"^(http|https|file):", re.IGNORECASE)
_CODING = re.compile(rb"coding[:=]\s*([-\w.]+)")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF16, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)


def read_bounded(path: str, limit: int) -> bytes | str:
    """PATH's bytes, or why not: never a FIFO or a device (a read could block, or never
    end), never more than LIMIT bytes. A file that is not there is ``b""`` (pip stops on
    it before it changes anything)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        return f"cannot open it: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return "not a regular file (a FIFO, a device?): libdoctor does not read it"
        data = handle.read(limit + 1)
    if len(data) > limit:
        return f"over {limit} bytes (the limit libdoctor reads)"
    return data


def _decoded(data: bytes) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, "replace")
    for line in data.split(b"\n")[:2]:
        found = _CODING.search(line) if line[:1] == b"#" else None
        if found is not None:
            try:
                return data.decode(found.group(1).decode("ascii"), "replace")
            except LookupError:
                break
    return data.decode("utf-8", "replace")


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """req_file's ``preprocess``: continuations joined, comments gone, ``${VAR}`` expanded."""
    joined: list[str] = []
    first = 0
    for number, line in enumerate(text.splitlines(), start=1):
        comment = _COMMENT.match(line) is not None
        if line.endswith("\\") and not comment:
            first = first if joined else number
            joined.append(line.strip("\\"))
            continue
        line = " " + line if comment else line
        if joined:
            number, line = first, "".join([*joined, line])
            joined = []
        yield number, line
    if joined:
        yield first, "".join(joined)


def _expanded(line: str, environ: Mapping[str, str]) -> str:
    line = _COMMENT.sub("", line).strip()
    for name in _ENV_VAR.findall(line):
        if environ.get(name):
            line = line.replace(f"${{{name}}}", environ[name])
    return line


@dataclass(slots=True)
class _Walk:
    environ: Mapping[str, str]
    cwd: str
    files: int = 0


def requirement_files(paths: Sequence[str], environ: Mapping[str, str], cwd: str) -> list[Asked]:
    """Every requirement the ``-r`` files PATHS list, nested ``-r`` and ``-c`` files
    followed (pip uninstalls a constraint's name too), as pip's ``parse_requirements``."""
    walk = _Walk(environ, cwd)
    asked: list[Asked] = []
    for path in paths:
        asked += _read_file(walk, path, (os.path.abspath(os.path.join(cwd, path)),))
    return asked


def _read_file(walk: _Walk, path: str, stack: tuple[str, ...]) -> list[Asked]:
    walk.files += 1
    if len(stack) > REQFILE_DEPTH or walk.files > REQFILE_FILES:
        why = f"over REQFILE_DEPTH ({REQFILE_DEPTH}) or REQFILE_FILES ({REQFILE_FILES})"
        return [Asked(path, None, why)]
    if _SCHEME.match(path) and not path.lower().startswith("file:"):
        return [Asked(path, None, "a requirements file over the network: libdoctor reads none")]
    local = urllib.parse.unquote(urllib.parse.urlsplit(path).path) if _SCHEME.match(path) else path
    data = read_bounded(os.path.join(walk.cwd, local), REQFILE_LIMIT)
    if isinstance(data, str):
        return [Asked(path, None, data)]
    asked: list[Asked] = []
    for number, raw in _lines(_decoded(data)):
        line = _expanded(raw, walk.environ)
        if line:
            asked += _read_line(walk, path, number, line, stack)
    return asked


def _read_line(
    walk: _Walk, path: str, number: int, line: str, stack: tuple[str, ...]
) -> list[Asked]:
    source = f"{path}:{number}"
    tokens = line.split(" ")
    cut = next((i for i, t in enumerate(tokens) if t.startswith("-")), len(tokens))
    args, rest = " ".join(tokens[:cut]), " ".join(tokens[cut:])
    if args:
        return [requirement_name(args, walk.cwd)]
    try:
        options, _ = read_options(shlex.split(rest), REQFILE_OPTIONS)
    except (ValueError, Unreadable):
        return []  # pip stops at this line, before it changes anything
    values = {o.name: o.value for o in reversed(options)}  # the first of each, as pip's [0]
    if values.get("--editable") is not None:
        return [editable_name(values["--editable"] or "", source)]
    nested = values.get("--requirement") or values.get("--constraint")
    if nested is None:
        return []
    if _SCHEME.match(path):
        nested = urllib.parse.urljoin(path, nested)
    elif not _SCHEME.match(nested):
        nested = os.path.abspath(os.path.join(walk.cwd, os.path.dirname(path), nested))
    if nested in stack:
        return []  # pip stops at a file that includes itself; its names are read once
    return _read_file(walk, nested, (*stack, nested))


# --------------------------------------------------------------------------- configuration


def _config_files(prefix: str, environ: Mapping[str, str], isolated: bool) -> list[str]:
    """pip's configuration files, lowest priority first (``configuration.py``)."""
    env_file = environ.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []
    home = environ.get("HOME") or os.path.expanduser("~")
    dirs = environ.get("XDG_CONFIG_DIRS", "").strip() or "/etc/xdg"
    files = [os.path.join(os.path.expanduser(d), "pip", "pip.conf") for d in dirs.split(":")]
    files.append("/etc/pip.conf")
    if not isolated and not (env_file and os.path.exists(env_file)):
        user = environ.get("XDG_CONFIG_HOME", "").strip() or os.path.join(home, ".config")
        files += [os.path.join(home, ".pip", "pip.conf"), os.path.join(user, "pip", "pip.conf")]
    files.append(os.path.join(prefix, "pip.conf"))
    if env_file:
        files.append(env_file)
    return files


def _config_keys(path: str) -> dict[str, str] | str:
    """``section.key -> value`` of one pip.conf (keys normalised as pip does), or why not."""
    data = read_bounded(path, CONFIG_LIMIT)
    if isinstance(data, str):
        return data
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(data.decode("utf-8", "replace"), path)
    except configparser.Error:
        return {}  # pip stops on it, before it changes anything
    return {
        f"{section}.{_config_name(name)}": value
        for section in parser.sections()
        for name, value in parser.items(section)
    }


def _config_name(name: str) -> str:
    return name.lower().replace("_", "-").removeprefix("--")


def pip_config_list(
    key: str, command: str, prefix: str, environ: Mapping[str, str], *, isolated: bool
) -> tuple[list[str], str | None]:
    """The values pip's configuration gives the list option KEY (``requirement``) of
    COMMAND run in PREFIX: the last of ``[global]``, ``[COMMAND]`` and ``PIP_KEY`` that says
    something, split on whitespace. And why libdoctor cannot tell, if so."""
    merged: dict[str, str] = {}
    for path in _config_files(prefix, environ, isolated):
        keys = _config_keys(path)
        if isinstance(keys, str):
            return [], f"{path}: {keys}"
        merged.update(keys)
    if not isolated:
        for name, value in environ.items():
            if name.startswith("PIP_") and name[4:].lower() not in ("version", "help"):
                merged[f":env:.{_config_name(name[4:])}"] = value
    value = ""
    for section in ("global", command, ":env:"):
        value = merged.get(f"{section}.{key}") or value
    return value.split(), None
