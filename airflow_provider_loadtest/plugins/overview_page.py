"""The overview's answer (``GET /loadtest/``): who may read what, the query, the model, the page.

Kept apart from ``app`` (the routes) and ``overview`` (plain data and queries): this is the one place
that asks the configured auth manager, so a test can hand it another one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fastapi.responses import StreamingResponse

from airflow_provider_loadtest import __version__
from airflow_provider_loadtest.plugins import URL_PREFIX
from airflow_provider_loadtest.plugins.bounds import PageBudget
from airflow_provider_loadtest.plugins.overview import (
    PAGE_LINES,
    Overview,
    build,
    dag_facts,
    gated_nights,
    may_read_load_tests,
    readable,
    results,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def auth_manager() -> Any:
    """The API server's auth manager (the one its own endpoints ask)."""
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager()


def overview(
    session: Session, user: Any, base: str, *, tag: str | None, owner: str | None, page: int
) -> Overview:
    """The overview ``user`` may see: the DAGs the auth manager lets them read (Airflow's own list),
    then, of those with gated tasks, the ones whose task instances and XCom they may read (the tab's
    checks); nothing of any other DAG reaches the model."""
    manager = auth_manager()
    found = gated_nights(session, readable(manager, user, session))
    allowed = may_read_load_tests(manager, user, {f.dag_id for f in found}, session)
    found = [f for f in found if f.dag_id in allowed]
    return build(
        found,
        dag_facts(session, allowed),
        lambda keys: results(session, keys),
        base=base,
        root=f"{base}{URL_PREFIX}/",
        tag=tag,
        owner=owner,
        page=page,
    )


def render_parts(static: str, model: Overview, budget: PageBudget) -> Iterator[str]:
    """The page in the pieces the template yields, counted against ``budget`` (lines stop once full)."""
    from airflow_provider_loadtest.plugins.app import _page

    template = _page().environment.get_template("overview.html.j2")
    for part in template.generate(
        static=static, version=__version__, overview=model, budget=budget, per_page=PAGE_LINES
    ):
        budget.add(part)
        yield part


def respond(model: Overview, static: str) -> StreamingResponse:
    """The page of ``model``, streamed as it is rendered (``app._chunks``), private as every answer with
    data. The model was read before (its session is closed): rendering holds no database connection."""
    from airflow_provider_loadtest.plugins.app import PRIVATE, _chunks

    parts = render_parts(static, model, PageBudget())
    return StreamingResponse(_chunks(parts), media_type="text/html; charset=utf-8", headers=PRIVATE)
