"""Loading our config files: every option registered, then checked strictly before anything runs.

The checks themselves (keys, values, files) are ``config.strict``'s; the option
groups are one module each (``config.default``, ``config.agent``…), gathered by
``config.opts``.
"""

from __future__ import annotations

from collections.abc import Sequence

from oslo_config import cfg
from oslo_log import log as oslo_log

from nova_orphans.config import agent, default, metrics, nova, opts, strict
from nova_orphans.config.host import host_settings
from nova_orphans.config.strict import DEFAULT_GROUP


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


def load(config_files: Sequence[str]) -> cfg.ConfigOpts:
    """Parse our config files strictly (docs/design.md rule 11); raises ``ConfigError``.

    Before anything else runs: every group and key must be ours, every value is
    read and checked, and so are the settings built from them (the agent's
    policy, the host settings, the metrics textfile). ``audit``, ``run`` and
    every other command load their configuration here, so they all accept and
    refuse the same files.
    """
    conf = cfg.ConfigOpts()
    register(conf)
    for path in config_files:
        strict.require_readable(path)
    conf(args=[], project="nova-orphans", default_config_files=list(config_files))
    files = strict.ConfigFiles(conf)
    plugin_opts = nova.auth_plugin_opts(files)
    conf.register_opts(plugin_opts, group=nova.NOVA_GROUP)
    groups = opts.groups(plugin_opts)
    files.check_keys(groups)
    files.check_values(conf, groups)
    agent.policy(conf)
    host_settings(conf)
    if conf.metrics.textfile:
        textfile = next(o for o in metrics.metrics_opts if o.dest == "textfile")
        strict.writable_file(conf.metrics.textfile, files.where("metrics", textfile))
    return conf
