"""docs/design.md's module map (§2) names every module of the package, and only those."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nova_orphans"
DESIGN = ROOT / "docs" / "design.md"
#: A module named in a cell of the map: ``observe/nova.py``, or ``nova.py`` after it.
MODULE = re.compile(r"`([\w/]+\.py)`")


def section_2(text: str) -> str:
    """The text of "## 2." up to the next section."""
    start = text.index("\n## 2. ")
    return text[start : text.index("\n## 3. ", start)]


def mapped_modules(section: str) -> list[str]:
    """The modules of the map's second column, each with its folder.

    In a cell, a module without a folder is in the folder of the module before it.
    """
    table = [line for line in section.splitlines() if line.startswith("| ")]
    header, *rows = table
    assert header.split("|")[2].strip() == "modules"
    found = []
    for row in rows:
        folder = ""
        for name in MODULE.findall(row.split("|")[2]):
            if "/" in name:
                folder = name.rsplit("/", 1)[0] + "/"
                found.append(name)
            else:
                found.append(folder + name)
    return found


def package_modules() -> set[str]:
    """Every module of the package but its faces (``__init__``) and entry points (``__main__``)."""
    return {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    }


def test_the_module_map_names_every_module_once_and_no_other() -> None:
    mapped = mapped_modules(section_2(DESIGN.read_text(encoding="utf-8")))
    assert sorted(m for m in set(mapped) if mapped.count(m) > 1) == []
    assert sorted(package_modules() - set(mapped)) == [], "modules the map does not name"
    assert sorted(set(mapped) - package_modules()) == [], "modules the map names that are gone"


def test_a_module_without_a_folder_is_in_the_folder_before_it() -> None:
    row = "| act | `act/actuator.py`, `effects.py`, `audit.py` | ... |"
    assert mapped_modules("| layer | modules | what |\n" + row) == [
        "act/actuator.py",
        "act/effects.py",
        "act/audit.py",
    ]


#: A folder or top-level module named in docs/internals.md's list: ``nova_orphans/x/``.
INTERNALS_ENTRY = re.compile(r"`nova_orphans/([\w]+/|[\w]+\.py)`|`([\w]+\.py)`")


def test_the_internals_page_names_every_folder_and_top_level_module_of_the_package():
    """docs/internals.md's map cannot drift from the package: each folder of it and each
    top-level module is named there, and nothing it names is missing."""
    text = (ROOT / "docs" / "internals.md").read_text()
    body = text[text.index("- `nova_orphans/") :]
    named: set[str] = set()
    for line in body.splitlines():
        if not line.startswith("- `nova_orphans/"):
            continue
        head = line.split(" — ")[0]
        for folder_or_module, module in INTERNALS_ENTRY.findall(head):
            named.add(folder_or_module or module)
    present = {
        p.name + "/" for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    present |= {p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py",)}
    assert sorted(present - named) == [], "name them in docs/internals.md"
    assert sorted(named - present) == [], "docs/internals.md names what is not there"
