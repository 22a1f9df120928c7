"""Host names are checked as RFC 1123 host names before a libvirt URI is built from one.

docs/design.md rule 20: the fleet's host names come from Nova's service listing or a
report, and either may be crafted; ``uri_for`` never puts raw text into a URI.
"""

from __future__ import annotations

import pytest

from nova_orphans.fleet.hostname import NotAHostName, check_host_name
from nova_orphans.fleet.scan import uri_for

GOOD = (
    "cmp-1",
    "cmp_01",
    "compute-1.example.org",
    "10.0.0.7",
    "a" * 63,
    ".".join(["b" * 63] * 3) + ".c",
)
BAD = {
    "a path and a query": "evil/system?command=touch /tmp/pwned",
    "a user": "root@evil",
    "a port": "evil:2222",
    "a percent-encoded slash": "evil%2fsystem",
    "a blank": "cmp 1",
    "a leading underscore": "_cmp",
    "an empty label": "cmp..example.org",
    "a trailing dot": "cmp-1.",
    "a leading hyphen": "-cmp",
    "a trailing hyphen": "cmp-",
    "a label of 64 characters": "a" * 64,
    "more than 253 characters": ".".join(["b" * 63] * 4),
    "nothing": "",
    "a Cyrillic letter": "c\u043emp-1",
    "an escape sequence": "cmp-\x1b[2J",
    "a bidi override": "cmp-\u202e1",
    "a newline": "cmp-1\nx",
}


@pytest.mark.parametrize("host", GOOD)
def test_a_host_name_builds_its_uri_unchanged(host: str) -> None:
    assert check_host_name(host) == host
    assert uri_for("qemu+ssh://{host}/system", host) == f"qemu+ssh://{host}/system"


@pytest.mark.parametrize("host", BAD.values(), ids=BAD.keys())
def test_what_is_no_host_name_builds_no_uri(host: str) -> None:
    with pytest.raises(NotAHostName, match="is not a host name"):
        uri_for("qemu+ssh://{host}/system", host)
