"""`projects.jobs.list` semantics: filters as gcloud writes them, pages by token."""

import pytest

from hub_ext.core.errors import UserInputError
from server_ext.jobs.listing import compile_filter, page

pytestmark = pytest.mark.unit


def job(job_id, state="RUNNING", created="2026-01-01T00:00:00Z", **labels):
    return {"jobId": job_id, "state": state, "createTime": created, "labels": labels,
            "trainingInput": {"scaleTier": "BASIC"}}


JOBS = [job("census_1", "FAILED", "2026-01-01T00:00:01Z", team="vision"),
        job("census_2", "RUNNING", "2026-01-02T00:00:00Z", team="nlp"),
        job("rnn_a", "FAILED", "2026-01-03T00:00:00Z"),
        job("rnn_b", "SUCCEEDED", "2026-01-04T00:00:00Z", team="vision", stage="prod")]


@pytest.mark.parametrize("text, ids", [
    ("", ["census_1", "census_2", "rnn_a", "rnn_b"]),
    ("state=RUNNING", ["census_2"]),
    ("state=running", ["census_2"]),  # enum values compare case-insensitively
    ("state:FAILED", ["census_1", "rnn_a"]),
    ("jobId:census*", ["census_1", "census_2"]),
    ("jobId:rnn* AND state:FAILED", ["rnn_a"]),
    ("jobId:rnn* state:FAILED", ["rnn_a"]),  # juxtaposition is AND
    ("labels.team=vision", ["census_1", "rnn_b"]),
    ("labels.team = vision", ["census_1", "rnn_b"]),
    ("labels:stage", ["rnn_b"]),
    ("labels.team!=vision", ["census_2", "rnn_a"]),  # a missing label is "not equal"
    ("NOT state=FAILED", ["census_2", "rnn_b"]),
    ("-state=FAILED", ["census_2", "rnn_b"]),
    ("state=RUNNING OR labels.team=vision AND state=SUCCEEDED", ["census_2", "rnn_b"]),
    ("(state=RUNNING OR state=SUCCEEDED) AND labels.team=vision", ["rnn_b"]),
    ('labels.team="vision"', ["census_1", "rnn_b"]),
    ("createTime>2026-01-02", ["census_2", "rnn_a", "rnn_b"]),
    ("createTime<=2026-01-02T00:00:00Z", ["census_1", "census_2"]),
    ("trainingInput.scaleTier=basic", ["census_1", "census_2", "rnn_a", "rnn_b"]),
])
def test_filters(text, ids):
    keep = compile_filter(text)
    assert [j["jobId"] for j in JOBS if keep(j)] == ids


@pytest.mark.parametrize("text, message", [
    ("state=", "ends too early"),
    ("state RUNNING", "expected an operator"),
    ("(state=RUNNING", "not closed"),
    ("state=RUNNING)", "unexpected ')'"),
    ("=RUNNING", "expected a field name"),
    ('state="RUNNING', "cannot read"),
])
def test_bad_filters_name_the_parameter(text, message):
    with pytest.raises(UserInputError) as e:
        compile_filter(text)
    assert e.value.field == "filter" and message in e.value.message


def test_pages_are_newest_first_and_tokens_survive_new_jobs():
    first = page(JOBS, 3)
    assert [j["jobId"] for j in first["jobs"]] == ["rnn_b", "rnn_a", "census_2"]
    jobs = JOBS + [job("newer", created="2026-02-01T00:00:00Z")]  # created between the two calls
    second = page(jobs, 3, first["nextPageToken"])
    assert [j["jobId"] for j in second["jobs"]] == ["census_1"] and "nextPageToken" not in second
    assert page(JOBS, 2, filter="state:FAILED") == {"jobs": [JOBS[2], JOBS[0]]}
    assert len(page([job(f"j{i}") for i in range(30)])["jobs"]) == 20  # the API's default page size


@pytest.mark.parametrize("size, token, field", [
    (101, None, "pageSize"), (-1, None, "pageSize"), ("ten", None, "pageSize"),
    (10, "not-a-token", "pageToken"), (10, "W10", "pageToken"),
])
def test_bad_paging(size, token, field):
    with pytest.raises(UserInputError) as e:
        page(JOBS, size, token)
    assert e.value.field == field


@pytest.mark.parametrize("text, message", [
    ("(" * 2000 + "a=b" + ")" * 2000, "longer than 2000"),  # each of these was a RecursionError
    ("NOT " * 3000 + "a=b", "longer than 2000"),
    ("-" * 3000 + "a=b", "longer than 2000"),
    ("(" * 33 + "state=RUNNING" + ")" * 33, "more than 32 deep"),
    ("NOT " * 33 + "state=RUNNING", "more than 32 deep"),
    ("-" * 33 + "state=RUNNING", "more than 32 deep"),
    ("NOT (" * 17 + "state=RUNNING" + ")" * 17, "more than 32 deep"),
])
def test_filters_too_long_or_too_deep_are_refused(text, message):
    with pytest.raises(UserInputError) as e:
        compile_filter(text)
    assert e.value.field == "filter" and message in e.value.message


def test_filters_at_the_bounds():
    assert [j["jobId"] for j in JOBS if compile_filter("(" * 32 + "state=RUNNING" + ")" * 32)(j)] == ["census_2"]
    assert [j["jobId"] for j in JOBS if compile_filter("NOT " * 32 + "state=RUNNING")(j)] == ["census_2"]
    long_flat = " OR ".join(["state=RUNNING"] * 117)  # 1,989 characters
    assert [j["jobId"] for j in JOBS if compile_filter(long_flat)(j)] == ["census_2"]


def _b64(raw: bytes) -> str:
    import base64
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize("size, token, field", [
    ("\u0661\u0662", None, "pageSize"), ("1_0", None, "pageSize"), (" 5", None, "pageSize"), ("+5", None, "pageSize"),
    ("9" * 5000, None, "pageSize"),  # int() refuses more than 4,300 digits
    (True, None, "pageSize"), (2.0, None, "pageSize"),
    (10, _b64(b"[" * 5000 + b"]" * 5000), "pageToken"),  # was a RecursionError
    (10, _b64(b'["2026-01-01T00:00:00Z", "' + b"a" * 2000 + b'"]'), "pageToken"),
    (10, _b64(b"\xff\xfe"), "pageToken"), (10, "%%%", "pageToken"),
])
def test_paging_is_read_strictly(size, token, field):
    with pytest.raises(UserInputError) as e:
        page(JOBS, size, token)
    assert e.value.field == field


@pytest.mark.parametrize("size, n", [("0", 4), (0, 4), ("2", 2), (2, 2), ("100", 4), ("007", 4)])
def test_page_sizes_in_ascii_digits(size, n):
    assert len(page(JOBS, size)["jobs"]) == n
