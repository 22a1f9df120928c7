"""Strict configuration: a typo or a bad value stops the command before anything runs.

docs/design.md rule 11. oslo.config ignores every key nobody registered and
checks a value only when something reads it. For a tool that stops and
undefines guests that is not good enough: an ignored ``dryrun = true`` is a
live run, and an ``interval`` read only after the first cycle is a cycle run on
a config the operator never meant. So:

- every file oslo.config reads is read again with oslo.config's own parser, and
  each group and key in it must be one of ours (``ConfigFiles.check_keys``);
- every value of every option is read once, at load time (``check_values``);
- a few checks oslo.config cannot express live here too (``require_readable``,
  ``writable_file``).

Each failure is one ``ConfigError`` naming the file, the group and the key, in
the operator's words; nothing of oslo.config's internals.
"""

from __future__ import annotations

import difflib
import glob
import os
import stat
from collections.abc import Mapping, Sequence

from oslo_config import cfg

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError, one_line

#: Options by group, as written in a config file ("DEFAULT" for the default group).
Groups = Mapping[str, Sequence[cfg.Opt]]

DEFAULT_GROUP = "DEFAULT"


class ConfigError(NovaOrphansError):
    """The configuration cannot be used as written."""

    exit_code = exits.USAGE
    label = "config error"


def files_read(conf: cfg.ConfigOpts) -> list[str]:
    """The files ``conf`` was loaded from, in oslo.config's order (later ones win).

    NOTE: oslo.config also reads every ``*.conf`` of the project's default
    config directories (e.g. /etc/nova-orphans/nova-orphans.conf.d) when they
    exist; those are checked as strictly as the files named on the command line.
    """
    files = list(conf.default_config_files or [])
    for directory in conf.default_config_dirs or []:
        if os.path.isdir(directory):
            files.extend(conf_files_in(directory))
    return files


def parse(path: str) -> dict[str, dict[str, list[str]]]:
    """``{section: {key: [value, ...]}}`` of one file, as oslo.config's parser sees it."""
    sections: dict[str, dict[str, list[str]]] = {}
    cfg.ConfigParser(path, sections).parse()
    return sections


def group_name(section: str) -> str:
    """The group a section header selects: oslo.config lower-cases all but DEFAULT."""
    return section if section == DEFAULT_GROUP else section.lower()


def file_keys(opts: Sequence[cfg.Opt]) -> set[str]:
    """The keys that set ``opts`` in a file.

    NOTE: deprecated names (keystoneauth's ``auth_plugin``, ``tenant_name``…)
    are refused too: oslo.config would read them, but log a warning line of its
    own, and a new tool has no old config files to honour.
    """
    return {opt.dest for opt in opts}


def _renamed(key: str, opts: Sequence[cfg.Opt]) -> str | None:
    """The current name of the option ``key`` is a deprecated name of, if any."""
    for opt in opts:
        if any(d.name == key and not d.group for d in opt.deprecated_opts):
            return str(opt.dest)
    return None


