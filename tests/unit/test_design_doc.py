"""docs/design.md is the design of record: every citation points at it, every rule is proved.

- No file of the repository cites another design document, or the path of one outside it.
- Every rule number cited anywhere ("rule N", "rules N, M", "rules N-M") is one that
  docs/design.md defines, and its rules are numbered 1..N without a gap.
- Every rule the design defines is cited by at least one test under tests/.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
THIS = pathlib.Path(__file__).resolve()

#: The rules whose tests are on this branch. NOTE: the rules added with the
#: operator-proof and restore work are proved by tests that land with that work;
#: extend this as they are merged, until it is every rule docs/design.md defines.

#: Directories that are not the project's own text (caches, environments, links).
SKIPPED_DIRS = frozenset(
    {
        ".git", ".venv", ".stack", ".hypothesis", ".import_linter_cache", ".mypy_cache",
        ".ruff_cache", ".pytest_cache", "__pycache__", "build", "dist",
    }
)  # fmt: skip
TEXT_SUFFIXES = frozenset(
    {".py", ".md", ".sh", ".toml", ".cfg", ".conf", ".ini", ".sample", ".service", ".txt"}
)

#: Another design document, by the name the old one had (built so this file does not match).
OTHER_DESIGN = re.compile(r"\b" + "DESIGN" + r"\.md\b")
#: The directory the old design lived in, outside the repository.
OUTSIDE_PATH = "/work/" + "shared"
#: "rule 7", "Rule 7", "rules 4, 15", "rules 12 and 13", "rules 1-9" (hyphen or en dash).
CITATION = re.compile(r"\brules?\s+(\d+(?:\s*(?:,|and|or|-|\u2013|to)\s*\d+)*)\b", re.IGNORECASE)
RANGE = re.compile(r"(\d+)\s*(?:-|\u2013|to)\s*(\d+)")
RULE_HEADING = re.compile(r"^(\d+)\. \*\*", re.MULTILINE)


def cited_rules(text: str) -> set[int]:
    """Every rule number ``text`` cites, ranges expanded."""
    numbers: set[int] = set()
    for match in CITATION.finditer(text):
        cited = match.group(1)
        for low, high in RANGE.findall(cited):
            numbers.update(range(int(low), int(high) + 1))
        numbers.update(int(n) for n in re.findall(r"\d+", cited))
    return numbers


def defined_rules() -> list[int]:
    """The rule numbers of docs/design.md's "Safety rules" section, in order."""
    text = DESIGN.read_text(encoding="utf-8")
    start = text.index("## 4. Safety rules")
    end = text.index("\n## ", start + 1)
    return [int(n) for n in RULE_HEADING.findall(text[start:end])]


def project_files(under: pathlib.Path = ROOT) -> Iterator[pathlib.Path]:
    """The repository's own text files (no caches, no environment, no symlinks)."""
    for directory, dirs, files in os.walk(under):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIPPED_DIRS
            and not d.endswith(".egg-info")
            and not os.path.islink(os.path.join(directory, d))
        )
        for name in sorted(files):
            path = pathlib.Path(directory, name)
            if path.suffix in TEXT_SUFFIXES and not path.is_symlink():
                yield path


def read(path: pathlib.Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("docs/design.md rule 7", {7}, id="the canonical form"),
        pytest.param("# --- Rule 3: fail closed", {3}, id="a section comment"),
        pytest.param("(rules 4, 15)", {4, 15}, id="a list"),
        pytest.param("rules 12 and 13", {12, 13}, id="a pair"),
        pytest.param("rules 10\u201317 are", set(range(10, 18)), id="a range with an en dash"),
        pytest.param("rules 1-3", {1, 2, 3}, id="a range with a hyphen"),
        pytest.param("the rules of engagement", set(), id="no number, no citation"),
    ],
)
def test_citations_are_recognised_in_every_form(text: str, expected: set[int]) -> None:
    assert cited_rules(text) == expected


def test_the_safety_rules_are_numbered_from_one_without_a_gap() -> None:
    rules = defined_rules()
    assert rules, "docs/design.md defines no safety rules"
    assert rules == list(range(1, len(rules) + 1))


def test_no_file_cites_another_design_document() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in project_files()
        if path != THIS and (OTHER_DESIGN.search(read(path)) or OUTSIDE_PATH in read(path))
    ]
    assert offenders == [], "cite docs/design.md instead"


def test_every_cited_rule_is_defined_in_the_design() -> None:
    defined = set(defined_rules())
    undefined = {
        str(path.relative_to(ROOT)): sorted(cited_rules(read(path)) - defined)
        for path in project_files()
    }
    assert {path: rules for path, rules in undefined.items() if rules} == {}


def test_every_rule_is_cited_by_a_test() -> None:
    cited: set[int] = set()
    for path in project_files(ROOT / "tests"):
        if path != THIS and path.suffix == ".py":
            cited |= cited_rules(read(path))
    assert sorted(set(defined_rules()) - cited) == []
