"""One set of observer verbs (docs/design.md §1a, "look"): an observer's whole view is its
``look``, one thing read afresh its ``look_up``. The verbs they replaced — each observer had its
own — cannot come back, in the observers or in the fakes that stand in for them."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[3] / "nova_orphans"
#: Verbs observers once spoke, one set per observer.
RETIRED = frozenset({
    "observe", "explain", "explain_host", "explain_listing", "explain_domains", "list_domains",
    "read_domains", "lookup_domain", "lookup", "seen", "facts", "answer", "host_views",
})  # fmt: skip
#: Where observers (and what stands in for them) live. NOTE: virt/ is the libvirt seam, not
#: an observer: its ``Host.lookup`` is libvirt's own word, as in Nova's libvirt driver.
OBSERVING = (
    "observe",
    "fakes/host.py",
    "fresh_look.py",
    "audit.py",
    "agent.py",
    "act/reconcile.py",
)
#: The fakes' HTTP answers are a server's, not an observer's.
NOT_OBSERVERS = frozenset({"fakes/services.py"})


def observing_modules() -> list[pathlib.Path]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE))
        if name not in NOT_OBSERVERS and any(name.startswith(p) for p in OBSERVING):
            found.append(path)
    return found


def test_no_observer_method_uses_a_retired_verb():
    used = {
        f"{path.relative_to(PACKAGE)}:{node.name}"
        for path in observing_modules()
        for cls in ast.walk(ast.parse(path.read_text()))
        if isinstance(cls, ast.ClassDef)
        for node in cls.body
        if isinstance(node, ast.FunctionDef) and node.name in RETIRED
    }
    assert used == set()


def test_the_observers_speak_look_and_look_up():
    looks: set[str] = set()
    for path in observing_modules():
        for cls in ast.walk(ast.parse(path.read_text())):
            if isinstance(cls, ast.ClassDef) and cls.name.endswith(("Observer", "Tracker", "View")):
                methods = [n.name for n in cls.body if isinstance(n, ast.FunctionDef)]
                looks |= {f"{cls.name}.{m}" for m in methods if m.startswith("look")}
    expected = {
        "NovaObserver.look", "NovaTracker.look", "LibvirtObserver.look", "LibvirtView.look",
        "LeftoverObserver.look", "DangerObserver.look", "PlacementObserver.look",
        "LibvirtObserver.look_up", "LibvirtView.look_up",
    }  # fmt: skip
    assert expected <= looks
