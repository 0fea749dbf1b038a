"""The ml.v1 Job model: gcloud config files and REST JSON in, Google's shape out, validated against
GoogleCloudMlV1__Job of Google's own discovery document (../shared/reference, bundled in
server_ext/jobs/data)."""

import json
import re

import jsonschema
import pytest

from hub_ext.core.errors import UserInputError
from server_ext.jobs.model import kubernetes_name, load_config, parse_job
from server_ext.jobs.schema import schemas

pytestmark = pytest.mark.unit


def discovery_to_jsonschema(name: str) -> dict:
    """A JSON Schema for one discovery schema: types, enums, int64 as digit strings, no extra fields."""
    defs = {}

    def conv(s):
        if "$ref" in s:
            ref = s["$ref"]
            if ref not in defs:
                defs[ref] = {}
                defs[ref] = conv(schemas()[ref])
            return {"$ref": f"#/definitions/{ref}"}
        t = s.get("type")
        if t == "object" and "properties" in s:
            return {"type": "object", "additionalProperties": False,
                    "properties": {k: conv(v) for k, v in s["properties"].items()}}
        if t == "object":
            return {"type": "object", "additionalProperties": conv(s.get("additionalProperties") or {})}
        if t == "array":
            return {"type": "array", "items": conv(s.get("items") or {})}
        if t == "string" and s.get("format") == "int64":
            return {"type": "string", "pattern": r"^-?\d+$"}
        if t == "string":
            return {"type": "string", **({"enum": s["enum"]} if "enum" in s else {})}
        if t in ("boolean", "integer", "number"):
            return {"type": t}
        return {}

    root = conv(schemas()[name])
    return {**root, "definitions": defs}


JOB_SCHEMA = jsonschema.Draft7Validator(discovery_to_jsonschema("GoogleCloudMlV1__Job"))


def _platform_job_schema() -> jsonschema.Draft7Validator:
    """Google's Job schema with the platform's two extensions: ``acceleratorConfig.type`` also takes
    the MIG names (``NVIDIA_A100_1G_5GB``), so it is open; ``trainingOutput.progress``."""
    schema = discovery_to_jsonschema("GoogleCloudMlV1__Job")
    schema["definitions"]["GoogleCloudMlV1__AcceleratorConfig"]["properties"]["type"].pop("enum")
    schema["definitions"]["GoogleCloudMlV1__TrainingOutput"]["properties"]["progress"] = PROGRESS_SCHEMA
    return jsonschema.Draft7Validator(schema)


# the platform's second extension: ``trainingOutput.progress`` (docs/jobs.md "Progress")
PROGRESS_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "progressPercentage": {"type": "integer", "minimum": 0, "maximum": 100},
    "estimatedRemainingSeconds": {"type": "integer", "minimum": 0},
    "metrics": {"type": "array", "items": {"type": "object", "additionalProperties": False,
                                           "required": ["name", "value"],
                                           "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
    "updateTime": {"type": "string"}}}


PLATFORM_JOB_SCHEMA = _platform_job_schema()

GCLOUD_CONFIG = """\
# a config.yaml as people pass it to `gcloud ai-platform jobs submit training --config`
jobId: census_v2
labels:
  team: vision
trainingInput:
  scaleTier: custom
  masterType: n1-highmem-8
  masterConfig:
    acceleratorConfig:
      count: 1
      type: nvidia-tesla-v100
  workerType: n1-highmem-8
  workerCount: "2"
  workerConfig:
    acceleratorConfig: {count: 1, type: NVIDIA_A100_1G_5GB}
  parameterServerType: standard
  parameterServerCount: 1
  pythonModule: trainer.task
  packageUris: [gs://bucket/trainer-0.1.tar.gz]
  args: [--epochs=3, --lr, "0.01"]
  region: europe-west4
  runtimeVersion: "2.11"
  pythonVersion: 3.7
  useChiefInTfConfig: yes
"""


