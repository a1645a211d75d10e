"""The "Load tests" view: a tab on every DAG and task page of Airflow's UI with the history of each gated
task as charts, served by this plugin from Airflow's API server.

Airflow imports this module in every process that loads plugins (the API server, but also workers,
which load plugins for macros and listeners), so it holds only the plugin's description: the FastAPI
app and everything it needs (templates, database queries, charts) are built the first time the API
server asks for ``fastapi_apps``, never on a worker or at DAG-parse time.

External views (tabs with a ``destination``) exist since Airflow 3.1.0, the floor this provider
declares; on an older Airflow the plugin describes nothing and is absent from the UI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import airflow
from airflow.plugins_manager import AirflowPlugin

#: Where the view's FastAPI app is mounted in the API server.
URL_PREFIX = "/loadtest"
#: The tabs' routes in the UI (``/dags/<dag id>/plugin/load-tests``); each must be unique in Airflow.
DAG_ROUTE = "load-tests"
TASK_ROUTE = "load-tests-task"
#: The overview's route in the UI's navigation (``/plugin/load-tests-overview``).
OVERVIEW_ROUTE = "load-tests-overview"


def _has_external_views() -> bool:
    major, minor = (int(part) for part in airflow.__version__.split(".")[:2])
    return (major, minor) >= (3, 1)


def base_path() -> str:
    """The path Airflow is served under (``[api] base_url``'s path, "" at the root): the UI puts an
    external view's ``href`` into an iframe as it is, so it must carry that prefix."""
    from urllib.parse import urlparse

    from airflow.configuration import conf

    return urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")


class _BuiltOnce:
    """A plugin attribute computed on first read, then kept (per process). Airflow reads plugin
    attributes on an instance (entry points) or on the class itself (provider info), so this works on
    both, unlike ``functools.cached_property``."""

    def __init__(self, build: Callable[[], list[dict[str, Any]]]) -> None:
        self.build = build
        self.value: list[dict[str, Any]] | None = None

    def __get__(self, instance: object, owner: type | None = None) -> list[dict[str, Any]]:
        if self.value is None:
            self.value = self.build() if _has_external_views() else []
        return self.value


def _fastapi_apps() -> list[dict[str, Any]]:
    from airflow_provider_loadtest.plugins.app import create_app

    return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Load tests"}]


def _external_views() -> list[dict[str, Any]]:
    root = base_path() + URL_PREFIX
    common = {
        "name": "Load tests",
        "icon": f"{root}/static/icon.svg",
        "icon_dark_mode": f"{root}/static/icon-dark.svg",
    }
    return [
        {**common, "href": f"{root}/dags/{{DAG_ID}}", "destination": "dag", "url_route": DAG_ROUTE},
        {
            **common,
            "href": f"{root}/dags/{{DAG_ID}}/tasks/{{TASK_ID}}",
            "destination": "task",
            "url_route": TASK_ROUTE,
        },
        # Every gate at a glance: a page of its own in the UI's navigation (a button of its own, or
        # under "Plugins" beside other plugins' pages).
        {**common, "href": f"{root}/", "destination": "nav", "url_route": OVERVIEW_ROUTE},
    ]


class LoadTestViewPlugin(AirflowPlugin):
    """The view's plugin: the FastAPI app under ``/loadtest``, two tabs (DAG and task pages) and the
    overview in Airflow's navigation."""

    name = "loadtest"
    fastapi_apps = _BuiltOnce(_fastapi_apps)
    external_views = _BuiltOnce(_external_views)


def __getattr__(name: str) -> object:
    """``ENTRY_POINT_PLUGIN``: what the ``airflow.plugins`` entry point loads.

    Airflow reads that entry point on every setting, and provider info's ``plugins`` (also naming
    ``LoadTestViewPlugin``) only with ``[core] lazy_discover_providers`` off; loaded both ways, Airflow
    3.3 would list the second as an import error ("already registered"). So the entry point yields the
    plugin when provider info will not, and None (which Airflow skips silently) when it will.
    """
    if name != "ENTRY_POINT_PLUGIN":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from airflow import settings

    return None if not getattr(settings, "LAZY_LOAD_PROVIDERS", True) else LoadTestViewPlugin
