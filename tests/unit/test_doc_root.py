"""One doc root: the manual is the Sphinx tree under docs/, and every page of it is built."""

from __future__ import annotations

import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
#: The Markdown a reader meets where it lives, outside the manual: the README an operator
#: reads first, the benchmarks' figures (docs/performance.md includes them), the test
#: stack's notes beside its scripts and the Ansible collection's own files (Galaxy shows them).
OUTSIDE_THE_MANUAL = {
    "README.md",
    "benchmarks/README.md",
    "tests/e2e/stack/README.md",
    "deploy/ansible/ansible_collections/nova_orphans/fleet/README.md",
    "deploy/ansible/ansible_collections/nova_orphans/fleet/CHANGELOG.md",
}


def tracked(*patterns: str) -> set[str]:
    """The repository's files that match ``patterns`` (git's own list: no build output)."""
    out = subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return set(out.stdout.split())


def test_the_only_documentation_tree_is_docs() -> None:
    assert {p for p in tracked("*conf.py") if p.endswith("/conf.py")} == {"docs/conf.py"}
    pages = tracked("*.md", "*.rst")
    assert sorted(p for p in pages if not p.startswith("docs/")) == sorted(OUTSIDE_THE_MANUAL)
    assert not (ROOT / "doc").exists(), "a second doc root"


def test_every_page_outside_the_manual_that_the_manual_shows_is_included_not_copied() -> None:
    """docs/performance.md shows benchmarks/README.md by an include: one copy of the figures."""
    performance = (DOCS / "performance.md").read_text()
    assert "```{include} ../benchmarks/README.md" in performance
