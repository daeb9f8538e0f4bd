"""The operator assets, generated: the Prometheus rules (`sidewatch rules`), the same rules as a
prometheus-operator PrometheusRule, and the Grafana dashboard (`sidewatch dashboard`).

Both start from package data (`templates/rules.yml`, `templates/dashboard.json`, so an installed
wheel has them) whose queries name no job: every vector selector of a `sidewatch_*` series or
of `up` gets the operator's selector (default `job="sidewatch"`) here. The rules' links are
`@url@` in the template: the `--external-url` given, or nothing (paths). `rules/`, `dashboards/`
and `deploy/kubernetes/base/prometheusrule.yaml` are this output with the defaults, and a test keeps
them so.
"""

from __future__ import annotations

import json
import re
import shlex
from importlib.resources import files
from typing import Any
from urllib.parse import urlsplit

DEFAULT_SELECTOR = 'job="sidewatch"'
# One label matcher of a selector: name, operator, a double-quoted value (escapes allowed).
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\\n]|\\.)*)"\s*')
# A vector selector of a series sidewatch exports, or of `up`: its name and its {matchers}.
# Not a recorded series (`sidewatch:...`), a function call, or a word inside another name.
_VECTOR = re.compile(r'(?<![\w:"$])(sidewatch_\w+|up)(?![\w:(])(\{([^{}]*)\})?')
_TOKEN = re.compile(r"@(url|selector|command)@")
# Grafana variables the dashboard's queries filter by; cluster and namespace match a target
# without those labels too when left at All (`.*` matches the empty value).
_SCOPE = ("job", "cluster", "namespace")


class AssetError(ValueError):
    """A selector or URL the assets cannot be generated with (a usage error)."""


def parse_selector(text: str) -> str:
    """`text` (`job="agents"`, `job="a", namespace=~"ops|prod"`, with or without braces) as
    the matchers every generated query adds, normalised to `name op "value"` joined by ", ".
    Raises AssetError for anything else: the result goes inside PromQL braces and into
    Prometheus's annotation templates, so it must be matchers and nothing more."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    matchers, pos = [], 0
    while True:
        m = _MATCHER.match(body, pos)
        if m is None:
            raise AssetError(
                f'selector {text!r}: expected label matchers such as job="sidewatch" or '
                f'job="agents", namespace=~"ops|prod"'
            )
        matchers.append(f'{m[1]}{m[2]}"{m[3]}"')
        pos = m.end()
        if pos == len(body):
            break
        if body[pos] != ",":
            raise AssetError(f"selector {text!r}: matchers are separated by commas")
        pos += 1
    joined = ", ".join(matchers)
    if "{{" in joined or "}}" in joined:
        raise AssetError(f"selector {text!r}: '{{{{' or '}}}}' would be read as a template")
    return joined


def check_url(url: str) -> str:
    """An absolute http(s) URL without a trailing slash. Raises AssetError otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise AssetError(
            f"external URL {url!r}: an absolute http(s) URL, e.g. https://sidewatch.example"
        )
    if parts.query or parts.fragment or re.search(r"[\s'\"{}<>\\@]", url):
        raise AssetError(f"external URL {url!r}: no query, fragment, quotes, braces or spaces")
    return url.rstrip("/")


def select(expr: str, matchers: str) -> str:
    """`expr` with `matchers` added to each vector selector of a sidewatch series or `up`."""

    def add(m: re.Match[str]) -> str:
        inner = (m[3] or "").strip()
        return f"{m[1]}{{{matchers}{', ' + inner if inner else ''}}}"

    return _VECTOR.sub(add, expr)


def _template(name: str) -> str:
    return files("sidewatch.exporters").joinpath("templates", name).read_text(encoding="utf-8")


def _command(name: str, selector: str, url: str, *extra: str) -> str:
    args = ["sidewatch", name]
    if selector != DEFAULT_SELECTOR:
        args += ["--selector", selector]
    if url:
        args += ["--external-url", url]
    return shlex.join([*args, *extra])


def rules(selector: str = DEFAULT_SELECTOR, external_url: str | None = None) -> str:
    """The Prometheus rule file: every expression read through `selector`, each alert's
    `runbook_url` and `dashboard_url` under `external_url` (paths without it)."""
    matchers = parse_selector(selector)
    url = check_url(external_url) if external_url else ""
    return _render(_template("rules.yml"), matchers, url, _command("rules", matchers, url))


