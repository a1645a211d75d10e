"""A run's samples, sans I/O: the JMeter results (JTL) files read in one streaming pass.

``jtl`` parses the files' bytes (gzip or not, every load generator merged) into per-label running
``figures`` (the metrics a gate checks) and, in the same pass, the ``failures`` of failed samples (the
most frequent messages and response codes, masked and bounded: why a gate failed). ``jmeter_log``
picks the ERROR lines of a run's ``jmeter.log`` (why a run ended in ERROR or ABORTED).

The older paths ``decisions.jtl`` and ``decisions.jtl_figures`` re-export these modules' names.
Nothing here imports anything outside the standard library and this package.
"""
