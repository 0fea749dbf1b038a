"""Every command the docs show runs, or is named here with why it cannot.

The docs are README.md, docs/*.md and helm-values/README.md. Their commands are the lines of a
fenced block marked ``shell``, ``bash`` or ``sh``; in a ``console`` block (or an unmarked one
whose first line starts with ``$ ``) the lines after ``$ ``, the lines below them being the output
it shows; a line starting with ``$ `` outside a block; and the lines of an unmarked block whose
first word is a program (a known one, or one on PATH). A line ending in ``\\`` goes on in the next.

Each command either runs here and exits 0 (or the status its own comment documents,
``# exits 1``), printing the output lines a ``console`` block shows in that order (``...`` skips),
or it is in `NOT_RUN`, with why it cannot run here (a cluster, a server that runs until Ctrl-C, a
build of minutes) and, where one exists, a check that runs in its place: ``make -n`` for a make
target, ``--help`` naming every ``--flag`` the doc gives, or the same submit with ``--dry-run``. A
command in neither fails the test: a new command in the docs is run, or its reason is written here.

Commands run with bash in a scratch checkout (links to the repository's top-level entries, so a
command may write into its directory without touching the repository), the venv's ``bin`` first
on PATH, a fresh HOME, a KUBECONFIG naming no cluster, and ``MLPLATFORM_EXAMPLES`` as the demo sets
it. All of them take about 40 s on two cores.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.local

DOCS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")), "helm-values/README.md")
SHELL = {"shell", "bash", "sh"}
CONSOLE = {"console", "shell-session"}
# programs an unmarked block may start with (besides whatever is on PATH here)
KNOWN_PROGRAMS = {"make", "kubectl", "helm", "mlplatform", "kubectl-ai_platform", "python", "python3", "pip",
                  "npm", "npx", "jupyter", "jupyterhub", "docker", "cp", "git", "go", "curl", "openssl",
                  "lint-imports", "pytest"}
BIN = Path(sys.executable).parent
TIMEOUT_S = 120


@dataclass(frozen=True)
class NotRun:
    why: str  # why it cannot run here
    instead: str | None = None  # a command run in its place (exit 0)
    flags_in_help: bool = False  # `instead` prints a help text naming every --flag of the doc's command


def _help(command: str) -> str:
    """``python -m X --help`` for ``… python -m X …``."""
    words = shlex.split(command)
    i = words.index("-m")
    return shlex.join(words[:i + 2] + ["--help"])


_BENCH = "a benchmark of minutes on the real control plane or object stores (`make bench` runs it)"
_CLUSTER = "needs a Kubernetes cluster (the kube tier applies these files to its real API server)"
NOT_RUN: dict[str, NotRun] = {
    # README.md, quick start
    "make demo": NotRun("serves a JupyterHub until Ctrl-C", "make -n demo"),
    "make test": NotRun("runs all five tiers: tens of minutes, root, Go builds, Chromium (CI runs it: .ci/run)",
                        "make -n test"),
    # README.md, the walkthrough in a demo notebook's terminal: `cp` and `local train` run here; the
    # whole block, typed into a notebook terminal of both demos, is tests/browser/test_readme_walk.py
    "kubectl ai-platform jobs submit training census_1 --module-name trainer.task --package-path trainer/trainer "
    "--stream-logs -- --epochs=3": NotRun(
        "goes to the jobs API of the demo's notebook server, in whose terminal the README runs it",
        "kubectl ai-platform jobs submit training census_1 --module-name trainer.task "
        "--package-path trainer/trainer --stream-logs --dry-run -- --epochs=3"),
    "kubectl ai-platform jobs submit training sweep_1 --module-name trainer.task --package-path trainer/trainer "
    "--config trainer/hptuning_config.yaml": NotRun(
        "goes to the jobs API of the demo's notebook server, in whose terminal the README runs it",
        "kubectl ai-platform jobs submit training sweep_1 --module-name trainer.task "
        "--package-path trainer/trainer --config trainer/hptuning_config.yaml --dry-run"),
    "kubectl ai-platform jobs describe sweep_1 --summarize": NotRun(
        "describes the sweep submitted above in the demo's notebook server"),
    # README.md, the Kubernetes demo and the control plane
    "make demo-kube": NotRun("serves the Kubernetes demo until Ctrl-C, as root, after `make controllers`",
                             "make -n demo-kube"),
    "make cluster": NotRun("builds the control plane from Go modules (minutes with cold Go caches)", "make -n cluster"),
    "make controllers": NotRun("builds the controllers from Go modules (about ten minutes with cold Go caches) and "
                               "may apt-get install", "make -n controllers"),
    ".venv/bin/python -m tests.cluster --kubeconfig /tmp/test-cluster.kubeconfig --kubelet process": NotRun(
        "serves a control plane until Ctrl-C", ".venv/bin/python -m tests.cluster --help", flags_in_help=True),
    "KUBECONFIG=/tmp/test-cluster.kubeconfig kubectl get nodes": NotRun("needs the control plane of the line above"),
    "KUBECONFIG=~/.kube/config .venv/bin/python -m pytest -m kube --kube-context=kind-kind": NotRun(
        "needs a kind or k3s cluster of yours", ".venv/bin/python -m pytest --help -p no:cacheprovider",
        flags_in_help=True),
    # helm-values/README.md, docs/login.md, docs/operator.md: deploying
    "kubectl apply -f helm-values/hub-rbac.yaml -f helm-values/project-policies.yaml": NotRun(_CLUSTER),
    "kubectl apply -f helm-values/operator.yaml": NotRun(_CLUSTER),
    "kubectl apply -f helm-values/trainer-runtimes.yaml": NotRun(_CLUSTER),
    "helm upgrade --install jhub jupyterhub/jupyterhub --version 4.4.0 -n jhub -f helm-values/values.yaml": NotRun(
        "needs a cluster, Helm and the chart's repository (tests/unit/test_helm_values.py checks the values against "
        "the chart's schema)"),
    "helm upgrade --install jhub jupyterhub/jupyterhub --version 4.4.0 -n jhub -f helm-values/values.yaml "
    "-f helm-values/login-oidc.yaml": NotRun(
        "needs a cluster, Helm and the chart's repository (tests/unit/test_login_helm_values.py runs the overlays "
        "as z2jh does)"),
    "helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version 0.17.0 -n kueue-system "
    "--create-namespace -f helm-values/kueue.yaml": NotRun(
        "needs a cluster, Helm and Kueue's chart registry (the kube tier runs kueue-manager with this file's "
        "configuration: tests/controllers/kueue_system.py)"),
    "mlplatform doctor --config helm-values/values.yaml --hub-account jhub/hub": NotRun(
        "needs a cluster (tests/kube/test_doctor.py runs it against the real control plane)",
        "mlplatform doctor --help", flags_in_help=True),
    # docs/operator.md: benchmarks
    **{command: NotRun(_BENCH, _help(command), flags_in_help=True) for command in (
        ".venv/bin/python -m tests.bench.dataset_loader --objects 1000 --mb 100 --rounds 3",
        ".venv/bin/python -m tests.bench.operator_datasets --pvcs 1000",
        ".venv/bin/python -m tests.bench.operator_webhooks --pods 50 --rounds 2",
        ".venv/bin/python -m tests.bench.held_pods --pods 20 --objects 400 --delay 0.2",
    )},
}


@dataclass
class Command:
    text: str  # as bash runs it (continued lines joined)
    line: int  # where it starts in the doc
    shown: list[str] = field(default_factory=list)  # the output a console block shows below it

    @property
    def key(self) -> str:
        """The command's words, without comments: its name in `NOT_RUN`."""
        return " ".join(shlex.split(self.text.replace("\\\n", " "), comments=True))

    @property
    def status(self) -> int:
        found = re.search(r"#\s*exits?\s+(\d+)\s*$", self.text)
        return int(found.group(1)) if found else 0


