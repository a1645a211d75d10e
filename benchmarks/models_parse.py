"""Models at the cost of JSON: decoding answers beside ``json.loads``, dumping beside ``json.dumps``.

Each answer is decoded the way the client decodes it (``api.endpoints.decode_answer`` with the call's
own parse), from bytes, and timed against plain ``json.loads`` of the same bytes, interleaved; dumping a
template for writing back (``to_api`` then ``json.dumps``) is timed against ``json.dumps`` of the parsed
JSON. The documents: 1,000 full report templates (every report item and config variant of the test
fixture), and the answers the watch loop reads while a run goes.

The garbage collector is on for every baseline. ``decode_answer`` pauses it while it reads an answer of
``COLLECTOR_PAUSE_MIN_BYTES`` or more; the collection that follows (of every object the reading made)
is inside the timed call. The line "collector left on" reads the same answer without the pause.

    .venv/bin/python benchmarks/models_parse.py [--rounds 9] [--templates 1000]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_provider_loadtest.api import endpoints
from benchmarks.common import spread, table

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "unit" / "fixtures" / "report_template_full.json"


def _templates(count: int) -> bytes:
    one = json.loads(FIXTURE.read_text())
    many = []
    for i in range(count):
        doc = copy.deepcopy(one)
        doc["id"], doc["name"] = f"tpl-{i}", f"Template {i}"
        many.append(doc)
    return json.dumps(many).encode()


WATCH_ANSWERS: dict[str, tuple[Callable[[], Any], bytes]] = {
    "get_bench_result": (
        lambda: endpoints.get_bench_result("br-1"),
        json.dumps(
            {
                "id": "br-1",
                "batchId": "b-1",
                "scenarioId": "scn-1",
                "designProjectId": "p-1",
                "resultProjectId": "p-2",
                "state": "RUNNING",
            }
        ).encode(),
    ),
    "get_progress": (lambda: endpoints.get_progress("br-1"), b'{"value": 42.5}'),
    "get_global_metrics": (
        lambda: endpoints.get_global_metrics("br-1"),
        json.dumps(
            {
                "metrics": [
                    {"name": "Hits", "value": 12345, "unit": ""},
                    {"name": "Errors", "value": 3, "unit": ""},
                    {"name": "Average elapsed", "value": 123.4, "unit": "ms"},
                    {"name": "Throughput", "value": 5.6, "unit": "MB/s"},
                ]
            }
        ).encode(),
    ),
    "get_threshold_alarms": (
        lambda: endpoints.get_threshold_alarms("br-1"),
        json.dumps(
            [{"id": f"al-{i}", "severity": "PASSED", "name": f"alarm {i}"} for i in range(5)]
        ).encode(),
    ),
    "summary_metric_values": (
        lambda: endpoints.summary_metric_values(
            "br-1", [{"id": "RESPONSE_TIME_PERCENTILE_95", "type": "WEB", "benchResultId": "br-1"}]
        ),
        b"[812.5, 3, null]",
    ),
    "print-task poll": (
        lambda: endpoints.get_print_task_result("task-1"),
        b'{"status": "PENDING", "taskId": "task-1"}',
    ),
}


def _collector_left_on(decode: Callable[[], Any]) -> Callable[[], Any]:
    """``decode`` with ``decode_answer``'s collector pause turned off (for the line that shows its worth)."""

    def run() -> Any:
        saved = endpoints.COLLECTOR_PAUSE_MIN_BYTES
        endpoints.COLLECTOR_PAUSE_MIN_BYTES = sys.maxsize
        try:
            return decode()
        finally:
            endpoints.COLLECTOR_PAUSE_MIN_BYTES = saved

    return run


def _timed(fn: Callable[[], Any], repeat: int) -> float:
    gc.collect()
    begin = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - begin) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--templates", type=int, default=1000)
    args = parser.parse_args()
    from airflow_provider_loadtest.api.endpoints import decode_answer

    body = _templates(args.templates)
    listing = endpoints.list_templates("ws-1")
    refs = endpoints.list_template_refs("ws-1")
    cases: dict[str, tuple[Callable[[], Any], Callable[[], Any], int]] = {
        f"list_templates: {args.templates} full templates ({len(body) / 1e6:.1f} MB)": (
            lambda: decode_answer(listing, 200, "application/json", body, None),
            lambda: json.loads(body),
            1,
        ),
        f"list_template_refs: id and name of {args.templates} templates (choosing one)": (
            lambda: decode_answer(refs, 200, "application/json", body, None),
            lambda: json.loads(body),
            1,
        ),
        f"list_templates, collector left on ({len(body) / 1e6:.1f} MB)": (
            _collector_left_on(lambda: decode_answer(listing, 200, "application/json", body, None)),
            lambda: json.loads(body),
            1,
        ),
    }
    for name, (factory, answer) in WATCH_ANSWERS.items():
        request = factory()
        cases[f"{name} (watch loop)"] = (
            lambda r=request, a=answer: decode_answer(r, 200, "application/json", a, None),
            lambda a=answer: json.loads(a),
            2000,
        )
    parsed = decode_answer(listing, 200, "application/json", body, None)
    plain = json.loads(body)
    cases[f"dump {args.templates} templates for writing back"] = (
        lambda: json.dumps([t.to_api() for t in parsed]),
        lambda: json.dumps(plain),
        1,
    )
    cases[f"dump {args.templates} templates, one at a time"] = (
        lambda: [json.dumps(t.to_api()) for t in parsed],
        lambda: [json.dumps(doc) for doc in plain],
        1,
    )
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in cases}
    for _ in range(args.rounds):
        for name, (ours, baseline, repeat) in cases.items():
            samples[name][0].append(_timed(ours, repeat) * 1e6)
            samples[name][1].append(_timed(baseline, repeat) * 1e6)
    rows = []
    for name, (ours_us, base_us) in samples.items():
        ratio = statistics.median(o / b for o, b in zip(ours_us, base_us, strict=True))
        rows.append([name, spread(ours_us), spread(base_us), f"{ratio:.2f}x"])
    print(
        f"Wall time per decode, microseconds, median [min-max] of {args.rounds} interleaved rounds "
        "(collector on for json.loads/json.dumps; see the module docstring):"
    )
    print(table(rows, ["answer", "ours us", "json us", "ours / json"]))


if __name__ == "__main__":
    main()
