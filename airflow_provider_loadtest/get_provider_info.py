"""Provider metadata for Airflow's providers manager.

Plain data, no imports of the package's modules: Airflow reads it in every process (scheduler, API
server, workers) to list the provider and draw the connection form without importing the hook.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_loadtest import __version__

_INTEGRATION = "Load Testing Service"


def get_provider_info() -> dict[str, Any]:
    """Return the provider description that ``airflow providers list`` and the connection UI use."""
    return {
        "package-name": "airflow-provider-loadtest",
        "name": "Load Testing Service",
        "description": "Start, watch and gate load tests of a cloud load-testing service "
        "(OctoPerf-compatible REST API) from Airflow DAGs.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://api.octoperf.com/swagger-ui/index.html",
                "tags": ["service"],
            }
        ],
        "hooks": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": ["airflow_provider_loadtest.hooks.loadtest"],
            }
        ],
        "operators": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_provider_loadtest.operators.run_scenario",
                    "airflow_provider_loadtest.operators.report",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_provider_loadtest.sensors.template",
                    "airflow_provider_loadtest.sensors.run",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "airflow_provider_loadtest.triggers.run",
                    "airflow_provider_loadtest.triggers.template",
                    "airflow_provider_loadtest.triggers.report",
                ],
            }
        ],
        "plugins": [
            {"name": "loadtest", "plugin-class": "airflow_provider_loadtest.plugins.LoadTestViewPlugin"}
        ],
        "extra-links": ["airflow_provider_loadtest.links.report.LoadTestReportLink"],
        "connection-types": [
            {
                "connection-type": "loadtest",
                "hook-class-name": "airflow_provider_loadtest.hooks.loadtest.LoadTestHook",
                "hook-name": "Load Testing Service",
                "conn-fields": {
                    "ui_url": {
                        "label": "Web UI base URL",
                        "schema": {"type": ["string", "null"]},
                        "description": "Where report links point. Default: the API base URL + /ui.",
                    },
                    "connect_timeout": {
                        "label": "Connect timeout (s)",
                        "schema": {"type": ["number", "null"], "default": 10},
                        "description": "Seconds to wait for the service to accept a connection.",
                    },
                    "read_timeout": {
                        "label": "Read timeout (s)",
                        "schema": {"type": ["number", "null"], "default": 60},
                        "description": "Seconds to wait for an answer once a request is sent.",
                    },
                    "verify_ssl": {
                        "label": "Verify TLS certificates",
                        "schema": {"type": ["boolean", "null"], "default": True},
                        "description": "Check the service's certificate (turn off only for a test server).",
                    },
                    "ca_bundle": {
                        "label": "CA bundle path",
                        "schema": {"type": ["string", "null"]},
                        "description": "Optional: absolute path of a PEM file of CAs to trust instead of the "
                        "system's (an on-premise service with a private CA).",
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port", "login", "extra"],
                    "relabeling": {"host": "API base URL", "password": "API key"},
                    "placeholders": {
                        "host": "https://api.octoperf.com (leave empty for the SaaS)",
                        "password": "API key from your profile in the web UI",
                    },
                },
            }
        ],
    }
