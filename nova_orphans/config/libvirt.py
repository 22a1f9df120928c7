"""``[libvirt]``: this host's hypervisor URI, and the check every libvirt URI passes."""

from __future__ import annotations

from oslo_config import cfg

from nova_orphans.config.strict import ConfigError

libvirt_opts = [
    cfg.StrOpt(
        "connection_uri",
        help="Libvirt URI of this host's hypervisor. Default: nova-compute's (its [libvirt] "
        "connection_uri, else the one its virt_type implies: qemu:///system for kvm and qemu).",
    ),
]

#: libvirt's hypervisor drivers (the scheme of a URI, before any "+transport").
LIBVIRT_DRIVERS = frozenset(
    [
        *("bhyve", "ch", "esx", "gsx", "hyperv", "libxl", "lxc", "openvz", "parallels", "qemu"),
        *("test", "uml", "vbox", "vmwarefusion", "vmwareplayer", "vmwarews", "vpx", "vz", "xen"),
    ]
)
#: libvirt's remote transports ("qemu+ssh://").
LIBVIRT_TRANSPORTS = frozenset(["ext", "libssh", "libssh2", "ssh", "tcp", "tls", "unix"])


def check_libvirt_uri(uri: str) -> None:
    """Refuse a libvirt URI libvirt would misread; raises ``ConfigError`` naming the problem.

    NOTE: libvirt takes an unknown scheme, or ``test://file.xml``, for a remote
    host and fails with an unrelated TLS message ("Cannot read CA certificate").
    """
    scheme, sep, rest = uri.partition("://")
    driver, _, transport = scheme.partition("+")
    if not sep or driver not in LIBVIRT_DRIVERS:
        known = ", ".join(sorted(LIBVIRT_DRIVERS))
        raise ConfigError(
            f"libvirt URI {uri!r}: {driver or uri!r} is not a libvirt driver "
            f"(driver[+transport]://[host]/path with a driver of {known})"
        )
    if transport and transport not in LIBVIRT_TRANSPORTS:
        raise ConfigError(
            f"libvirt URI {uri!r}: {transport!r} is not a libvirt transport "
            f"({', '.join(sorted(LIBVIRT_TRANSPORTS))})"
        )
    if driver == "test" and not transport and not rest.startswith("/"):
        raise ConfigError(
            f"libvirt URI {uri!r}: the test driver takes an absolute file "
            "(test:///ABSOLUTE/PATH.xml) or test:///default"
        )
