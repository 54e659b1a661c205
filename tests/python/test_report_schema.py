"""docs/report.schema.json against what the CLI writes.

Every corpus trace, under both models, is reported as JSON plain, with
`--at peak`, and priced by the CUDA caching allocator on a device too small
for it (so the out-of-memory object is filled); each must be valid under the
schema. The schema must also reject what is not a report (it is strict:
no unknown fields, every required field there).
"""

from __future__ import annotations

import json

import pytest

from conftest import REPORT_SCHEMA, checked_json
from test_snapshot_writer import TRACES, run

SETTINGS = {
    "plain": [],
    "at-peak": ["--at", "peak"],
    "at-first": ["--at", "0"],
    "cuda-oom": ["--allocator", "cuda-caching", "--device-memory", "1MiB"],
}


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("model", ["runtime", "thunder"])
def test_every_corpus_report_is_valid(model, setting):
    for trace in TRACES:
        done = run("analyze", str(trace), "--format", "json", "--model", model, *SETTINGS[setting])
        assert done.returncode == 0, done.stderr.decode()
        report = checked_json(done.stdout)
        if setting == "cuda-oom":
            assert report["allocator"]["fits"] is False and report["allocator"]["out_of_memory"]
        if setting.startswith("at-"):
            assert report["attribution"]["live_bytes"] == (
                report["peak_bytes"] if setting == "at-peak" else report["steps"][0]["live_bytes"]
            )


def test_the_schema_rejects_what_is_not_a_report():
    done = run("analyze", str(TRACES[0]), "--format", "json")
    good = json.loads(done.stdout)
    for broken in (
        {k: v for k, v in good.items() if k != "peak_bytes"},
        {**good, "peak_bytes": "12"},
        {**good, "surprise": 1},
        {**good, "schema_version": 2},
        {**good, "steps": [{**good["steps"][0], "line": -3}]},
    ):
        with pytest.raises(AssertionError, match=REPORT_SCHEMA.name):
            checked_json(json.dumps(broken))
