"""The libvirt seam holds: no module of the product but ``virt/`` calls libvirt.

``virt.Host`` (a connection) and ``virt.Guest`` (a domain) own every libvirt call, with
libvirt's flags, error codes and fallbacks inside. Anywhere else a call of one of
libvirt-python's own method names (every public name of its connection, domain, snapshot
and checkpoint classes) is a call past the seam, unless it cannot be libvirt's: its
receiver is an imported module or name (``os.rename``, ``sqlite3.connect``), or its
arguments fit no libvirt method of that name (``pool.shutdown(wait=True)``,
``LOG.info(msg)``). ``EXCLUDED`` lists the names our own API shares with libvirt.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import typing
from collections.abc import Iterator

import libvirt
import pytest

from nova_orphans import virt

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nova_orphans"
#: The seam itself, and the fakes' test-driver node writer (it opens the node file it
#: wrote with libvirt itself, as a test would; import-linter allows it libvirt too).
ALLOWED = (PACKAGE / "virt", PACKAGE / "fakes" / "libvirt_node.py")
LIBVIRT_CLASSES = (
    libvirt.virConnect,
    libvirt.virDomain,
    libvirt.virDomainSnapshot,
    libvirt.virDomainCheckpoint,
)
#: libvirt's method names that our own API uses for another call of the same shape.
EXCLUDED = {
    # Host.close, and every other close() of ours: the journal's, the effects', the
    # observers' and the agent's (each takes no argument, as libvirt's does).
    "close",
    # The simulated hypervisor's restore(uuid) (sim/): a quarantined guest brought back,
    # in the shape of libvirt's restore(image).
    "restore",
}


def _signatures() -> dict[str, list[inspect.Signature | None]]:
    """Each public method name of libvirt's classes, with its signatures (None: unknown)."""
    found: dict[str, list[inspect.Signature | None]] = {}
    for cls in LIBVIRT_CLASSES:
        for name in dir(cls):
            if name.startswith("_") or name in EXCLUDED:
                continue
            try:
                signature: inspect.Signature | None = inspect.signature(getattr(cls, name))
            except (TypeError, ValueError):
                signature = None
            found.setdefault(name, []).append(signature)
    return found


SIGNATURES = _signatures()


def _fits(call: ast.Call, signatures: list[inspect.Signature | None]) -> bool:
    """Whether the call's arguments could be those of one of these libvirt methods."""
    starred = any(isinstance(arg, ast.Starred) for arg in call.args)
    if starred or any(keyword.arg is None for keyword in call.keywords):
        return True
    keywords = {str(keyword.arg): None for keyword in call.keywords}
    for signature in signatures:
        if signature is None:
            return True
        try:
            signature.bind(None, *([None] * len(call.args)), **keywords)  # None: self
        except TypeError:
            continue
        return True
    return False


def _imported(tree: ast.Module) -> set[str]:
    """The names an import binds anywhere in the module (modules, classes, functions)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names


def libvirt_calls(source: str) -> Iterator[tuple[int, str]]:
    """(line, call) of each call in ``source`` that may be a call of libvirt's."""
    tree = ast.parse(source)
    imported = _imported(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        if isinstance(receiver, ast.Name) and receiver.id in imported:
            continue
        signatures = SIGNATURES.get(node.func.attr)
        if signatures is not None and _fits(node, signatures):
            yield node.lineno, ast.unparse(node.func)


def _product_modules() -> list[pathlib.Path]:
    return sorted(
        path
        for path in PACKAGE.rglob("*.py")
        if not any(path == allowed or allowed in path.parents for allowed in ALLOWED)
    )


def test_no_module_but_the_seam_calls_libvirt() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {call}()"
        for path in _product_modules()
        for line, call in libvirt_calls(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "libvirt called past virt.Host and virt.Guest"


def test_the_names_are_libvirts_own_and_the_exclusions_are_libvirt_names() -> None:
    verbs = ("shutdown", "destroy", "undefineFlags", "XMLDesc", "metadata", "defineXML")
    listings = ("lookupByUUIDString", "getAllDomainStats", "listAllSnapshots", "getName")
    assert set(verbs + listings) <= set(SIGNATURES)
    for name in EXCLUDED:
        assert any(hasattr(cls, name) for cls in LIBVIRT_CLASSES), name


@pytest.mark.parametrize(
    ("source", "calls"),
    [
        ("dom.shutdown()", ["dom.shutdown"]),
        ("self._conn.defineXML(xml)", ["self._conn.defineXML"]),
        ("dom.undefineFlags(flags)", ["dom.undefineFlags"]),
        (
            "dom.XMLDesc(0)\nstate, reason = guest._domain.state()",
            ["dom.XMLDesc", "guest._domain.state"],
        ),
        ("d.metadata(*args)", ["d.metadata"]),
        # Not libvirt's: an imported receiver, or arguments no libvirt method takes.
        ("import os\nos.rename(a, b)", []),
        ("pool.shutdown(wait=True, cancel_futures=True)", []),
        ("LOG.info('read %s', uuid)", []),
        ("effects.undefine(uuid, directory)", []),
        ("journal.close()", []),
        ("guest.poweroff()\nhost.define(xml)", []),
    ],
)
def test_what_counts_as_a_call_of_libvirts(source: str, calls: list[str]) -> None:
    assert [call for _, call in libvirt_calls(source)] == calls


def _libvirt_types(hint: object) -> list[object]:
    if getattr(hint, "__module__", None) == "libvirt":
        return [hint]
    return [found for arg in typing.get_args(hint) for found in _libvirt_types(arg)]


def _public_callables() -> Iterator[tuple[str, typing.Any]]:
    for name in virt.__all__:
        value = getattr(virt, name)
        if inspect.isfunction(value):
            yield name, value
    for cls in (virt.Host, virt.Guest):
        for name, value in vars(cls).items():
            if isinstance(value, property):
                yield f"{cls.__name__}.{name}", value.fget
            elif inspect.isfunction(value) and not name.startswith("_"):
                yield f"{cls.__name__}.{name}", value


def test_the_seam_hands_out_no_libvirt_object() -> None:
    """What ``Host``, ``Guest`` and the seam's functions return is ours: no caller ever
    holds a libvirt domain to call."""
    leaks = {
        name: found
        for name, call in _public_callables()
        if (found := _libvirt_types(typing.get_type_hints(call).get("return")))
    }
    assert leaks == {}
