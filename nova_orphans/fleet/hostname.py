"""Host names as RFC 1123 has them, checked before any URI is built from one.

NOTE: the fleet's host names come from Nova's service listing (anyone who can register
a nova-compute service chooses one) or from another host's report: hostile input
(docs/design.md rule 20). A "host" carrying ``/``, ``?``, ``@`` or ``:`` would otherwise
rewrite the libvirt URI built from it (``qemu+ssh://{host}/system``).
"""

from __future__ import annotations

import re
import string

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError

#: One label (RFC 1123 §2.1): letters, digits and inner hyphens, 1 to 63 of them.
#: NOTE: an underscore is allowed too: nova-compute's ``host`` is free text, inventories
#: do name hosts ``cmp_01``, and ``_`` means nothing in a URI (RFC 3986 "unreserved").
_LABEL = re.compile(r"(?![-_])[A-Za-z0-9_-]{1,63}(?<![-_])", re.ASCII)
#: The longest host name in its dotted text form.
HOST_NAME_MAX = 253


class NotAHostName(NovaOrphansError):
    """A name that is no RFC 1123 host name: no URI is built from it."""

    # NOTE: given by the operator (``--hosts``) it is a usage error; from Nova it makes
    # that one host unreachable (``fleet/scan.py``).
    exit_code = exits.USAGE


def check_host_name(host: str) -> str:
    """``host`` when it is an RFC 1123 host name (dot-separated labels of letters, digits
    and inner hyphens or underscores, at most 253 characters); raises ``NotAHostName``
    otherwise."""
    if len(host) > HOST_NAME_MAX or not all(_LABEL.fullmatch(p) for p in host.split(".")):
        raise NotAHostName(
            f"{host!r} is not a host name (RFC 1123: dot-separated labels of letters, "
            "digits and inner hyphens or underscores, at most 253 characters)"
        )
    return host


class BadURITemplate(NovaOrphansError):
    """A libvirt URI template that is not ``{host}`` in a URI: no host is tried with it."""

    exit_code = exits.USAGE
    label = "usage error"


def check_uri_template(template: str) -> str:
    """``template`` when its only placeholder is ``{host}`` (at least once, no format spec,
    no other ``{``/``}`` than ``{{``/``}}``); raises ``BadURITemplate`` otherwise.

    NOTE: the template is filled by plain replacement of ``{host}``; any other brace
    would stay in every host's URI and make every host unreachable, one by one.
    """
    fields = set()
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        raise BadURITemplate(
            f"{template!r}: an unmatched brace (only {{host}} may stand in braces)"
        ) from None
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if field != "host" or spec or conversion:
            text = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise BadURITemplate(
                f"{template!r}: {{{text}}} is not a placeholder (only {{host}} is)"
            )
        fields.add(field)
    if not fields:
        raise BadURITemplate(f"{template!r} does not contain {{host}}")
    if "{{" in template or "}}" in template:
        raise BadURITemplate(f"{template!r}: a libvirt URI has no braces besides {{host}}")
    return template
