"""deploy/grafana/achilles.json: valid JSON, every panel queries series that achilles/metrics.py exposes."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from achilles import metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "achilles.json"
# what Prometheus appends to a family's name in the exposition
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def exposed_families() -> set[str]:
    events = {
        family.name
        for value in vars(metrics).values()
        if isinstance(value, MetricWrapperBase)
        for family in value.describe()
    }
    states = set(re.findall(r'GaugeMetricFamily\(\s*"([a-z_]+)"', inspect.getsource(metrics.StateCollector)))
    return events | states


def family_of(series: str) -> str:
    for suffix in SUFFIXES:
        if series.endswith(suffix):
            return series.removesuffix(suffix)
    return series


def test_every_panel_queries_series_that_exist():
    dashboard = json.loads(DASHBOARD.read_text())
    families = exposed_families()
    assert {"achilles_http_requests", "achilles_agent_runs", "achilles_celery_queue_depth"} <= families
    queried = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(re.findall(r"\bachilles_[a-z_]+", target["expr"]))
            assert names, (panel["title"], target["expr"])
            unknown = {name for name in names if family_of(name) not in families}
            assert not unknown, f"panel «{panel['title']}» queries {unknown}, not in achilles/metrics.py"
            queried |= {family_of(name) for name in names}
    # and every series of achilles/metrics.py has a panel
    assert queried == families, families - queried


def test_a_histogram_is_read_through_its_buckets_and_a_counter_through_its_total():
    dashboard = json.loads(DASHBOARD.read_text())
    histograms = {f.name for v in vars(metrics).values() if isinstance(v, metrics.Histogram) for f in v.describe()}
    counters = {f.name for v in vars(metrics).values() if isinstance(v, metrics.Counter) for f in v.describe()}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name in re.findall(r"\bachilles_[a-z_]+", target["expr"]):
                if family_of(name) in histograms:
                    assert name.endswith("_bucket") and "histogram_quantile" in target["expr"], target["expr"]
                if family_of(name) in counters:
                    assert name.endswith("_total") and "rate(" in target["expr"], target["expr"]