def test_a_gcloud_config_file_reads_into_googles_shape():
    job = parse_job(load_config(GCLOUD_CONFIG))
    t = job.training
    assert t["scaleTier"] == "CUSTOM" and t["workerCount"] == "2" and t["parameterServerCount"] == "1"
    assert t["masterConfig"]["acceleratorConfig"] == {"count": "1", "type": "NVIDIA_TESLA_V100"}
    assert t["workerConfig"]["acceleratorConfig"]["type"] == "NVIDIA_A100_1G_5GB"  # the platform's MIG names
    assert t["pythonVersion"] == "3.7" and t["runtimeVersion"] == "2.11" and t["useChiefInTfConfig"] is True
    assert t["args"] == ["--epochs=3", "--lr", "0.01"]
    out = job.to_json()
    assert list(JOB_SCHEMA.iter_errors({**out, "trainingInput": {
        **out["trainingInput"], "workerConfig": {}}})) == []  # MIG names are ours, not in Google's enum
    assert parse_job(out).doc == job.doc  # round trip


def test_output_fields_validate_when_read_back():
    stored = {**parse_job(load_config(GCLOUD_CONFIG)).to_json(), "state": "RUNNING",
              "createTime": "2026-12-02T10:00:00Z", "startTime": "2026-12-02T10:01:00.5Z",
              "trainingOutput": {"completedTrialCount": 3, "consumedMLUnits": 1.5}, "etag": "YWJj"}
    stored["trainingInput"]["workerConfig"] = {}
    job = parse_job(stored, create=False)
    assert job.doc["trainingOutput"] == {"completedTrialCount": "3", "consumedMLUnits": 1.5}
    assert list(JOB_SCHEMA.iter_errors(job.to_json())) == []
    with pytest.raises(UserInputError) as e:
        parse_job(stored)
    assert e.value.field == "state" and "output only" in e.value.message


def job(**training):
    return {"jobId": "j1", "trainingInput": {"pythonModule": "trainer.task", "packageUris": ["gs://b/t.tgz"],
                                             **training}}


