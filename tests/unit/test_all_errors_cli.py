"""`kubectl ai-platform` prints every independent mistake of one command line: the first on gcloud's
``ERROR: (command) Invalid value for [FLAG]: ...`` line, one line each after it, each named by its flag."""

import io
import pytest
from server_ext.cli.main import main
pytestmark = pytest.mark.unit
ENV = {"JUPYTERHUB_USER": "alice", "MLPLATFORM_CONFIG": "/nonexistent/kubectl-ai-platform.yaml"}
PREFIX = "ERROR: (kubectl ai-platform.jobs.submit.training) "


def test_the_cli_prints_every_mistake_of_one_command_line(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    code = main(["jobs", "submit", "training", "1st_try", "--module-name", "trainer-task", "--packages",
                 "gs://b/t.tar.gz", "--labels", "Team=vision", "--scale-tier", "custom", "--master-machine-type",
                 "n1-standard-8", "--master-accelerator", "type=tpu-v2,count=1", "--dry-run"], out=out, err=err, env=ENV)
    lines = err.getvalue().splitlines()
    assert (code, out.getvalue()) == (2, "")
    assert lines[0].startswith(f"{PREFIX}Invalid value for [JOB]: must start with a letter")
    assert lines[1:] == [
        "Invalid value for [--labels]: keys must start with a lower-case letter and hold only lower-case letters, "
        "digits, '_' and '-' (at most 63)",
        "Invalid value for [--master-accelerator]: TPUs are not offered on this platform; use a GPU or a MIG slice",
        "Invalid value for [--module-name]: must be a dotted Python module name such as trainer.task (what python -m "
        "runs)"]


def test_plan_mistakes_are_all_printed_by_their_flags():
    out, err = io.StringIO(), io.StringIO()
    code = main(["jobs", "submit", "training", "j", "--module-name", "m", "--packages", "gs://b/t.tar.gz",
                 "--scale-tier", "custom", "--master-machine-type", "n1-standard-9000", "--runtime-version", "0.1",
                 "--dry-run"], out=out, err=err, env=ENV)
    lines = err.getvalue().splitlines()
    assert code == 2 and len(lines) == 2, lines
    assert lines[0].startswith(f"{PREFIX}Invalid value for [--runtime-version]: no runtime '0.1'")
    assert lines[1].startswith("Invalid value for [--master-machine-type]: n1 machines have 1 to 96 vCPUs")
