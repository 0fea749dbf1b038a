"""The submit form as a newcomer meets it (issue 20, item 6): it offers only the accelerators the
project may use (each one planned by the real planner with the project's limits: none refused),
says plainly what a local job gets, shows every mistake of one Submit at once next to its field,
shows its labels whole, hints the example's package path, and keeps the scale-tier box true."""

import pathlib

import pytest

from hub_ext.core.catalog import parse_accelerators
from hub_ext.core.errors import UserInputError
from hub_ext.core.publish import accelerator_json
from server_ext.client.notebook import Client
from server_ext.jobs.machines import Machines
from server_ext.jobs.model import parse_job
from server_ext.jobs.plan import PlanSettings, plan_job
from server_ext.widgets.form import LABEL_WIDTH, SubmitForm, check_values
from server_ext.widgets.form_choices import accelerator_offers, google_name, runtime_note

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parents[2]
RAW = {  # a site's catalogue, as an operator writes it (hub_ext.core.catalog syntax)
    "a100": {"type": "gpu", "product": "NVIDIA-A100-SXM4-40GB", "display_name": "NVIDIA A100 40GB"},
    "h100": {"type": "gpu", "product": "NVIDIA-H100-80GB-HBM3", "display_name": "NVIDIA H100 80GB"},
    "a6000": {"type": "gpu", "product": "NVIDIA-RTX-A6000", "display_name": "NVIDIA RTX A6000"},
    "1g.5gb": {"type": "mig", "profile": "1g.5gb"},
    "3g.20gb": {"type": "mig", "profile": "3g.20gb"},
}
CATALOGUE = parse_accelerators(RAW)
LIMITS = {"alice": {"1g.5gb": 2}, "vision": {"a100": 1, "3g.20gb": 4, "a6000": 2, "h100": 0}, "ops": None,
          "cpu-only": {}}
INFO = {
    "catalog": {"accelerators": [accelerator_json(a) for a in CATALOGUE.values()],
                "profiles": [{"slug": "mig-small", "accelerator": "1g.5gb", "accelerator_count": 1},
                             {"slug": "cpu", "accelerator": None, "accelerator_count": 0}]},
    "projects": {"projects": [{"name": n, "limits": limit} for n, limit in LIMITS.items()]},
    "capacity": {"accelerators": {"1g.5gb": {"free": 3, "total": 7}, "a100": {"free": 0, "total": 1}}},
    "credentials": {"credentials": [{"project": "alice", "name": "gcs", "type": "gcp-credential"},
                                    {"project": "vision", "name": "team-s3", "type": "aws-credential"}]},
    "datasets": {"datasets": [{"project": "alice", "name": "mnist"}, {"project": "vision", "name": "imagenet",
                                                                      "snapshot": "imagenet-snap-a1"},
                              {"project": "vision", "name": "mnist"}]},
}
LOCAL = {"MLPLATFORM_PROFILE": "mig-small", "CUDA_VISIBLE_DEVICES": "MIG-1234"}
KUBE = {"MLPLATFORM_BACKEND": "kubernetes"}


def form(project="alice", info=INFO, env=LOCAL):
    return SubmitForm(Client("http://127.0.0.1:9/", "t", project=project), info=info, env=env)  # nothing is sent


def plans(project, accelerator, count):
    """The real planner's answer for a job asking `count` × `accelerator` in `project`: "ok" or the status."""
    doc = {"jobId": "j", "trainingInput": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                                           "pythonModule": "trainer.task",
                                           "masterConfig": {"acceleratorConfig": {"type": accelerator,
                                                                                  "count": str(count)}}}}
    settings = PlanSettings(Machines(CATALOGUE), limits=LIMITS[project])
    try:
        plan = plan_job(parse_job(doc, shipped_package=True), settings, project=project, owner="alice")
    except UserInputError as e:
        return e.status
    return plan.replicas[0].accelerator.name


@pytest.mark.parametrize("project", sorted(LIMITS))
def test_the_form_offers_exactly_what_the_project_may_use(project):
    offers, _ = accelerator_offers(INFO, project)
    offered = {o.value: o.most for o in offers if o.value}
    for name in CATALOGUE:  # every catalogue entry: offered iff the planner lets the project use it
        value = google_name(name, CATALOGUE)
        assert value is not None, name
        allowed = LIMITS[project] is None or LIMITS[project].get(name, 0) > 0
        assert (value in offered) == allowed, (project, name)
        if allowed:
            assert plans(project, value, offered[value]) == name  # at its most: planned, on that entry
            if LIMITS[project] is not None:
                assert plans(project, value, offered[value] + 1) == 403  # one more is the project's limit
        else:
            assert plans(project, value, 1) == 403


