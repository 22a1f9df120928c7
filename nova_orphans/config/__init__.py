"""Configuration: oslo.config options, one module per group, loaded strictly.

``config.opts`` gathers the groups (``default``, ``libvirt``, ``agent``,
``metrics``, ``fleet``, ``nova``, ``services``) for oslo-config-generator;
``config.loading`` registers and checks them (docs/design.md rule 11).
This face hands on the names the commands use.
"""

from nova_orphans.config.agent import policy
from nova_orphans.config.host import HostSettings, host_settings
from nova_orphans.config.libvirt import check_libvirt_uri
from nova_orphans.config.loading import load
from nova_orphans.config.paths import StatePaths, state_paths
from nova_orphans.config.services import SERVICE_ENDPOINTS, SERVICES_GROUP
from nova_orphans.config.strict import ConfigError, files_read, writable_file

__all__ = [
    "SERVICES_GROUP",
    "SERVICE_ENDPOINTS",
    "ConfigError",
    "HostSettings",
    "StatePaths",
    "check_libvirt_uri",
    "files_read",
    "host_settings",
    "load",
    "policy",
    "state_paths",
    "writable_file",
]