@pytest.mark.parametrize("doc, field, message", [
    ({"trainingInput": {}}, "jobId", "is required"),
    ({**job(), "jobId": "1st"}, "jobId", "start with a letter"),
    ({**job(), "jobId": "a-b"}, "jobId", "only letters, digits and '_'"),
    ({**job(), "jobId": "a" * 129}, "jobId", "at most 128"),
    ({"jobId": "j"}, "trainingInput", "is required"),
    (job(scaleTier="CUSTOM"), "trainingInput.masterType", "required with scaleTier CUSTOM"),
    (job(scaleTier="CUSTOM", masterType="n1-standard-4", workerCount=2), "trainingInput.workerType", "required"),
    (job(scaleTier="CUSTOM", masterType="n1-standard-4", workerType="n1-standard-4"), "trainingInput.workerCount",
     "required"),
    (job(scaleTier="CUSTOM", masterType="m", workerType="m", workerCount=-1), "trainingInput.workerCount", "0 or more"),
    (job(scaleTier="BASIC", masterType="n1-standard-4"), "trainingInput.masterType", "needs scaleTier CUSTOM"),
    (job(scaleTier="BASIC_TPU"), "trainingInput.scaleTier", "TPU"),
    (job(scaleTier="HUGE"), "trainingInput.scaleTier", "must be one of"),
    (job(scaleTier="CUSTOM", masterType="m", masterConfig={"acceleratorConfig": {"type": "TPU_V3", "count": 8}}),
     "trainingInput.masterConfig.acceleratorConfig.type", "TPUs are not offered"),
    (job(scaleTier="CUSTOM", masterType="m", masterConfig={"acceleratorConfig": {"type": "nvidia-tesla-t4",
                                                                                 "count": 0}}),
     "trainingInput.masterConfig.acceleratorConfig.count", "1 or more"),
    (job(scaleTier="CUSTOM", masterType="m", masterConfig={"acceleratorConfig": {"cuont": 1}}),
     "trainingInput.masterConfig.acceleratorConfig.cuont", "did you mean 'count'"),
    (job(workerCount="two"), "trainingInput.workerCount", "whole number"),
    (job(workerCount=2.5), "trainingInput.workerCount", "whole number"),
    (job(useChiefInTfConfig="maybe"), "trainingInput.useChiefInTfConfig", "true or false"),
    (job(args="--epochs=3"), "trainingInput.args", "must be a list"),
    ({"jobId": "j", "trainingInput": {"packageUris": ["gs://b/t"]}}, "trainingInput.pythonModule", "is required"),
    ({"jobId": "j", "trainingInput": {"pythonModule": "t.task"}}, "trainingInput.packageUris", "is required"),
    ({**job(), "labels": {"Team": "x"}}, "labels.Team", "lower-case letter"),
    ({**job(), "labels": {"team": "Vision"}}, "labels.team", "values may hold only"),
    ({**job(), "predictionInput": {}}, "predictionInput", "not supported"),
    ({**job(), "createTime": "2026"}, "createTime", "output only"),
    ({**job(), "trainingInputs": {}}, "trainingInputs", "did you mean 'trainingInput'"),
    (job(scaleTier="CUSTOM", masterType="m", workerType="m", workerCount="99999999999999999999999"),
     "trainingInput.workerCount", "from -9223372036854775808 to 9223372036854775807 (int64)"),
    (job(scaleTier="CUSTOM", masterType="m", workerType="m", workerCount=10**400), "trainingInput.workerCount",
     "(int64)"),
    (job(scaleTier="CUSTOM", masterType="m", workerType="m", workerCount="9" * 5000), "trainingInput.workerCount",
     "(int64)"),
    (job(scaleTier="CUSTOM", masterType="m", workerType="m", workerCount=2**31), "trainingInput.workerCount",
     "at most 2147483647"),
    (job(scaleTier="CUSTOM", masterType="m", parameterServerType="m", parameterServerCount=2**31),
     "trainingInput.parameterServerCount", "at most 2147483647"),
    (job(scaleTier="CUSTOM", masterType="m", evaluatorType="m", evaluatorCount=2**31),
     "trainingInput.evaluatorCount", "at most 2147483647"),
    (job(workerCount="\u00b2"), "trainingInput.workerCount", "whole number"),  # a digit to str.isdigit, not to int
    (job(scaleTier="CUSTOM", masterType="m", masterConfig={"acceleratorConfig": {"type": "nvidia-tesla-t4",
                                                                                 "count": 99999999999}}),
     "trainingInput.masterConfig.acceleratorConfig.count", "at most 64 per replica"),
    (job(packageUris=["ftp://b/p.tar.gz"]), "trainingInput.packageUris[0]", "unsupported scheme ftp://"),
    (job(packageUris=["gs://b/p.tgz", "https://h/p.tgz"]), "trainingInput.packageUris[1]", "unsupported scheme"),
    (job(packageUris=["gs://b/p.tgz", "s3://c/p.tgz"]), "trainingInput.packageUris[1]", "same file name"),
    (job(packageUris=["gs://bucket-only"]), "trainingInput.packageUris[0]", "must name one file"),
    (job(hyperparameters={"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "params": [
        {"parameterName": "lr", "type": "DOUBLE", "minValue": float("nan"), "maxValue": 1}]}),
     "trainingInput.hyperparameters.params[0].minValue", "finite"),
    (job(hyperparameters={"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "params": [
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 0, "maxValue": "Infinity"}]}),
     "trainingInput.hyperparameters.params[0].maxValue", "finite"),
    (job(hyperparameters={"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "maxTrials": 2**31, "params": [
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]}),
     "trainingInput.hyperparameters.maxTrials", "(int32)"),
    (job(hyperparameters={"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "params": [
        {"parameterName": "lr", "type": "DOUBLE", "maxValue": 1}]}),
     "trainingInput.hyperparameters.params[0].minValue", "is required"),  # the spec is checked when parsed
])
def test_bad_jobs_name_the_field(doc, field, message):
    with pytest.raises(UserInputError) as e:
        parse_job(doc)
    assert e.value.field == field and message in e.value.message, str(e.value)


def test_a_custom_container_needs_no_python_module():
    j = parse_job({"jobId": "c", "trainingInput": {"scaleTier": "CUSTOM", "masterConfig": {
        "imageUri": "ghcr.io/example/train:1", "containerArgs": ["--epochs", "2"]}}})
    assert j.training["masterConfig"]["imageUri"] == "ghcr.io/example/train:1"
    assert list(JOB_SCHEMA.iter_errors(j.to_json())) == []


@pytest.mark.parametrize("text, message", [
    ("trainingInput: [unclosed", "not valid YAML or JSON at line 1"),
    ("- a\n- b\n", "must be a mapping"),
])
def test_config_files_that_are_not_job_mappings(text, message):
    with pytest.raises(UserInputError) as e:
        load_config(text)
    assert e.value.field == "--config" and message in e.value.message


