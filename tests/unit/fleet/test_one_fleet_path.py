"""One fleet path (docs/design.md §9), held so that it cannot drift back into two: a scan and
the hosts' reports end in the same records, one merge holds the only split-brain rule, and one
renderer prints both. The behaviour (the reports' migration excuse holds for a scan) is tested
in tests/unit/fleet/test_fleet_split_brain.py and tests/libvirt/test_fleet_test_driver.py."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[3] / "nova_orphans"
#: The testing tools build worlds and check them; the rule is the product's.
TOOLS = ("fakes", "sim")


def product_modules() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(PACKAGE)): ast.parse(path.read_text())
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] not in TOOLS
    }


def names_used(tree: ast.Module) -> set[str]:
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    return used | {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}


def annotated_with(tree: ast.Module, type_name: str) -> list[str]:
    """The functions of ``tree`` with a parameter annotated ``type_name``."""
    return [
        f.name
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef)
        and any(type_name in ast.unparse(a.annotation) for a in f.args.args if a.annotation)
    ]


def test_only_the_merge_and_its_records_know_which_states_run():
    """The split-brain rule rests on which copies run: nothing else may count them."""
    using = {m for m, tree in product_modules().items() if "RUNNING_STATES" in names_used(tree)}
    assert using == {"fleet/records.py"}


def test_only_the_merge_builds_a_cross_host_finding():
    building = {
        m
        for m, tree in product_modules().items()
        if any(
            isinstance(n, ast.Call) and ast.unparse(n.func).endswith("CrossHost")
            for n in ast.walk(tree)
        )
    }
    assert building == {"fleet/merge.py"}


def test_no_module_but_the_merge_makes_a_split_brain_finding_per_host():
    """A per-host ``Finding`` of kind split-brain was the scan's own rule; the kind now lives
    only in the merge's cross-host list (and its counts)."""
    making = {
        m
        for m, tree in product_modules().items()
        if any(
            isinstance(n, ast.Call)
            and ast.unparse(n.func).endswith("Finding")
            and "SPLIT_BRAIN" in ast.unparse(n)
            for n in ast.walk(tree)
        )
    }
    assert making == set()


def test_one_renderer_renders_the_fleet_and_both_audits_end_in_it():
    renderers = {
        m: fs
        for m, tree in product_modules().items()
        if (fs := annotated_with(tree, "MergedFleet"))
    }
    rendering = {m for m, fs in renderers.items() if {"render_json", "render_table"} & set(fs)}
    assert rendering == {"render/fleet.py"}
    modules = product_modules()
    assert "merge" in names_used(modules["fleet/audit.py"])  # the scan goes through the merge
    assert "merge_reports" in names_used(modules["cli/fleet.py"])
    assert "fleet_audit" in names_used(modules["cli/fleet.py"])
    cli_renders = {n for n in names_used(modules["cli/fleet.py"]) if n.startswith("render_")}
    assert cli_renders <= {"render_json", "render_table"}
    assert not (PACKAGE / "render" / "fleet_reports.py").exists()
    assert not (PACKAGE / "fleet" / "split_brain.py").exists()
