"""A trial's metric series from its log's text (`metric_reports.series`): both report forms, which
wins, steps, times, and lines that are not reports."""

import json

import pytest

from server_ext.jobs.kube.metric_reports import series

pytestmark = pytest.mark.unit

T1, T2, T3 = "2026-01-01T00:00:01.123456789Z", "2026-01-01T01:00:02+01:00", "2026-01-01T00:00:03Z"


def hypertune(value, step, ts) -> str:
    """A line as cloudml-hypertune writes it (and the trial program echoes it)."""
    return json.dumps({"accuracy": str(value), "global_step": str(step), "timestamp": ts, "trial": "0"},
                      sort_keys=True)


def points(text: str, tag: str = "accuracy") -> list[tuple]:
    return [(p["trainingStep"], p["objectiveValue"], p.get("time")) for p in series(text, tag)]


@pytest.mark.parametrize("log, expected", [
    # Katib's StdOut form; a step key on the same line is the trainingStep, else the ordinal
    (f"{T1} epoch=1 accuracy=0.5 loss=0.5\n{T3} epoch=2 accuracy=.75e0",
     [("1", 0.5, "2026-01-01T00:00:01.123456Z"), ("2", 0.75, "2026-01-01T00:00:03Z")]),
    (f"{T1} accuracy=0.5\n{T2} accuracy = 0.6 accuracy=0.7",
     [("1", 0.5, "2026-01-01T00:00:01.123456Z"), ("2", 0.6, "2026-01-01T00:00:02Z"),
      ("3", 0.7, "2026-01-01T00:00:02Z")]),
    # not the tag: other names, other words, no number
    (f"{T1} val_accuracy=0.9 accuracy=high\n{T3} accuracy: 0.5", []),
    # without log timestamps the line is read whole and has no time
    ("step=7 accuracy=0.25", [("7", 0.25, None)]),
    # a hypertune line: its global_step and timestamp win over the log's
    (f"{T1} {hypertune(0.5, 10, 1767225600.5)}", [("10", 0.5, "2026-01-01T00:00:00.500000Z")]),
    # a JSON line without step or timestamp: the ordinal and the log's time
    (f'{T3} {{"accuracy": 0.4}}\n{T3} {{"accuracy": 0.4}}',
     [("1", 0.4, "2026-01-01T00:00:03Z"), ("2", 0.4, "2026-01-01T00:00:03Z")]),
    # JSON that is not a report of the tag, or not a number, or not JSON: skipped (or read as StdOut)
    (f'{T1} {{"loss": "0.1"}}\n{T1} {{"accuracy": "n/a", "timestamp": 5}}\n{T1} {{accuracy=0.3',
     [("1", 0.3, "2026-01-01T00:00:01.123456Z")]),
    # hypertune's global_step "0" on every report (the trainer gave no step): the ordinals
    (f"{T1} {hypertune(0.5, 0, 1767225600)}\n{T3} {hypertune(0.6, 0, 1767225601)}",
     [("1", 0.5, "2026-01-01T00:00:00Z"), ("2", 0.6, "2026-01-01T00:00:01Z")]),
    # …but a first report at step 0 followed by real steps keeps them
    (f"{T1} {hypertune(0.5, 0, 1767225600)}\n{T3} {hypertune(0.6, 5, 1767225601)}",
     [("0", 0.5, "2026-01-01T00:00:00Z"), ("5", 0.6, "2026-01-01T00:00:01Z")]),
    # a timestamp out of range: the log's time
    (f'{T3} {{"accuracy": "1", "timestamp": 1e300}}', [("1", 1.0, "2026-01-01T00:00:03Z")]),
])
def test_series(log, expected):
    assert points(log) == expected


def test_json_reports_win_over_printed_ones_and_an_echoed_line_counts_once():
    """A trainer that prints its metric and reports it through hypertune: the log has both forms
    (and the same hypertune line printed by the trainer and echoed by the trial program)."""
    first, second = hypertune(0.5, 1, 1767225601.0), hypertune(0.6, 2, 1767225602.0)
    log = "\n".join([f"{T1} accuracy=0.5 step=1", f"{T1} {first}", f"{T1} {first}",
                     f"{T3} accuracy=0.6 step=2", f"{T3} {second}"])
    assert points(log) == [("1", 0.5, "2026-01-01T00:00:01Z"), ("2", 0.6, "2026-01-01T00:00:02Z")]


def test_another_tags_json_does_not_hide_printed_reports():
    log = f"{T1} {json.dumps({'loss': '0.5', 'timestamp': 1.0})}\n{T3} accuracy=0.9"
    assert points(log) == [("1", 0.9, "2026-01-01T00:00:03Z")]
