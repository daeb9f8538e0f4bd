"""`sidewatch rules` and `sidewatch dashboard`: the operator assets, printed from the installed
package (sidewatch.exporters.mixin), so a wheel gives what a checkout's `rules/` and
`dashboards/` hold, for any scrape job."""

from __future__ import annotations

import click

from sidewatch.exporters.mixin import DEFAULT_SELECTOR, AssetError, check_url, parse_selector


def _selector(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    try:
        return parse_selector(value)
    except AssetError as e:
        raise click.BadParameter(str(e)) from e


def _url(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    try:
        return check_url(value) if value else None
    except AssetError as e:
        raise click.BadParameter(str(e)) from e


_SELECTOR_HELP = (
    "The label matchers of sidewatch's scrape targets, added to every query, "
    'e.g. \'job="agents", namespace="ops"\'.'
)


@click.command(name="rules")
@click.option(
    "--selector", default=DEFAULT_SELECTOR, show_default=True, callback=_selector,
    metavar="SEL", help=_SELECTOR_HELP,
)  # fmt: skip
@click.option(
    "--external-url",
    callback=_url,
    metavar="URL",
    help="Where people reach sidewatch (server.externalUrl): every alert's runbook_url and "
    "dashboard_url become absolute under it (paths without it).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["rules", "prometheusrule"]),
    default="rules",
    show_default=True,
    help="A Prometheus rule file, or a prometheus-operator PrometheusRule of the same rules.",
)
def rules_cmd(selector: str, external_url: str | None, fmt: str) -> None:
    """Print the Prometheus alerting and recording rules for sidewatch.

    \b
    sidewatch rules --external-url https://sidewatch.example > sidewatch.rules.yml
    promtool check rules sidewatch.rules.yml
    """
    from sidewatch.exporters.mixin import prometheus_rule, rules

    make = prometheus_rule if fmt == "prometheusrule" else rules
    click.echo(make(selector, external_url), nl=False)


@click.command(name="dashboard")
@click.option(
    "--selector", default=DEFAULT_SELECTOR, show_default=True, callback=_selector,
    metavar="SEL", help=_SELECTOR_HELP,
)  # fmt: skip
def dashboard_cmd(selector: str) -> None:
    """Print the Grafana dashboard (JSON, provisionable from a file) for sidewatch.

    \b
    sidewatch dashboard > /var/lib/grafana/dashboards/sidewatch/sidewatch-overview.json
    """
    from sidewatch.exporters.mixin import dashboard

    click.echo(dashboard(selector), nl=False)