def test_switching_project_offers_that_projects_accelerators_and_bounds_the_count():
    f = form()
    try:
        choice, count = f.fields["accelerator"], f.fields["accelerator_count"]
        assert [v for _, v in choice.options] == ["", "NVIDIA_A100_1G_5GB"]
        choice.value = "NVIDIA_A100_1G_5GB"
        assert count.max == 2 and not count.disabled
        f.fields["project"].value = "vision"
        assert [v for _, v in choice.options] == ["", "NVIDIA_A100_3G_20GB", "NVIDIA_TESLA_A100", "NVIDIA_A6000"]
        assert choice.value == ""  # the 1g.5gb slice is not vision's: not kept
        choice.value = "NVIDIA_A100_3G_20GB"
        count.value = 4
        assert count.max == 4 and count.value == 4
        f.fields["project"].value = "cpu-only"
        assert [v for _, v in choice.options] == [""] and count.disabled
        assert "may use no accelerator" in f.accelerator_note.value
    finally:
        f.close()


def test_a_local_job_is_told_it_shares_the_notebooks_own_slice():
    f = form()
    try:
        note = f.accelerator_note.value
        assert "Local runtime" in note and "shares its devices" in note
        assert "1 × MIG 1g.5gb slice (this server&#x27;s profile &#x27;mig-small&#x27;)" in note
        assert "No other GPU or slice is taken" in note
        assert not any("free" in label for label, _ in f.fields["accelerator"].options)  # it takes no free slice
    finally:
        f.close()
    assert "which are none" in runtime_note(INFO, {"MLPLATFORM_PROFILE": "cpu"})
    assert "2 GPU devices" in runtime_note({}, {"CUDA_VISIBLE_DEVICES": "GPU-1,GPU-2"})
    kube = form(env=KUBE)
    try:
        assert "own pods" in kube.accelerator_note.value
        assert ("NVIDIA_A100_1G_5GB (MIG 1g.5gb slice, at most 2, 3 of 7 free now)", "NVIDIA_A100_1G_5GB") \
            in kube.fields["accelerator"].options
    finally:
        kube.close()


def test_where_kueue_holds_the_accelerators_the_offers_say_free_now_or_how_many_wait():
    def labels(queue_ahead):
        projects = {"projects": [{"name": "alice", "limits": {"1g.5gb": 2}, "queue_ahead": queue_ahead},
                                 {"name": "vision", "limits": {"a100": 1}, "queue_ahead": {"a100": 0}}]}
        info = {**INFO, "projects": projects}
        return {o.value: o.label for o in accelerator_offers(info, "alice", local=False)[0] if o.value}, \
            {o.value: o.label for o in accelerator_offers(info, "vision", local=False)[0] if o.value}

    alice, vision = labels({"1g.5gb": 2})
    assert alice == {
        "NVIDIA_A100_1G_5GB": "NVIDIA_A100_1G_5GB (MIG 1g.5gb slice, at most 2, 3 of 7 free, queue: 2 ahead)"}
    assert vision["NVIDIA_TESLA_A100"].endswith("(NVIDIA A100 40GB, at most 1, 0 of 1 free now, a job waits its turn)")
    alice, _ = labels({"1g.5gb": 0})
    assert alice["NVIDIA_A100_1G_5GB"].endswith("3 of 7 free now)")
    alice, _ = labels("not a mapping")  # a malformed answer: no queue words, the offers stay
    assert alice["NVIDIA_A100_1G_5GB"].endswith("3 of 7 free now)")


def test_without_the_hub_the_built_in_catalogue_is_offered_and_the_note_says_so():
    f = form(info={})
    try:
        assert "NVIDIA_TESLA_A100" in [v for _, v in f.fields["accelerator"].options]
        assert "checks at Submit" in f.accelerator_note.value
    finally:
        f.close()
    offers, note = accelerator_offers(INFO, "nobody")
    assert [o.value for o in offers] == [""] and "no project 'nobody'" in note


FOUR_MISTAKES = {"job_id": "my-first-job", "module": "trainer/task.py", "package_path": "",
                 "args": "--name 'unclosed", "hyperparameters_on": True,
                 "hyperparameters": "goal: MAXIMISE\nhyperparameterMetricTag: rmse\nmaxTrials: 2\nparams:\n"
                                    "- {parameterName: lr, type: DOUBLE, minValue: 0.1, maxValue: 0.01}\n"}


def test_every_mistake_of_one_submit_is_found_at_once():
    found = check_values(FOUR_MISTAKES)
    fields = [f for f, _ in found]
    assert fields[:4] == ["jobId", "trainingInput.pythonModule", "trainingInput.packageUris", "trainingInput.args"]
    assert any(f.startswith("trainingInput.hyperparameters") for f in fields[4:])
    assert check_values({"job_id": "ok_1", "module": "trainer.task", "package_path": "trainer/trainer"}) == []