class ConfigFiles:
    """The files a loaded ``ConfigOpts`` read, parsed again to check them key by key."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        #: ``[(path, sections)]`` in the order oslo.config read them.
        self.parsed = [(path, parse(path)) for path in files_read(conf)]

    def check_keys(self, groups: Groups) -> None:
        """Raise ``ConfigError`` for the first group or key that is not ours."""
        for path, sections in self.parsed:
            for section, keys in sections.items():
                group = group_name(section)
                if group not in groups:
                    hint = _group_hint(section, groups)
                    raise ConfigError(f"{path}: [{section}] is not a group{hint}")
                known = file_keys(groups[group])
                for key in keys:
                    if key not in known:
                        hint = _key_hint(key, group, groups)
                        raise ConfigError(f"{path}: [{section}] {key} is not an option{hint}")

    def check_values(self, conf: cfg.ConfigOpts, groups: Groups) -> None:
        """Read every option once, so a bad value fails now, naming the file that set it."""
        for group, opts in groups.items():
            values = conf if group == DEFAULT_GROUP else conf[group]
            for opt in opts:
                try:
                    getattr(values, opt.dest)
                except cfg.ConfigFileValueError as exc:
                    # NOTE: oslo.config raises this while handling the type's own
                    # ValueError, whose text is the operator-facing reason.
                    reason = str(exc.__context__ or exc)
                    where = self.where(group, opt)
                    raise ConfigError(
                        f"{where} is not valid: {reason[:1].lower()}{reason[1:]}"
                    ) from None
                except cfg.NoSuchOptError as exc:
                    # NOTE: oslo.config substitutes $NAME in values with option NAME.
                    missing = getattr(exc.__context__, "opt_name", exc.opt_name)
                    # NOTE: the name is part of the value; a secret's is never shown.
                    reference = "its $reference" if opt.secret else f"${missing}"
                    raise ConfigError(
                        f"{self.where(group, opt)}: {reference} names no option "
                        "(write $$ for a literal $)"
                    ) from None
                except cfg.Error as exc:
                    raise ConfigError(f"{self.where(group, opt)}: {one_line(exc)}") from None

    def setting(self, group: str, key: str) -> tuple[str, str, str] | None:
        """``(path, section, value)`` of the last file setting ``key`` in ``group``: the one
        in use (oslo.config lets later files win, and the last line within a file)."""
        for path, sections in reversed(self.parsed):
            for section, keys in sections.items():
                if group_name(section) == group and key in keys:
                    return path, section, keys[key][-1]
        return None

    def where(self, group: str, opt: cfg.Opt) -> str:
        """``FILE: [group] key = value`` of ``opt``; a secret (password, token) is not shown."""
        found = self.setting(group, opt.dest)
        if found is None:
            return f"[{group}] {opt.dest}"
        path, section, value = found
        return f"{path}: [{section}] {opt.dest} = {'****' if opt.secret else one_line(value)}"


def _group_hint(section: str, groups: Groups) -> str:
    nearest = _nearest(section.lower(), {g.lower(): g for g in groups})
    return f"; did you mean [{nearest}]?" if nearest else ""


def _key_hint(key: str, group: str, groups: Groups) -> str:
    renamed = _renamed(key, groups[group])
    if renamed:
        return f" any more; it is now called {renamed}"
    elsewhere = [g for g, opts in groups.items() if g != group and key in file_keys(opts)]
    if elsewhere:
        return f"; it belongs in [{elsewhere[0]}]"
    nearest = _nearest(key, {o.dest: o.dest for o in groups[group]})
    if nearest:
        return f"; did you mean {nearest}?"
    qualified = {o.dest: f"[{g}] {o.dest}" for g, opts in groups.items() for o in opts}
    nearest = _nearest(key, qualified)
    return f"; did you mean {nearest}?" if nearest else ""


#: How alike (difflib ratio) a name must be to be offered: typos score 0.8 and more;
#: "username" and "service_name" score 0.7 and are different options, not a typo.
NEAR = 0.75


def _nearest(word: str, candidates: Mapping[str, str]) -> str | None:
    """The candidate whose key is closest to ``word`` (difflib), or None when none is close."""
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=NEAR)
    return candidates[matches[0]] if matches else None


def writable_file(path: str, what: str) -> None:
    """``path`` can be (re)written: its directory exists and is writable, it is no directory."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ConfigError(f"{what}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(f"{what}: directory {directory} is not writable")
    if os.path.isdir(path):
        raise ConfigError(f"{what} is a directory")
    # NOTE: a FIFO would block the writer for good, a device take what it is given.
    kind = file_kind(os.stat(path).st_mode) if os.path.lexists(path) else None
    if kind:
        raise ConfigError(f"{what} is {kind}, not a file")


#: The largest config file read (bytes): a config is a few kilobytes; anything bigger is
#: not one (a log, an image) and is refused before it is parsed.
MAX_CONFIG_BYTES = 16 * 1024 * 1024


def require_readable(path: str) -> None:
    """``path`` is a regular file this process can read, in UTF-8; else ``ConfigError``
    naming it and why (for a bad byte: its line).

    NOTE: opened with O_NONBLOCK and checked to be a regular file before a byte is read:
    a FIFO or a device named as a config file would otherwise hang the command (a FIFO
    with no writer) or never end (/dev/zero). oslo.config's own reading then fails with a
    UnicodeDecodeError that names no file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind:
            raise ConfigError(f"cannot read config file {path}: it is {kind}, not a file")
        data = _read_all(fd, MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes")
    if b"\0" in data:
        # NOTE: a NUL byte is no text a config holds (an image, a copy gone wrong); oslo.config
        # would quote the whole line in its refusal.
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
        raise ConfigError(f"config file {path}, line {line}: a NUL byte: this is no text file")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"config file {path}, line {line}: byte 0x{data[exc.start]:02x} is not UTF-8 "
            "(write the file in UTF-8)"
        ) from None


def _read_all(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of the open file ``fd``."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(65536, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def file_kind(mode: int) -> str | None:
    """What a path that is no regular file is ("a directory", "a FIFO"...); None for a file."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def require_directory(path: str, what: str) -> None:
    """``path`` is a directory this process can list; else ``ConfigError`` naming ``what``."""
    if not os.path.isdir(path) or not os.access(path, os.R_OK | os.X_OK):
        raise ConfigError(f"{what} {path} is not a readable directory")


def conf_files_in(directory: str) -> list[str]:
    """The ``*.conf`` files of a config directory, in the order oslo.config reads them."""
    return sorted(glob.glob(os.path.join(directory, "*.conf")))