@dataclass
class Block:
    doc: str
    line: int
    commands: list[Command]

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _program(line: str) -> str | None:
    """The program a command line starts with (after ``VAR=value`` words), or None."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return None
    words = [w for w in words if not re.fullmatch(r"[A-Za-z_]\w*=.*", w)] if words else []
    return words[0] if words else None


def _is_program(word: str | None) -> bool:
    return bool(word) and (word in KNOWN_PROGRAMS or word.startswith((".venv/", "./"))
                           or shutil.which(word, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}") is not None)


def _joined(lines: list[tuple[int, str]]) -> list[Command]:
    """Shell lines → commands (a trailing backslash continues a line; blank and comment lines go)."""
    out: list[Command] = []
    pending: Command | None = None
    for number, raw in lines:
        if pending is not None:
            pending.text += "\n" + raw
        elif raw.strip() and not raw.lstrip().startswith("#"):
            pending = Command(raw.strip(), number)
        if pending is not None and not pending.text.endswith("\\"):
            out.append(pending)
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def _console(lines: list[tuple[int, str]]) -> list[Command]:
    """Console lines → the ``$ `` commands, each with the output shown below it."""
    out: list[Command] = []
    continuing = False
    for number, raw in lines:
        if continuing:
            out[-1].text += "\n" + raw.removeprefix("> ")
        elif raw.startswith("$ "):
            out.append(Command(raw[2:].strip(), number))
        else:
            if out:
                out[-1].shown.append(raw)
            continue
        continuing = out[-1].text.endswith("\\")
    return out


def blocks_of(doc: str, text: str) -> list[Block]:
    """The commands of one Markdown document, by the block (or line) they are in."""
    blocks: list[Block] = []
    fence: tuple[int, str] | None = None  # (line, info string) of the open block
    body: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("```"):
            if fence is None:
                fence, body = (number, stripped[3:].strip().split(" ")[0].lower()), []
                continue
            start, info = fence
            fence = None
            indent = min((len(b) - len(b.lstrip()) for _, b in body if b.strip()), default=0)
            lines = [(n, b[indent:]) for n, b in body]
            first = next((b for _, b in lines if b.strip()), "")
            command = next((b for _, b in lines if b.strip() and not b.lstrip().startswith("#")), "")
            if info in SHELL or (not info and not first.startswith("$ ") and _is_program(_program(command))):
                commands = _joined(lines)
            elif info in CONSOLE or (not info and first.startswith("$ ")):
                commands = _console(lines)
            else:
                commands = []
            if commands:
                blocks.append(Block(doc, start, commands))
        elif fence is not None:
            body.append((number, raw))
        elif stripped.startswith("$ "):
            blocks.append(Block(doc, number, [Command(stripped[2:], number)]))
    return blocks


BLOCKS = [b for doc in DOCS for b in blocks_of(doc, (ROOT / doc).read_text())]


@pytest.fixture
def checkout(tmp_path):
    """A scratch checkout: links to the repository's top-level entries, so commands see its files
    and may write into their directory without touching it; and the environment they run in."""
    work = tmp_path / "checkout"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (work / entry.name).symlink_to(entry)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLPLATFORM_", "JUPYTERHUB_", "KUBECONFIG", "VIRTUAL_ENV"))}
    env.update(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", HOME=str(home),
               KUBECONFIG=str(home / "no-cluster"), MLPLATFORM_EXAMPLES=str(ROOT / "examples"))
    return work, env


_RAN: dict[str, subprocess.CompletedProcess] = {}


def _run(command: str, where) -> subprocess.CompletedProcess:
    """`command`'s result; a command shown by several docs runs once (every scratch checkout is
    the same, and the one command that writes into it, the README's ``cp``, is shown once)."""
    if command not in _RAN:
        work, env = where
        _RAN[command] = subprocess.run(["bash", "-c", command], check=False, cwd=work, env=env,
                                       capture_output=True, text=True, timeout=TIMEOUT_S)
    return _RAN[command]


