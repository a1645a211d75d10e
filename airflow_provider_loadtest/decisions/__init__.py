"""Decisions without I/O, shared by the worker (sync hook) and the triggerer (async client).

What a run's states and alarms mean (``runs``), watching a run (``watch``), choosing a report template
(``templates``) and the PDF print task (``report_pdf``). Nothing here sends a request or touches a
file: each module yields or returns what to do, and ``hooks/`` moves the bytes.
"""
