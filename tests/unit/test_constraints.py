"""constraints.txt pins every dependency at the version tested, agrees with pyproject.toml, and
is what the install, CI and the container install with."""

from __future__ import annotations

import importlib.metadata
import re

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import tools

ROOT = tools.ROOT
CONSTRAINTS = ROOT / "constraints.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")


def pins(text: str) -> dict[str, str]:
    """Canonical name -> pinned version; every line not a comment must be ``name==version``."""
    pinned: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"constraints.txt line {number}: {line!r} is not name==version"
        name = canonicalize_name(match.group(1))
        assert name not in pinned, f"constraints.txt line {number}: {name} pinned twice"
        pinned[name] = match.group(2)
    return pinned


def declared() -> list[Requirement]:
    """Every requirement of pyproject.toml: the dependencies and every extra's."""
    project = tools.pyproject()["project"]
    extras = [r for group in project["optional-dependencies"].values() for r in group]
    return [Requirement(r) for r in project["dependencies"] + extras]


def installed_closure() -> dict[str, str]:
    """Canonical name -> installed version of everything nova-orphans[test,docs] pulls in."""
    environment = default_environment()
    found: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[Requirement, tuple[str, ...]]] = [(r, ("",)) for r in declared()]
    while todo:
        requirement, extras = todo.pop()
        if requirement.marker is not None and not any(
            requirement.marker.evaluate({**environment, "extra": extra}) for extra in extras
        ):
            continue
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        distribution = importlib.metadata.distribution(name)
        found[name] = distribution.version
        wanted = ("", *requirement.extras)
        todo += [(Requirement(line), wanted) for line in distribution.requires or []]
    return found


def test_every_line_pins_one_package_exactly():
    pinned = pins(CONSTRAINTS.read_text())
    assert len(pinned) >= 20
    with pytest.raises(AssertionError, match="is not name==version"):
        pins("oslo.config>=9.0\n")
    with pytest.raises(AssertionError, match="pinned twice"):
        pins("oslo.config==9.0\noslo-config==9.1\n")


def test_every_dependency_of_pyproject_is_pinned_at_a_version_it_allows():
    pinned = pins(CONSTRAINTS.read_text())
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {name}=={pinned[name]}, pyproject.toml wants {requirement}"
        )


def test_the_tested_environment_is_the_pinned_one():
    """Every package the tests run with is pinned, at the version installed: the next
    install gets what was tested."""
    pinned = pins(CONSTRAINTS.read_text())
    closure = installed_closure()
    assert {"oslo-config", "libvirt-python", "prometheus-client", "pytest"} <= set(closure)
    unpinned = sorted(set(closure) - set(pinned))
    assert unpinned == [], f"installed but not pinned in constraints.txt: {unpinned}"
    moved = {n: (closure[n], pinned[n]) for n in closure if closure[n] != pinned[n]}
    assert moved == {}, f"installed version differs from the pin (installed, pinned): {moved}"


@pytest.mark.parametrize(
    "path",
    ["scripts/setup.sh", "scripts/test.sh", "deploy/Containerfile"],
)
def test_the_install_ci_and_the_container_install_with_the_constraints(path):
    text = (ROOT / path).read_text()
    # NOTE: pip itself is not pinned (as in OpenStack's upper-constraints).
    installs = [
        line
        for line in text.splitlines()
        if re.search(r"\bpip install\b", line) and "--upgrade pip" not in line
    ]
    assert installs, path
    for line in installs:
        assert re.search(r"-c \S*constraints\.txt", line), f"{path}: {line.strip()}"