def _said(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"


def _shown_in_order(shown: list[str], output: str) -> list[str]:
    """The lines of `shown` (but ``...``) that `output` lacks in that order."""
    lines, at, missing = output.splitlines(), 0, []
    for want in (s.rstrip() for s in shown):
        if not want or want.strip() in ("...", "…"):
            continue
        found = next((i for i in range(at, len(lines)) if lines[i].rstrip() == want), None)
        if found is None:
            missing.append(want)
        else:
            at = found + 1
    return missing


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_every_command_the_docs_show_runs_or_is_named(block, checkout):
    for command in block.commands:
        where = f"{block.doc}:{command.line}: {command.text}"
        skipped = NOT_RUN.get(command.key)
        if skipped is not None:
            if skipped.instead is None:
                continue
            done = _run(skipped.instead, checkout)
            assert done.returncode == 0, f"{where}\n(in its place) {skipped.instead}: {_said(done)}"
            if skipped.flags_in_help:
                flags = sorted({f.split("=")[0] for f in shlex.split(command.text, comments=True)
                                if f.startswith("--") and len(f) > 2})
                absent = [f for f in flags if f not in done.stdout]
                assert not absent, f"{where}\n{skipped.instead} names none of {absent}:\n{done.stdout[-3000:]}"
            continue
        done = _run(command.text, checkout)
        assert done.returncode == command.status, (
            f"{where}\nexits {done.returncode}, not {command.status}: fix the doc, or name the command in "
            f"NOT_RUN with why it cannot run here\n{_said(done)}")
        missing = _shown_in_order(command.shown, done.stdout)
        assert not missing, f"{where}\nthe doc shows output the command does not print: {missing}\n{_said(done)}"


def test_every_command_named_as_not_run_is_still_in_the_docs():
    shown = {c.key for b in BLOCKS for c in b.commands}
    stale = sorted(set(NOT_RUN) - shown)
    assert not stale, f"NOT_RUN names commands no doc shows any more: {stale}"


def test_the_docs_show_commands_that_run_here():
    """The reader still finds the docs' commands (a change of their markup would hide them all)."""
    commands = [c for b in BLOCKS for c in b.commands]
    assert len(commands) >= 20, [c.text for c in commands]
    assert sum(c.key not in NOT_RUN for c in commands) >= 5


def test_the_reader_finds_commands_as_written():
    text = "\n".join([
        "```shell", "make a   # a comment", "kubectl ai-platform x \\", "    --y z", "```",
        "```console", "$ mlplatform render-project --user u", "# header", "...", "$ mlplatform b  # exits 1", "```",
        "```", "KUBECONFIG=k kubectl get nodes", "```",
        "```", "usage: mlplatform render-project", "```",
        "```yaml", "make: not a command", "```",
        "$ make c",
    ])
    got = [(c.line, c.key, c.shown, c.status) for b in blocks_of("x.md", text) for c in b.commands]
    assert got == [(2, "make a", [], 0), (3, "kubectl ai-platform x --y z", [], 0),
                   (7, "mlplatform render-project --user u", ["# header", "..."], 0), (10, "mlplatform b", [], 1),
                   (13, "KUBECONFIG=k kubectl get nodes", [], 0), (21, "make c", [], 0)]
    assert _shown_in_order(["# a", "...", "# c"], "# a\n# b\n# c\n") == []
    assert _shown_in_order(["# c", "# a"], "# a\n# b\n# c\n") == ["# a"]


# Files and modules of ours the docs name, as a path (`hub_ext/spawners/runtime.py`, a folder, a glob)
# or a dotted name (`hub_ext.core.profiles.resolve.apply_override`: a module, then one of its names).
_PATH = re.compile(r"(?<![\w/.-])((?:hub_ext|server_ext|tests|helm-values|docs|labextension|examples|jupyter-config)"
                   r"/[\w./*-]*)")
_DOTTED = re.compile(r"(?<![\w./-])((?:hub_ext|server_ext)(?:\.\w+)+)")
BUILT = {"tests/controllers/bin/.stamp"}  # made by `make controllers`, not in the repository


def _module(parts: list[str]) -> Path | None:
    path = ROOT.joinpath(*parts)
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.exists()), None)


