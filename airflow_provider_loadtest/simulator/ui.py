"""A small web page at the web UI's report path, so a "Load test report" link opens something real offline.

``GET /ui/workspace/{workspaceId}/project/{projectId}/analysis/report/{reportId}`` (the link the real
service's web UI serves) shows the run's state, its headline metrics, its threshold alarms and links to
its files. A link whose workspace or project does not match the report answers 404, so a wrongly built
link fails here first. Like a browser session on the real UI, the page needs no API key; its file links
(``.../files/{name}``) are the simulator's own, served without a key on loopback only.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from fastapi import FastAPI, Response
from fastapi.responses import HTMLResponse

from airflow_provider_loadtest.simulator.state import Report, SimulatorError, SimulatorState
from airflow_provider_loadtest.simulator.strict import OCTET_STREAM

UI_PREFIX = "/ui/"
REPORT_PATH = "/ui/workspace/{workspace_id}/project/{project_id}/analysis/report/{report_id}"


def file_response(content: bytes, filename: str) -> Response:
    """A file download as Spring serves one: octet-stream, named in ``Content-Disposition``."""
    return Response(
        content,
        media_type=OCTET_STREAM,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


def add_ui_routes(app: FastAPI, state: SimulatorState) -> None:
    def report_at(workspace_id: str, project_id: str, report_id: str) -> Report:
        report = state.report(report_id)
        project = state.project(report.project_id)
        if (project.workspace_id, project.id) != (workspace_id, project_id):
            raise SimulatorError(
                404, f"No report {report_id} in workspace {workspace_id}, project {project_id}"
            )
        return report

    @app.get(REPORT_PATH, name="ui_report", tags=["web UI"], response_class=HTMLResponse)
    async def ui_report(workspace_id: str, project_id: str, report_id: str) -> Response:
        return HTMLResponse(render_report_page(state, report_at(workspace_id, project_id, report_id)))

    @app.get(REPORT_PATH + "/files/{filename}", name="ui_report_file", tags=["web UI"])
    async def ui_report_file(workspace_id: str, project_id: str, report_id: str, filename: str) -> Response:
        report = report_at(workspace_id, project_id, report_id)
        return file_response(state.log_file(report.run_id, filename), filename)


def render_report_page(state: SimulatorState, report: Report) -> str:
    """The report page: title, run state and progress, headline metrics, alarms, files."""
    run = state.run(report.run_id)
    now = state.now()
    metrics = "".join(
        f"<tr><th>{escape(m.name)}</th><td>{m.value:g}</td><td>{escape(m.unit)}</td></tr>"
        for m in state.metrics(run.id)
    )
    alarms = (
        "".join(
            f'<tr class="{escape(a.severity.lower())}"><td>{escape(a.severity)}</td><td>{escape(a.name)}</td>'
            f"<td>{escape(a.message)}</td></tr>"
            for a in state.alarms(run.id)
        )
        or '<tr><td colspan="3">No alarm raised (yet)</td></tr>'
    )
    files = "".join(
        f'<li><a href="{escape(report.id)}/files/{escape(quote(name))}">{escape(name)}</a></li>'
        for name in state.log_files(run.id)
    )
    title = escape(report.name)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:.2em .8em;text-align:left}}
.critical{{color:#b00}}.warning{{color:#a60}}.passed{{color:#070}}</style></head>
<body>
<h1>{title}</h1>
<p>Scenario <b>{escape(run.scenario.name)}</b> ({escape(run.scenario.id)}), bench result
<code>{escape(run.id)}</code>, report <code>{escape(report.id)}</code> (simulator).</p>
<p>State: <b id="state">{escape(run.state(now))}</b>, progress {run.progress(now):.1f} %</p>
<h2>Headline metrics</h2>
<table id="metrics">{metrics}</table>
<h2>Threshold alarms</h2>
<table id="alarms">{alarms}</table>
<h2>Files</h2>
<ul id="files">{files}</ul>
</body></html>
"""