def _render(text: str, matchers: str, url: str, command: str) -> str:
    values = {"url": url, "selector": matchers, "command": command}
    out = []
    in_expr = False  # inside a block scalar `expr: >` (its lines are more indented)
    expr_indent = 0
    for raw in text.splitlines(keepends=True):
        stripped = raw.lstrip()
        indent = len(raw) - len(stripped)
        if in_expr and stripped.strip() and indent <= expr_indent:
            in_expr = False
        line = raw
        if stripped.startswith("expr:"):
            value = stripped[len("expr:") :].strip()
            in_expr, expr_indent = value in (">", ">-", "|", "|-"), indent
            line = " " * indent + "expr: " + select(value, matchers) + "\n"
        elif in_expr:
            line = select(raw, matchers)
        out.append(_TOKEN.sub(lambda m: values[m[1]], line))
    return "".join(out)


def prometheus_rule(selector: str = DEFAULT_SELECTOR, external_url: str | None = None) -> str:
    """The same rules as a prometheus-operator PrometheusRule (`kind: PrometheusRule`, the
    groups under `spec`), for a cluster whose Prometheus is run by the operator."""
    matchers = parse_selector(selector)
    url = check_url(external_url) if external_url else ""
    command = _command("rules", matchers, url, "--format", "prometheusrule")
    text = _render(_template("rules.yml"), matchers, url, command)
    comments, groups = text.split("\ngroups:\n", 1)
    indented = "".join(f"  {x}" if x.strip() else x for x in groups.splitlines(keepends=True))
    return (
        f"{comments}\n"
        "apiVersion: monitoring.coreos.com/v1\n"
        "kind: PrometheusRule\n"
        "metadata:\n"
        "  name: sidewatch\n"
        "  labels:\n"
        "    app.kubernetes.io/name: sidewatch\n"
        "spec:\n"
        "  groups:\n"
        f"{indented}"
    )


def _variable(name: str, label: str, query: str, description: str, all_value: str | None) -> Any:
    var: dict[str, Any] = {
        "current": {},
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "definition": query,
        "description": description,
        "hide": 0,
        "includeAll": True,
        "label": label,
        "multi": False,
        "name": name,
        "options": [],
        "query": query,
        "refresh": 2,
        "regex": "",
        "skipUrlSync": False,
        "sort": 1,
        "type": "query",
    }
    if all_value is not None:
        var["allValue"] = all_value
    return var


def _queries(node: Any, matchers: str) -> Any:
    """`node` with every query string (expr, query, definition) read through `matchers`."""
    if isinstance(node, dict):
        return {
            k: select(v, matchers)
            if k in ("expr", "query", "definition") and isinstance(v, str)
            else _queries(v, matchers)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_queries(v, matchers) for v in node]
    return node


def dashboard(selector: str = DEFAULT_SELECTOR) -> str:
    """The Grafana dashboard (JSON): variables for the data source, then the job, cluster and
    namespace of the targets matching `selector` (the last two All, which also matches targets
    without those labels), and every panel filtered by them."""
    matchers = parse_selector(selector)
    board = json.loads(_template("dashboard.json"))
    scope = ", ".join(f'{v}=~"${v}"' for v in _SCOPE)
    board["panels"] = _queries(board["panels"], scope)
    listed = board["templating"]["list"]
    up = [f"up{{{matchers}}}"]
    up.append(f'up{{{matchers}, job=~"$job"}}')
    up.append(f'up{{{matchers}, job=~"$job", cluster=~"$cluster"}}')
    scoped = [
        _variable(
            "job",
            "Job",
            f"label_values({up[0]}, job)",
            f"The scrape jobs of the targets matching {matchers}.",
            None,
        ),
        _variable(
            "cluster",
            "Cluster",
            f"label_values({up[1]}, cluster)",
            "Optional: the targets' cluster label, if they carry one.",
            ".*",
        ),
        _variable(
            "namespace",
            "Namespace",
            f"label_values({up[2]}, namespace)",
            "Optional: the targets' namespace label, if they carry one.",
            ".*",
        ),
    ]
    rest = [v if v["type"] != "query" else _queries(v, scope) for v in listed[1:]]
    board["templating"]["list"] = [listed[0], *scoped, *rest]
    board["description"] = (
        f"{board['description']} Written by `{_command('dashboard', matchers, '')}`."
    )
    return json.dumps(board, indent=2, ensure_ascii=False) + "\n"