def test_the_form_shows_every_mistake_next_to_its_field_and_sends_nothing():
    f = form()
    try:
        for name, value in FOUR_MISTAKES.items():
            f.fields[name].value = value
        assert f.submit() is None  # the client points at a closed port: nothing was sent
        shown = {name for name, label in f.errors.items() if label.value}
        assert shown == {"job_id", "module", "package_path", "args", "hyperparameters"}
        assert "must start with a letter" in f.errors["job_id"].value
        assert "dotted Python module name" in f.errors["module"].value
        assert "cannot be split into words" in f.errors["args"].value
        assert f.message.value == ""
    finally:
        f.close()


def test_every_label_is_shown_whole():
    f = form()
    try:
        width = int(LABEL_WIDTH.removesuffix("px"))
        for name, field in f.fields.items():
            assert field.style.description_width == LABEL_WIDTH, name
            # JupyterLab's 13px UI font: at most about 8px a character, and the label's own padding
            assert len(field.description) * 8 + 12 <= width or isinstance(field, type(f.fields["hyperparameters_on"])), \
                (name, field.description)
    finally:
        f.close()


def test_the_package_path_hint_is_the_examples_package():
    f = form()
    try:
        hint = f.fields["package_path"].placeholder.split()[0]
        module = f.fields["module"].placeholder
        # after `cp -r $MLPLATFORM_EXAMPLES/trainer .`, the hinted directory holds the hinted module
        package = ROOT / "examples" / hint
        assert (package / "__init__.py").is_file()
        assert (package.parent / (module.replace(".", "/") + ".py")).is_file()
    finally:
        f.close()


def test_the_scale_tier_box_follows_the_machine_and_accelerator():
    f = form(project="ops")
    try:
        tier = f.fields["scale_tier"]
        f.fields["accelerator"].value = "NVIDIA_TESLA_A100"
        assert tier.value == "CUSTOM"
        tier.value = "BASIC"  # a tier fixes the machines: the choices that needed CUSTOM go
        assert f.fields["accelerator"].value == "" and f.fields["machine_type"].value == ""
        f.fields["machine_type"].value = "n1-highmem-8"
        assert tier.value == "CUSTOM"
        values = f.values()
        assert check_values({**values, "module": "trainer.task", "package_path": "p"}) == []
        tier.value = "STANDARD_1"
        assert f.fields["machine_type"].value == ""
    finally:
        f.close()


def test_credentials_and_datasets_offered_are_the_chosen_projects():
    f = form()
    try:
        creds, data = f.fields["credentials"], f.fields["datasets"]
        assert (creds.options, data.options) == (("gcs",), ("mnist",))
        data.value = ("mnist",)
        f.fields["project"].value = "vision"  # a job mounts its own project's only
        # a dataset whose load has a snapshot is offered as a private writable copy too
        assert (creds.options, data.options) == (("team-s3",), ("imagenet", "imagenet:copy", "mnist"))
        assert data.value == ()  # vision's mnist is another dataset: unticked, and said
        assert "Unticked datasets of the previous project: mnist." in f.accelerator_note.value
        f.fields["project"].value = "ops"
        assert (creds.options, data.options, data.value) == ((), (), ())
    finally:
        f.close()


def test_the_sweep_box_takes_a_whole_hptuning_config_and_its_template_runs():
    import pathlib

    import yaml

    from server_ext.jobs.hptuning import parse_spec
    from server_ext.widgets.form import submit_arguments
    from server_ext.widgets.form_choices import SWEEP_TEMPLATE, sweep_spec

    example = (pathlib.Path(__file__).resolve().parents[2] / "examples" / "trainer" / "hptuning_config.yaml").read_text()
    spec = yaml.safe_load(example)["trainingInput"]["hyperparameters"]
    assert sweep_spec(yaml.safe_load(example)) == spec  # the whole file, as users have it
    assert sweep_spec({"hyperparameters": spec}) == spec and sweep_spec(spec) == spec
    config, _ = submit_arguments({"module": "trainer.task", "hyperparameters_on": True, "hyperparameters": example})
    assert config["trainingInput"]["hyperparameters"] == spec
    template = parse_spec(yaml.safe_load(SWEEP_TEMPLATE))  # what a ticked, empty box shows runs as it is
    assert template.algorithm == "RANDOM_SEARCH" and [p.name for p in template.params] == ["learning_rate"]
    assert "hptuning_config.yaml" in SWEEP_TEMPLATE


def test_ticking_the_sweep_box_shows_the_template_and_keeps_what_was_written():
    from server_ext.widgets.form_choices import SWEEP_TEMPLATE

    f = form()
    try:
        box = f.fields["hyperparameters"]
        assert box.layout.display == "none" and box.value == ""
        f.fields["hyperparameters_on"].value = True
        assert box.layout.display is None and box.value == SWEEP_TEMPLATE
        box.value = "goal: MINIMIZE\n"
        f.fields["hyperparameters_on"].value = False
        assert box.layout.display == "none"
        f.fields["hyperparameters_on"].value = True
        assert box.value == "goal: MINIMIZE\n"  # the user's own text is never replaced
    finally:
        f.close()
