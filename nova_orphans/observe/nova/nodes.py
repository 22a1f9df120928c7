"""Nova's compute node(s) of one host, and nova-compute's local ``compute_id`` file.

Requests: one ``GET /os-hypervisors/detail?hypervisor_hostname_pattern=`` by
the hostname libvirt reports (on a libvirt compute that is Nova's node for the
host: done). Only when that does not find a node of the host (another driver, or
a wrong view) is the paged listing of every node read. Fails closed like
``NovaObserver``: any error raises ``NovaError``.
"""

from __future__ import annotations

import errno
import os
import stat
import urllib.parse
import uuid as uuidlib
from collections.abc import Callable, Sequence
from typing import Any

from nova_orphans.classify.identity import LocalComputeId, NovaNode
from nova_orphans.exceptions import NovaOrphansError
from nova_orphans.observe.errors import KeystoneError, NovaAuthFailed, NovaBadAnswer, NovaError
from nova_orphans.observe.nova.observer import NovaObserver

#: nova/virt/node.py: nova-compute's node identity file (Nova >= 2023.1).
COMPUTE_ID_FILE = "compute_id"


def nodes_for(nova: NovaObserver, host: str, hostname: str) -> tuple[NovaNode, ...]:
    """Nova's nodes of ``host`` and every node named ``hostname`` (the libvirt's).

    NOTE: at microversion >= 2.53 ``hypervisor_hostname_pattern`` matches node
    names (a LIKE search, so the result is filtered exactly here), not hosts; the
    node's host is ``service.host``. Nova answers 404 when nothing matches.
    """
    query = urllib.parse.urlencode({"hypervisor_hostname_pattern": hostname})
    # NOTE: NovaObserver's request path (retries, status checks) serves this module too.
    body = _cells_explain(nova, lambda: nova._get(f"/os-hypervisors/detail?{query}", True))
    named = [n for n in _nodes(body, "the hypervisor search") if n.hypervisor_hostname == hostname]
    if any(n.host == host for n in named):
        return tuple(named)
    every = _cells_explain(
        nova,
        lambda: [parse_node(i) for i in nova._paged("/os-hypervisors/detail", "hypervisors", {})],
    )
    found = tuple(n for n in every if n.host == host or n.hypervisor_hostname == hostname)
    if not any(n.host == host for n in found):
        # NOTE: the listing skips a cell Nova cannot reach (docs/design.md rule 17):
        # "no node of this host" holds only when the host's cell answers.
        nova.require_cells_answer(host)
    return found


def _cells_explain(nova: NovaObserver, call: Callable[[], Any]) -> Any:
    """``call()``; when Nova fails it, a cell Nova cannot reach is named as the cause.

    NOTE: the hypervisor listings read every cell's compute nodes: a cell whose
    database is down makes them fail (HTTP 500), which says less to the operator
    than "Nova could not reach a cell" (docs/design.md rule 17).
    """
    try:
        return call()
    except (NovaAuthFailed, KeystoneError):
        raise
    except NovaError:
        nova.require_cells_answer()
        raise


def _nodes(body: Any, request: str) -> list[NovaNode]:
    if body is None:
        return []
    items = body.get("hypervisors") if isinstance(body, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise NovaBadAnswer(request=request, reason="no 'hypervisors' list in the answer")
    return [parse_node(item) for item in items]


def parse_node(item: dict[str, Any]) -> NovaNode:
    """Build a ``NovaNode`` from one entry of ``/os-hypervisors/detail`` (2.53+)."""
    service = item.get("service")
    fields = (item.get("id"), item.get("hypervisor_hostname"), item.get("hypervisor_type"))
    if not isinstance(service, dict) or not service.get("host") or not all(fields):
        raise NovaBadAnswer(
            request="the hypervisor listing",
            reason="a hypervisor without id, hypervisor_hostname, hypervisor_type or service.host",
        )
    return NovaNode(
        uuid=str(item["id"]),
        hypervisor_hostname=str(item["hypervisor_hostname"]),
        hypervisor_type=str(item["hypervisor_type"]),
        host=str(service["host"]),
    )


def read_compute_id(directories: Sequence[str]) -> LocalComputeId:
    """Read nova-compute's ``compute_id`` in each of ``directories`` (a missing one is skipped).

    NOTE: nova/virt/node.py reads it from the directory of each config file and
    from ``state_path``; every copy must agree (nova-compute refuses to start if
    not). The file is on this machine, but its content is not trusted: it must be
    a regular file (not a symlink, device or FIFO), small, and hold a UUID; anything
    else is named in ``unusable`` (never echoed: it may hold anything).
    """
    if not directories:
        return LocalComputeId(absent="no directory to look for compute_id in")
    found: dict[str, str] = {}
    unusable: list[str] = []
    for directory in dict.fromkeys(directories):
        path = os.path.join(directory, COMPUTE_ID_FILE)
        try:
            found[path] = _read_uuid_file(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except _Unusable as exc:
            unusable.append(f"{path} {exc}")
        except OSError as exc:
            unusable.append(f"cannot read {path}: {exc.strerror}")
    absent = f"no {COMPUTE_ID_FILE} file in {', '.join(dict.fromkeys(directories))}"
    return LocalComputeId(found, absent, tuple(unusable))


#: nova-compute writes ``str(uuid)`` (36 characters) and reads 40; more is not its file.
MAX_COMPUTE_ID_BYTES = 64


class _Unusable(NovaOrphansError):
    """A compute_id that is there but cannot be trusted; the message says why.

    NOTE: never reaches the operator as an error: the file is listed as unusable and
    the view stays unproven (docs/design.md rule 10).
    """


def _read_uuid_file(path: str) -> str:
    """The canonical UUID held by the regular file ``path``; raises ``_Unusable`` or OSError.

    NOTE: O_NOFOLLOW refuses a symlink as the file itself and O_NONBLOCK keeps a
    FIFO from blocking the open; the directories on the way are followed, as
    nova-compute follows them.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Unusable("is a symlink") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Unusable("is not a regular file")
        data = os.read(fd, MAX_COMPUTE_ID_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_COMPUTE_ID_BYTES:
        raise _Unusable(f"is larger than {MAX_COMPUTE_ID_BYTES} bytes")
    try:
        return str(uuidlib.UUID(data.decode("ascii").strip()))
    except (UnicodeDecodeError, ValueError):
        raise _Unusable("does not hold a UUID") from None
