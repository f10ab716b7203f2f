"""Scrape a live ``/metrics`` and read samples back with prometheus_client's own parsers.

The OpenMetrics parser reads what a Prometheus server asking for OpenMetrics gets; the classic
parser reads the text format otherwise. Samples are keyed by name and label set.
"""

from __future__ import annotations

import httpx
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, accept: str | None = OPENMETRICS) -> Samples:
    """Every sample of ``url``'s ``/metrics`` (``url`` is the control API's base URL)."""
    headers = {"Accept": accept} if accept else {}
    r = httpx.get(url + "/metrics", headers=headers, timeout=30)
    assert r.status_code == 200
    text = r.text
    families = (
        parse_openmetrics(text)
        if r.headers["Content-Type"].startswith("application/openmetrics-text")
        else parse_text(text)
    )
    return {(s.name, frozenset(s.labels.items())): float(s.value) for f in families for s in f.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample ``name`` with exactly ``labels``, or None.

    A per-swarm sample carries its Swarm's ``namespace`` label; asked by ``swarm`` without one, the
    one sample of that swarm in any namespace is meant (two are an error: name the namespace).
    """
    exact = samples.get((name, frozenset(labels.items())))
    if exact is not None or "swarm" not in labels or "namespace" in labels:
        return exact
    found = [
        v
        for (n, got), v in samples.items()
        if n == name and "namespace" in dict(got) and {k: x for k, x in got if k != "namespace"} == labels
    ]
    assert len(found) <= 1, f"{name}{labels}: several namespaces hold this swarm; name the namespace"
    return found[0] if found else None
