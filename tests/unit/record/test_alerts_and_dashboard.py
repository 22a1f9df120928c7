"""The alert rules pass their promtool unit tests, and every rule and dashboard query names
only metrics, labels and label values that nova-orphans exports; every alert links its
runbook; every dashboard panel filters by job and host and has one unit."""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest
import yaml

from nova_orphans.model import Kind
from nova_orphans.record.metrics import FleetMetrics, Metrics
from tests import tools

ROOT = pathlib.Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "nova-orphans.rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "nova-orphans.rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "nova-orphans.json"
METRICS_PAGE = ROOT / "docs" / "admin" / "metrics.md"

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


#: Series Prometheus itself and node_exporter's textfile collector give (not ours to export).
ELSEWHERE = {"up": [{}], "node_textfile_scrape_error": [{}]}


def exported() -> dict[str, list[dict[str, str]]]:
    """Every sample name the agent and the fleet audit export, with the label sets of each,
    and the series the rules record."""
    samples: dict[str, list[dict[str, str]]] = dict(ELSEWHERE)
    for registry in (Metrics().served, FleetMetrics().registry):
        for family in registry.collect():
            for sample in family.samples:
                samples.setdefault(sample.name, []).append(dict(sample.labels))
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            if "record" in rule:
                samples[rule["record"]] = [{"kind": k.value} for k in Kind]
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
    agent_metrics = {n for n in exported() if n not in ELSEWHERE and ":" not in n}
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
    "orphans alert without the grace": (
        "NovaOrphansPresent", "group_left nova_orphans_config_grace_period_seconds",
        "group_left 0 * nova_orphans_config_grace_period_seconds",
    ),
    "the grace is always an hour": (
        "NovaOrphansPresent", "group_left nova_orphans_config_grace_period_seconds",
        "group_left 3600 + 0 * nova_orphans_config_grace_period_seconds",
    ),
    "the grace never starts afresh": (
        "NovaOrphansPresent", '|lost"} > 0\n', '|lost"} >= 0\n',
    ),
    "a failing agent is judged on the default interval": (
        "NovaOrphansAgentFailing", "3 * nova_orphans_config_interval_seconds",
        "1800 + 0 * nova_orphans_config_interval_seconds",
    ),
    "a dead endpoint never alerts": ("NovaOrphansAgentDown", "expr: up == 0", "expr: up == 2"),
    "a gone agent alerts for an hour only": ("NovaOrphansAgentGone", "[1d]))", "[1h]))"),
    "absent() of a job name that is not the agents'": (
        "NovaOrphansAgentAbsent", "absent(nova_orphans_build_info)",
        'absent(nova_orphans_build_info{job="nova_orphans"})',
    ),
    "a 404 counts as a Nova error": ("NovaOrphansNovaErrors", '"5xx|error"', '"4xx|5xx|error"'),
    "Nova errors alert at once": ("NovaOrphansNovaErrors", "    for: 30m\n", "    for: 1m\n"),
    "a short Nova outage alerts": ("NovaOrphansNovaErrors", "[1h])) > 0.1", "[1h])) > 0.05"),
}  # fmt: skip


@pytest.mark.parametrize("alert, old, new", BROKEN_RULES.values(), ids=list(BROKEN_RULES))
def test_the_promtool_tests_fail_on_a_broken_rule(tmp_path, alert, old, new):
    promtool = tools.tool("promtool", "prometheus")
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    rules = RULES.read_text()
    # NOTE: within the alert's own rule (or the recording rules, which come first).
    start = rules.index(f"- alert: {alert}\n")
    start = start if old in rules[start:] else 0
    broken = rules[:start] + rules[start:].replace(old, new, 1)
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


