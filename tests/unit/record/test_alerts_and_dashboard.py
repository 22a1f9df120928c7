"""The alert rules pass their promtool unit tests, and every rule and dashboard query names
only metrics, labels and label values that nova-orphans exports."""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest
import yaml

from nova_orphans.record.metrics import FleetMetrics, Metrics
from tests import tools

ROOT = pathlib.Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "nova-orphans.rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "nova-orphans.rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "nova-orphans.json"

#: PromQL functions, aggregations and keywords, and Grafana's label_values().
_WORDS = """
sum min max avg count stddev stdvar topk bottomk quantile count_values group by without
on ignoring group_left group_right bool and or unless offset rate irate increase delta
idelta deriv changes resets time vector scalar absent absent_over_time
histogram_quantile label_replace label_join clamp_min clamp_max avg_over_time
max_over_time min_over_time sum_over_time count_over_time last_over_time timestamp abs
ceil floor round sort sort_desc label_values
"""
PROMQL_WORDS = frozenset(_WORDS.split())
#: Labels Prometheus adds to every scraped series.
TARGET_LABELS = frozenset({"instance", "job"})
SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^}]*)\}")
MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)[^,()]*,\s*(\w+)\s*\)")
WORD = re.compile(r"(?<![\w$.])[A-Za-z_:][A-Za-z0-9_:]*")


def exported() -> dict[str, list[dict[str, str]]]:
    """Every sample name the agent and the fleet audit export, with the label sets of each."""
    samples: dict[str, list[dict[str, str]]] = {}
    for registry in (Metrics().registry, FleetMetrics().registry):
        for family in registry.collect():
            for sample in family.samples:
                samples.setdefault(sample.name, []).append(dict(sample.labels))
    return samples


def rule_exprs() -> Iterator[tuple[str, str]]:
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            yield f"rule {rule.get('alert') or rule.get('record')}", rule["expr"]


def dashboard_exprs() -> Iterator[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            yield (
                f"variable {variable['name']}",
                query["query"] if isinstance(query, dict) else query,
            )


def problems(expr: str, samples: dict[str, list[dict[str, str]]]) -> list[str]:
    """What in ``expr`` names a metric, label or label value nova-orphans does not export."""
    found = []
    for name, label in LABEL_VALUES.findall(expr):
        if label not in TARGET_LABELS and not any(label in x for x in samples.get(name, [])):
            found.append(f"{name} has no label {label}")
    expr = LABEL_VALUES.sub(lambda m: m.group(0).rsplit(",", 1)[0] + ")", expr)
    for name, matchers in SELECTOR.findall(expr):
        label_sets = samples.get(name, [])
        for label, op, value in MATCHER.findall(matchers):
            known = {v for labels in label_sets for k, v in labels.items() if k == label}
            if label in TARGET_LABELS or "$" in value:
                continue
            if not known:
                found.append(f"{name} has no label {label}")
            elif op in ("=", "=~"):
                wanted = value.split("|") if op == "=~" else [value]
                found += [f"{name}{{{label}}} is never {v!r}" for v in wanted if v not in known]
    bare = re.sub(r'"[^"]*"', " ", expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", bare)
    bare = GROUPING.sub(r" \1 ", bare)
    bare = re.sub(r"\b\d+(\.\d+)?(e\d+)?\b", " ", bare)
    for word in WORD.findall(bare):
        if word not in PROMQL_WORDS and word not in samples:
            found.append(f"{word} is not a metric nova-orphans exports")
    return found


def every_expr() -> list[tuple[str, str]]:
    return [*rule_exprs(), *dashboard_exprs()]


@pytest.mark.parametrize(("where", "expr"), every_expr(), ids=[w for w, _ in every_expr()])
def test_every_query_names_only_what_nova_orphans_exports(where, expr):
    assert problems(expr, exported()) == [], f"{where}: {expr}"


def test_the_check_catches_names_labels_and_values_that_do_not_exist():
    samples = exported()
    assert problems('sum by (kind) (nova_orphans_findings{kind="deleted"})', samples) == []
    assert problems("nova_orphans_finding", samples) == [
        "nova_orphans_finding is not a metric nova-orphans exports"
    ]
    # A counter is exported as _total, a histogram as _bucket/_sum/_count, never bare.
    assert problems("rate(nova_orphans_actions[5m])", samples)
    assert problems("nova_orphans_cycle_duration_seconds", samples)
    assert not problems("rate(nova_orphans_cycle_duration_seconds_bucket[5m])", samples)
    assert problems('nova_orphans_findings{kinds="deleted"}', samples) == [
        "nova_orphans_findings has no label kinds"
    ]
    assert problems("label_values(nova_orphans_findings, kinds)", samples) == [
        "nova_orphans_findings has no label kinds"
    ]
    assert problems('nova_orphans_findings{kind=~"deleted|orphaned"}', samples) == [
        "nova_orphans_findings{kind} is never 'orphaned'"
    ]


def test_rules_and_dashboard_cover_the_states_an_operator_must_see():
    rules = " ".join(expr for _, expr in rule_exprs())
    for metric in (
        "nova_orphans_findings",
        "nova_orphans_fleet_findings",
        "nova_orphans_brake_engaged",
        "nova_orphans_identity_verified",
        "nova_orphans_last_success_timestamp_seconds",
        "nova_orphans_last_cycle_success",
        "nova_orphans_cycles_aborted_total",
        "nova_orphans_guests_on_hold",
        'nova_orphans_dangers{danger="shared-volume"}',
        'nova_orphans_dangers{danger="unknown"}',
        "nova_orphans_untracked_memory_bytes",
        'nova_orphans_nova_requests_total{status=~"5xx|error"}',
    ):
        assert metric in rules, metric
    dashboard = " ".join(expr for _, expr in dashboard_exprs())
    agent_metrics = {n for n in exported() if not n.endswith("_created")}
    missing = {n for n in agent_metrics if n not in dashboard}
    assert missing == set(), f"metrics no dashboard panel shows: {sorted(missing)}"


def test_the_alert_rules_pass_their_promtool_unit_tests():
    promtool = tools.tool("promtool", "prometheus")
    done = subprocess.run(
        [promtool, "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


#: Rules broken on purpose (alert, the text replaced, its replacement): the tests catch each.
BROKEN_RULES = {
    "orphans alert without the grace": ("NovaOrphansPresent", "    for: 1h\n", "    for: 1m\n"),
    "a 404 counts as a Nova error": ("NovaOrphansNovaErrors", '"5xx|error"', '"4xx|5xx|error"'),
    "Nova errors alert at once": ("NovaOrphansNovaErrors", "    for: 30m\n", "    for: 1m\n"),
    "a short Nova outage alerts": ("NovaOrphansNovaErrors", "[1h])) > 0.1", "[1h])) > 0.05"),
}  # fmt: skip


@pytest.mark.parametrize("alert, old, new", BROKEN_RULES.values(), ids=list(BROKEN_RULES))
def test_the_promtool_tests_fail_on_a_broken_rule(tmp_path, alert, old, new):
    promtool = tools.tool("promtool", "prometheus")
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    rules = RULES.read_text()
    broken = rules.replace(old, new, 1)
    assert broken != rules
    (tmp_path / RULES.name).write_text(broken)
    done = subprocess.run(
        [promtool, "test", "rules", str(tmp_path / RULE_TESTS.name)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert alert in done.stdout + done.stderr
