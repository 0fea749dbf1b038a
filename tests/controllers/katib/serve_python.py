"""Runs one of Katib's Python services (its own ``cmd/<kind>/<name>/v1beta1/main.py``, unchanged) the
way its image does, on the address the tests' kubelet gives the pod.

``serve_python.py SERVICE_DIR HOST``: SERVICE_DIR is the service's directory under Katib's ``cmd/``
(e.g. ``suggestion/skopt/v1beta1``), found in the copy ``build_python.sh`` makes; HOST is the pod IP
(the kubelet turns the ``0.0.0.0`` it is given into it). The image's ``PYTHONPATH`` (Katib's root and
its generated gRPC packages) and working directory are set as its Dockerfile sets them. The one
change: every Katib main.py listens on ``DEFAULT_PORT = "0.0.0.0:<port>"``, which here, where the
pods share the host's network namespace, would let only one service of a kind run on the machine;
so ``DEFAULT_PORT`` is set to ``HOST:<port>`` before ``serve()`` (as the goptuna service's
``-listen`` flag does in ``goptuna/main.go``).
"""

from __future__ import annotations

import os
import pathlib
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "bin" / "katib-python" / "src"


def main(argv: list[str]) -> None:
    service_dir, host = argv
    here = SRC / "cmd" / service_dir
    os.chdir(here)
    sys.path[:0] = [str(here), str(SRC), str(SRC / "pkg/apis/manager/v1beta1/python"),
                    str(SRC / "pkg/apis/manager/health/python")]
    sys.stdout.reconfigure(line_buffering=True)  # the pod log as it happens
    import main as service  # Katib's own

    service.DEFAULT_PORT = service.DEFAULT_PORT.replace("0.0.0.0", host)
    service.serve()


if __name__ == "__main__":
    main(sys.argv[1:])
