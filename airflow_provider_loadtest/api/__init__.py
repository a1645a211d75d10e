"""The service's HTTP API described as data, with no I/O.

The sync hook (worker) and the async client (triggerer) both execute these descriptions, so the
knowledge of paths, parameters, retry safety and answer decoding lives here once.
"""