def test_kubernetes_names_are_dns_labels_and_never_collide():
    ids = ["my_job", "My_Job", "MY_JOB", "my__job", "my_job_", "a" * 128, "a" * 127 + "b", "census_2026_v3", "x"]
    names = [kubernetes_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert all(re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", n) and len(n) <= 63 for n in names), names
    assert kubernetes_name("census_2026_v3") == "census-2026-v3"
    assert kubernetes_name("My_Job") == kubernetes_name("My_Job")


def test_the_bundled_discovery_document_is_googles():
    from server_ext.jobs.schema import DISCOVERY

    doc = json.loads(DISCOVERY.read_text())
    assert doc["name"] == "ml" and doc["version"] == "v1" and doc["revision"] == "20251213"
    methods = doc["resources"]["projects"]["resources"]["jobs"]["methods"]
    assert {"create", "get", "list", "cancel"} <= set(methods)


def test_limits_themselves_and_every_fetchable_package_uri_are_accepted():
    top = parse_job(job(scaleTier="CUSTOM", masterType="m", workerType="m", workerCount=2**31 - 1,
                        masterConfig={"acceleratorConfig": {"type": "nvidia-tesla-t4", "count": 64}},
                        hyperparameters={"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc", "maxTrials": 2**31 - 1,
                                         "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": -8e307,
                                                     "maxValue": 8e307},
                                                    {"parameterName": "n", "type": "INTEGER", "minValue": -2**31 + 1,
                                                     "maxValue": 2**31 - 1}]}))
    assert top.training["workerCount"] == "2147483647"
    assert top.training["masterConfig"]["acceleratorConfig"]["count"] == "64"
    uris = ["gs://b/a.tgz", "s3://b/b.tgz", "configmap://j1-package/c.tar.gz", "file:///w/d.whl", "trainer", "../e"]
    assert parse_job(job(packageUris=uris)).training["packageUris"] == uris


SWEEP = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "auc",
         "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]}


@pytest.mark.parametrize("doc, field, message", [
    # text a process cannot be given: NUL, lone surrogates (JSON can carry them, UTF-8 cannot)
    (job(args=["--a=1", "x\x00y"]), "trainingInput.args[1]", "NUL"),
    (job(args=["\ud800"]), "trainingInput.args[0]", "lone surrogate"),
    (job(pythonModule="trainer\x00.task"), "trainingInput.pythonModule", "NUL"),
    (job(jobDir="gs://b/out\x00"), "trainingInput.jobDir", "NUL"),
    (job(jobDir="gs://b/\udcff"), "trainingInput.jobDir", "lone surrogate"),
    (job(packageUris=["gs://b/t\x00.tgz"]), "trainingInput.packageUris[0]", "NUL"),
    (job(region="us\x00"), "trainingInput.region", "NUL"),
    ({**job(), "labels": {"team": "a\x00"}}, "labels.team", "NUL"),
    ({**job(), "labels": {"te\ud800am": "a"}}, "labels.te\ud800am", "lone surrogate"),
    (job(scaleTier="CUSTOM", masterConfig={"imageUri": "img\x00:1"}), "trainingInput.masterConfig.imageUri", "NUL"),
    (job(scaleTier="CUSTOM", masterConfig={"imageUri": "img:1", "containerArgs": ["\ud800"]}),
     "trainingInput.masterConfig.containerArgs[0]", "lone surrogate"),
    (job(hyperparameters={**SWEEP, "params": [{"parameterName": "opt", "type": "CATEGORICAL",
                                               "categoricalValues": ["adam", "s\x00gd"]}]}),
     "trainingInput.hyperparameters.params[0].categoricalValues[1]", "NUL"),
    # python -m takes a dotted module name
    (job(pythonModule="trainer/task.py"), "trainingInput.pythonModule", "dotted Python module name"),
    (job(pythonModule="trainer..task"), "trainingInput.pythonModule", "dotted Python module name"),
    (job(pythonModule="-c"), "trainingInput.pythonModule", "dotted Python module name"),
    (job(pythonModule="trainer.task "), "trainingInput.pythonModule", "dotted Python module name"),
    # what execve can pass (each string at most 128 KiB; TF_CONFIG carries the whole trainingInput)
    (job(args=["--a=1", "--b=2", "--c=3", "x" * 200_000]), "trainingInput.args[3]", "200000 bytes long"),
    (job(args=["x"] * 100_000), "trainingInput.args", "add up to 200000 bytes"),
    (job(args=["é" * 40_000]), "trainingInput.args[0]", "80000 bytes long"),
    (job(args=["--a"] * 10, jobDir="gs://b/" + "d" * 110_000), "trainingInput", "at most 100 KiB"),
    (job(args=["\x01" * 20_000]), "trainingInput", "at most 100 KiB"),  # 6 bytes each in JSON
    # scheduling.maxRunningTime: Google's duration syntax, positive
    (job(scheduling={"maxRunningTime": "abc"}), "trainingInput.scheduling.maxRunningTime", "such as 7200s"),
    (job(scheduling={"maxRunningTime": "2h"}), "trainingInput.scheduling.maxRunningTime", "such as 7200s"),
    (job(scheduling={"maxRunningTime": "7200"}), "trainingInput.scheduling.maxRunningTime", "such as 7200s"),
    (job(scheduling={"maxRunningTime": "-5s"}), "trainingInput.scheduling.maxRunningTime", "such as 7200s"),
    (job(scheduling={"maxRunningTime": "1.0000000001s"}), "trainingInput.scheduling.maxRunningTime", "9 decimals"),
    (job(scheduling={"maxRunningTime": "9" * 40 + "s"}), "trainingInput.scheduling.maxRunningTime",
     "at most 315576000000s"),
    (job(scheduling={"maxRunningTime": "0s"}), "trainingInput.scheduling.maxRunningTime", "positive"),
    (job(scheduling={"maxRunningTime": "0.000s"}), "trainingInput.scheduling.maxRunningTime", "positive"),
    (job(scheduling={"maxWaitTime": "soon"}), "trainingInput.scheduling.maxWaitTime", "such as 7200s"),
    # an empty sweep spec is not "no sweep"; the metric tag is one line of printable text (spaces are
    # fine, as in AI Platform: tests/unit/test_metric_tags.py)
    (job(hyperparameters={}), "trainingInput.hyperparameters", "is empty"),
    (job(hyperparameters={**SWEEP, "hyperparameterMetricTag": "a\nb"}),
     "trainingInput.hyperparameters.hyperparameterMetricTag", "control, format or line-separator characters"),
    (job(hyperparameters={**SWEEP, "hyperparameterMetricTag": "auc\x7f"}),
     "trainingInput.hyperparameters.hyperparameterMetricTag", "control, format or line-separator characters"),
    (job(hyperparameters={**SWEEP, "hyperparameterMetricTag": "m" * 257}),
     "trainingInput.hyperparameters.hyperparameterMetricTag", "at most 256"),
])
def test_what_a_process_cannot_be_given_is_refused_naming_the_field(doc, field, message):
    with pytest.raises(UserInputError) as e:
        parse_job(doc)
    assert e.value.field == field and message in e.value.message, str(e.value)


