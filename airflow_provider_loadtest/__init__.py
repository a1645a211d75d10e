"""Apache Airflow provider for a cloud load-testing service.

This module is imported whenever Airflow discovers providers or a DAG imports an operator, so it holds
the version and nothing else: anything heavier belongs in the module that needs it.
"""

__version__ = "0.1.0"
