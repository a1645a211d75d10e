"""Moved to ``decisions.gate.transactions`` (the gate is a package of its own): this old path stays importable
and is the same module object, so ``import``, ``from ... import`` and attribute patches all reach it."""

import sys

from airflow_provider_loadtest.decisions.gate import transactions as _moved
from airflow_provider_loadtest.decisions.gate.transactions import *  # noqa: F403 - the old path's names

sys.modules[__name__] = _moved