def alerts() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def page_anchors(text: str) -> set[str]:
    """The anchors myst-parser gives the headings of a page (myst_heading_anchors, GitHub's
    slugs: lower case, punctuation dropped, blanks as dashes)."""
    headings = re.findall(r"^#{1,3} (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_alert_links_a_runbook_section_of_the_metrics_page():
    anchors = page_anchors(METRICS_PAGE.read_text())
    names = [rule["alert"] for rule in alerts()]
    assert len(names) >= 18
    for rule in alerts():
        url = rule["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert page == "admin/metrics.html", url  # docs/admin/metrics.md, built
        assert anchor == rule["alert"].lower() and anchor in anchors, (rule["alert"], url)


def test_the_anchor_check_sees_a_missing_section():
    assert "novaorphanspresent" in page_anchors("# Metrics\n### NovaOrphansPresent\n")
    assert "novaorphanspresent" not in page_anchors("# Metrics\nNovaOrphansPresent\n")


#: The template variables each panel's selectors filter by: the fleet audit's series come from
#: the central host that runs it, not from the agents.
AGENT_FILTER = ('job=~"$job"', 'instance=~"$instance"')
FLEET_FILTER = ('job=~"$fleet_job"', 'instance=~"$fleet_instance"')
#: A process_* series counts only from the agent's own endpoint, never from a node_exporter.
AGENT_ONLY = re.compile(
    r"and on \(job, instance\) nova_orphans_build_info\{[^}]*\} "
    r"unless on \(job, instance\) node_textfile_scrape_error\{[^}]*\}"
)


def panels() -> list[dict]:
    return json.loads(DASHBOARD.read_text())["panels"]


def selector_problems(expr: str) -> list[str]:
    """Selectors of ``expr`` that do not filter by the dashboard's job and host variables."""
    found = []
    for name, matchers in re.findall(r"\b([a-z_:]+)\{([^}]*)\}", expr) + [
        (name, "") for name in re.findall(r"\b((?:nova_orphans|process|node)_\w+)\b(?![{\w])", expr)
    ]:
        wanted = FLEET_FILTER if name.startswith("nova_orphans_fleet_") else AGENT_FILTER
        found += [f"{name} without {m}" for m in wanted if m not in matchers]
    if "process_" in expr and not AGENT_ONLY.search(expr):
        found.append("process_* not scoped to the agent's own endpoint")
    return found


def implied_unit(expr: str) -> str:
    """The Grafana unit an expression's values have."""
    if "process_cpu_seconds_total" in expr:
        return "none"  # CPU cores
    if " / " in expr:
        return "percentunit" if "_count" not in expr else "s"
    if "_bytes" in expr:
        return "bytes"
    if "_seconds" in expr:
        return "s"
    if "rate(" in expr and "increase(" not in expr:
        return "reqps"
    return "none"


@pytest.mark.parametrize("panel", panels(), ids=[p["title"] for p in panels()])
def test_every_panel_filters_by_job_and_host_and_has_one_unit(panel):
    exprs = [target["expr"] for target in panel["targets"]]
    assert exprs
    for expr in exprs:
        assert selector_problems(expr) == [], expr
    unit = panel["fieldConfig"]["defaults"]["unit"]
    overridden = [p for o in panel["fieldConfig"]["overrides"] for p in o["properties"]]
    assert [p for p in overridden if p["id"] == "unit"] == []
    assert {implied_unit(e) for e in exprs} == {unit}, exprs


def test_the_panel_checks_see_a_missing_filter_a_process_panel_and_mixed_units():
    assert selector_problems('sum(nova_orphans_findings{instance=~"$instance"})') == [
        'nova_orphans_findings without job=~"$job"'
    ]
    assert selector_problems("topk(10, nova_orphans_untracked_vcpus)") == [
        'nova_orphans_untracked_vcpus without job=~"$job"',
        'nova_orphans_untracked_vcpus without instance=~"$instance"',
    ]
    assert selector_problems('process_open_fds{job=~"$job", instance=~"$instance"}') == [
        "process_* not scoped to the agent's own endpoint"
    ]
    assert selector_problems('max(nova_orphans_fleet_hosts{job=~"$job", instance=~"$instance"})')
    assert {implied_unit("nova_orphans_untracked_vcpus"),
            implied_unit("nova_orphans_untracked_disk_bytes")} == {"none", "bytes"}  # fmt: skip


def test_the_dashboard_variables_chain_job_then_host():
    variables = {v["name"]: v for v in json.loads(DASHBOARD.read_text())["templating"]["list"]}
    assert variables["instance"]["query"]["query"] == (
        'label_values(nova_orphans_build_info{job=~"$job"}, instance)'
    )
    assert variables["job"]["query"]["query"] == "label_values(nova_orphans_build_info, job)"
    assert "$fleet_job" in variables["fleet_instance"]["query"]["query"]


def test_every_dashboard_query_is_valid_promql(tmp_path):
    promtool = tools.tool("promtool", "prometheus")
    rules = []
    for i, (_, expr) in enumerate(dashboard_exprs()):
        if expr.startswith("label_values("):
            continue
        for variable, value in (("$__rate_interval", "5m"), ("$fleet_job", "node"),
                                ("$fleet_instance", ".*"), ("$job", "nova-orphans"),
                                ("$instance", ".*")):  # fmt: skip
            expr = expr.replace(variable, value)
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