def _dotted_exists(name: str) -> bool:
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        module = _module(parts[:n])
        if module is not None:
            rest = parts[n:]
            return not rest or _module(parts[:n + 1]) is not None or re.search(
                rf"\b{re.escape(rest[0])}\b", module.read_text()) is not None
    return False


@pytest.mark.parametrize("doc", DOCS)
def test_every_file_and_module_the_docs_name_exists(doc):
    text = (ROOT / doc).read_text()
    missing = []
    for found in _PATH.finditer(text):
        path = found.group(1).rstrip(".,:;")
        if path in BUILT:
            continue
        if not (list(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()):
            missing.append(path)
    missing += [m.group(1) for m in _DOTTED.finditer(text) if not _dotted_exists(m.group(1).rstrip("."))]
    assert not missing, f"{doc} names what the repository does not have: {sorted(set(missing))}"


def test_the_name_check_reads_names_as_written():
    assert [m.group(1) for m in _PATH.finditer("`hub_ext/spawners/runtime.py`, tests/cluster/kubelet*.py, "
                                                "jobs/kube/backend.py")] == ["hub_ext/spawners/runtime.py",
                                                                             "tests/cluster/kubelet*.py"]
    assert _dotted_exists("hub_ext.core.profiles.resolve.apply_override")
    assert not _dotted_exists("hub_ext.core.profiles.resolve.no_such_name")
    assert not _dotted_exists("hub_ext.no_such_room")
