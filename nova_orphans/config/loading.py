"""Loading our config files: every option registered, then checked strictly before anything runs.

The checks themselves (keys, values, files) are ``config.strict``'s; the option
groups are one module each (``config.default``, ``config.agent``…), gathered by
``config.opts``.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Sequence

from oslo_config import cfg
from oslo_log import log as oslo_log

from nova_orphans.config import agent, credentials, default, metrics, nova, opts, strict
from nova_orphans.config.host import host_settings
from nova_orphans.config.strict import DEFAULT_GROUP
from nova_orphans.exceptions import one_line


def register(conf: cfg.ConfigOpts) -> None:
    """Register every option of this tool on ``conf`` (the auth plugin's come with ``load``)."""
    oslo_log.register_options(conf)
    # NOTE: oslo.log registers fatal_deprecations only on first use; the strict check reads it.
    conf.register_opts(default.logging_opts())
    for group, group_opts in opts.groups(()).items():
        if group == DEFAULT_GROUP:
            conf.register_opts(default.default_opts)
        else:
            conf.register_opts(group_opts, group=group)
    for name, value in nova.NOVA_DEFAULTS.items():
        conf.set_default(name, value, group=nova.NOVA_GROUP)


def load(config_files: Sequence[str], config_dirs: Sequence[str] = ()) -> cfg.ConfigOpts:
    """Parse our config files strictly (docs/design.md rule 11); raises ``ConfigError``.

    ``config_dirs``: oslo's ``--config-dir``, whose ``*.conf`` files are read in name
    order after ``config_files``; without it oslo.config's default directories of the
    project (e.g. /etc/nova-orphans/nova-orphans.conf.d) are read when they exist.

    Before anything else runs: every file is a readable regular UTF-8 file, every group
    and key must be ours, every value is read and checked, and so are the settings
    built from them (the agent's policy, the host settings, the metrics textfile).
    ``audit``, ``run`` and every other command load their configuration here, so they
    all accept and refuse the same files.
    """
    for directory in config_dirs:
        strict.require_directory(directory, "--config-dir")
    dirs = list(config_dirs) or cfg.find_config_dirs(project=PROJECT)
    for path in [
        *config_files,
        *(f for d in dirs if os.path.isdir(d) for f in strict.conf_files_in(d)),
    ]:
        strict.require_readable(path)
    conf = cfg.ConfigOpts()
    register(conf)
    _parse(conf, config_files, config_dirs)
    files = strict.ConfigFiles(conf)
    plugin_opts = nova.auth_plugin_opts(files)
    conf.register_opts(plugin_opts, group=nova.NOVA_GROUP)
    groups = opts.groups(plugin_opts)
    files.check_keys(groups)
    files.check_values(conf, groups)
    nova.refuse_keystoneauth_retries(files)
    credentials.check(conf, files)
    default.check_logging(conf, files)
    agent.policy(conf)
    host_settings(conf)
    if conf.metrics.textfile:
        textfile = next(o for o in metrics.metrics_opts if o.dest == "textfile")
        strict.writable_file(conf.metrics.textfile, files.where("metrics", textfile))
    return conf


def _parse(conf: cfg.ConfigOpts, config_files: Sequence[str], config_dirs: Sequence[str]) -> None:
    """oslo.config's parse of the files, a bad value of oslo.log's options a ``ConfigError``.

    NOTE: oslo.log's options (``debug``, ``use_journal``...) are command-line options of
    oslo.config; for a bad value in a file ("debug = maybe") oslo.config writes
    "argument --debug: ..." to stderr itself and exits. That line blames a flag the
    operator never gave: it is caught here and the option is named in its file.
    """
    caught = io.StringIO()
    try:
        with contextlib.redirect_stderr(caught):
            conf(
                args=[],
                project=PROJECT,
                default_config_files=list(config_files),
                default_config_dirs=list(config_dirs) or None,
            )
    except SystemExit:
        files = strict.ConfigFiles(conf)
        for opt in default.logging_opts():
            found = files.setting(DEFAULT_GROUP, opt.dest)
            if found is None:
                continue
            try:
                opt.type(found[2])
            except ValueError as exc:
                raise strict.ConfigError(
                    f"{files.where(DEFAULT_GROUP, opt)} is not valid: {one_line(exc)}"
                ) from None
        said = one_line(caught.getvalue()) or "no reason given"
        raise strict.ConfigError(f"oslo.config refused the config files: {said}") from None


#: oslo.config's project: the default config files and directories are named after it.
PROJECT = "nova-orphans"
