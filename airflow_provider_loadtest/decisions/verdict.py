"""Moved to ``decisions.gate.verdict`` and ``decisions.gate.rows`` (the gate is a package of its own):
this old path stays importable with every name it had (the rows' and the verdict's)."""

from airflow_provider_loadtest.decisions.gate.rows import *  # noqa: F403 - the old path's names
from airflow_provider_loadtest.decisions.gate.rows import Unreadable, change_pct, format_number  # noqa: F401
from airflow_provider_loadtest.decisions.gate.verdict import Verdict  # noqa: F401
