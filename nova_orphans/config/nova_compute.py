"""nova-compute's own config, read as nova-compute reads it, and where its ``compute_id`` is."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Sequence

from oslo_config import cfg

from nova_orphans.config.strict import (
    DEFAULT_GROUP,
    ConfigError,
    conf_files_in,
    parse,
    require_directory,
    require_readable,
)
from nova_orphans.exceptions import one_line

#: nova.conf's ``state_path`` as distributions install it (nova's own default is the
#: directory it is installed in, which every package overrides).
NOVA_STATE_PATH = "/var/lib/nova"
#: Nova's default ``instances_path``: ``$state_path/instances``.
DEFAULT_INSTANCES_PATH = f"{NOVA_STATE_PATH}/instances"


#: Where nova-compute keeps its state on a compute host when its config is not named
#: (and where kolla keeps it whatever its nova.conf says): the packages' state_path, and
#: kolla-ansible's ``nova_compute`` named volume (mounted on /var/lib/nova in the
#: nova_compute container) under Docker and under Podman.
NOVA_STATE_DIRS_DEFAULT: tuple[str, ...] = (
    NOVA_STATE_PATH,
    "/var/lib/docker/volumes/nova_compute/_data",
    "/var/lib/containers/storage/volumes/nova_compute/_data",
)
#: NOTE: what is searched; tests point it at scratch directories.
NOVA_STATE_DIRS = NOVA_STATE_DIRS_DEFAULT


def compute_id_dirs(nova: NovaComputeConf) -> tuple[str, ...]:
    """Every directory nova-compute's ``compute_id`` may be in on this machine.

    NOTE: found even without ``nova_config_file`` (it is optional): the proof of
    identity must not depend on it (docs/design.md rule 10). nova's packaged
    default state_path is the first of ``NOVA_STATE_DIRS``.
    """
    own = [d for d in nova.compute_id_dirs if d != NOVA_STATE_PATH]
    return tuple(dict.fromkeys([*own, *NOVA_STATE_DIRS]))


#: The libvirt URI nova-compute connects to for each [libvirt] virt_type when connection_uri
#: is unset (nova/virt/libvirt/driver.py ``_uri()``); every other type: qemu:///system.
VIRT_TYPE_URIS = {
    "lxc": "lxc:///",
    "parallels": "parallels:///system",
    "uml": "uml:///system",
    "xen": "xen:///",
}
QEMU_URI = "qemu:///system"


@dataclasses.dataclass(frozen=True)
class NovaComputeConf:
    """The few nova-compute settings we share, as nova-compute itself resolves them."""

    host: str
    state_path: str
    instances_path: str
    connection_uri: str
    compute_id_dirs: tuple[str, ...]

    @classmethod
    def read(cls, files: Sequence[str], dirs: Sequence[str]) -> NovaComputeConf:
        """Read ``files`` then ``dirs``' ``*.conf`` as ``nova-compute --config-file --config-dir``.

        Only ``host``, ``state_path``, ``instances_path`` and ``[libvirt]``
        ``connection_uri``/``virt_type`` are read, with nova's defaults and ``$name``
        interpolation; everything else in nova's files is not ours and is ignored.
        Raises ``ConfigError`` (one line) for an unreadable file or directory, a
        ``$reference`` to an option nova-orphans does not read, or a relative
        ``instances_path``.
        """
        for directory in dirs:
            require_directory(directory, "nova_config_dir")
        read = [*files, *(f for d in dirs for f in conf_files_in(d))]
        for path in read:
            require_readable(path)
        nova = cfg.ConfigOpts()
        nova.register_opts(
            [
                cfg.StrOpt("host", default=socket.gethostname()),
                cfg.StrOpt("state_path", default=NOVA_STATE_PATH),
                cfg.StrOpt("instances_path", default="$state_path/instances"),
            ]
        )
        nova.register_opts(
            [cfg.StrOpt("connection_uri", default=""), cfg.StrOpt("virt_type", default="kvm")],
            group="libvirt",
        )
        where = ", ".join([*files, *dirs]) or "nova's defaults"
        try:
            # NOTE: default_config_dirs=[] and files=[]: never oslo's search of ~/.nova,
            # /etc/nova and nova.conf.d; only what the operator named is read.
            nova(
                args=[],
                project="nova",
                prog="nova-compute",
                default_config_files=list(files),
                default_config_dirs=list(dirs),
            )
            libvirt = nova.libvirt
            if not os.path.isabs(nova.instances_path):
                raise ConfigError(_relative(read, nova.instances_path, nova.state_path))
            return cls(
                host=nova.host,
                state_path=nova.state_path,
                instances_path=nova.instances_path,
                connection_uri=libvirt.connection_uri
                or VIRT_TYPE_URIS.get(libvirt.virt_type, QEMU_URI),
                compute_id_dirs=(
                    *(os.path.dirname(os.path.abspath(f)) for f in files),
                    nova.state_path,
                )
                if files or dirs
                else (),
            )
        except cfg.TemplateSubstitutionError as exc:
            raise ConfigError(f"nova-compute config ({where}): {exc.msg}") from exc
        except cfg.NoSuchOptError as exc:
            # NOTE: oslo.config names the option being read, not the unknown $reference
            # in its value; that one is the error it caught.
            inner = exc.__context__ if isinstance(exc.__context__, cfg.NoSuchOptError) else exc
            raise ConfigError(
                f"nova-compute config ({where}): {exc.opt_name} refers to "
                f"${inner.opt_name}, an option "
                "nova-orphans does not read (only host, state_path, instances_path and "
                "[libvirt] connection_uri, virt_type)"
            ) from exc
        except cfg.Error as exc:
            raise ConfigError(f"nova-compute config ({where}): {one_line(exc)}") from exc


def _relative(files: Sequence[str], instances_path: str, state_path: str) -> str:
    """Why nova-compute's relative ``instances_path`` is refused: the file and key that set it.

    NOTE: oslo.config's own ``get_location`` names the last file parsed, not the one that
    set the value; the files are read again, later ones winning as in oslo.config.
    """
    for key, value in (("instances_path", instances_path), ("state_path", state_path)):
        path = next((f for f in reversed(files) if key in parse(f).get(DEFAULT_GROUP, {})), None)
        if path is not None:
            made = "" if key == "instances_path" else f" (instances_path = {instances_path})"
            return (
                f"nova-compute config {path}: [{DEFAULT_GROUP}] {key} = {value} must be an "
                f"absolute path{made}"
            )
    return f"nova-compute config: instances_path = {instances_path} must be an absolute path"