def test_what_a_process_can_be_given_is_accepted():
    args = ["--note=naïve ☃ \U0001F600", "--empty=", "--nl=a\nb", "x" * 60_000]
    j = parse_job(job(args=args, pythonModule="trainer.sub_pkg.task2", jobDir="gs://b/out",
                      scheduling={"maxRunningTime": " 3600.5s", "maxWaitTime": "0s"},
                      hyperparameters={**SWEEP, "hyperparameterMetricTag": "training/hptuning/metric"}))
    assert j.training["args"] == args
    assert j.training["scheduling"] == {"maxRunningTime": "3600.5s", "maxWaitTime": "0s"}
    assert parse_job(job(pythonModule="träiner.task")).training["pythonModule"] == "träiner.task"
    assert parse_job(job(scheduling={"maxRunningTime": "315576000000s"}))


def test_every_wrong_type_enum_and_unknown_field_of_a_sweep_spec_is_told_at_once():
    """Issue 39.7: a sweep spec's mistakes were told one at a time (the first wrong type stopped)."""
    from hub_ext.core.errors import UserInputErrors

    doc = {"jobId": "s1", "trainingInput": {"region": "local", "pythonModule": "m", "packageUris": ["gs://b/p.tgz"],
                                            "hyperparameters": {
        "goal": "MAXIMIZ", "maxTrials": "many", "algoritm": "GRID_SEARCH",
        "params": [{"parameterName": "lr", "type": "DOUBL", "minValue": 1, "maxValue": 0.1},
                   {"parameterName": "b", "type": "INTEGER", "minValue": "x", "maxValue": 4}]}}}
    with pytest.raises(UserInputErrors) as e:
        parse_job(doc)
    h = "trainingInput.hyperparameters"
    assert [f for f, _ in e.value.violations] == [
        f"{h}.goal", f"{h}.maxTrials", f"{h}.algoritm", f"{h}.params[0].type", f"{h}.params[1].minValue"]
