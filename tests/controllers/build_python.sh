#!/usr/bin/env bash
# Katib v0.19.0's Python services as Katib releases them, for the tests' kubelet to run as their
# images (`make controllers` runs this after build.sh). Katib ships them only as images whose
# Dockerfile copies the module's pkg/ and one cmd/<kind>/<name>/v1beta1/ directory, pip-installs that
# directory's requirements.txt and runs its main.py. Here: pkg/ and cmd/ are copied from the Katib
# module the Go build downloaded (tests/controllers/katib/go.mod) into bin/katib-python/src, and each
# service gets a virtual environment of its own under bin/katib-python/<service>, built from its own
# requirements.txt (PyPI). Nothing of Katib's is committed. tests/controllers/katib/serve_python.py
# runs a service's main.py unchanged but for the address it listens on (see there).
set -euo pipefail
cd "$(dirname "$0")"
out=$PWD/bin/katib-python
katib=$(cd katib && go mod download github.com/kubeflow/katib && go list -m -f '{{.Dir}}' github.com/kubeflow/katib)
python=${PYTHON3:-python3}
rm -rf "$out/src"
mkdir -p "$out/src"
cp -r "$katib/pkg" "$katib/cmd" "$out/src/"
chmod -R u+w "$out/src"
# service name -> its directory in Katib's cmd/ (the images' SUGGESTION_DIR / EARLY_STOPPING_DIR)
declare -A services=(
  [skopt]=suggestion/skopt/v1beta1              # bayesianoptimization
  [hyperopt]=suggestion/hyperopt/v1beta1        # random, tpe
  [optuna]=suggestion/optuna/v1beta1            # grid, multivariate-tpe
  [hyperband]=suggestion/hyperband/v1beta1      # hyperband
  [medianstop]=earlystopping/medianstop/v1beta1 # early stopping
)
for name in skopt hyperopt optuna hyperband medianstop; do
  start=$SECONDS
  req="$out/src/cmd/${services[$name]}/requirements.txt"
  stamp="$out/$name/.requirements"
  if [ -f "$stamp" ] && cmp -s "$req" "$stamp"; then
    echo "katib $name: up to date"
    continue
  fi
  rm -rf "${out:?}/$name"
  "$python" -m venv "$out/$name"
  nice -n 19 "$out/$name/bin/pip" install -q --disable-pip-version-check --prefer-binary -r "$req"
  cp "$req" "$stamp"
  echo "katib $name: $(du -sh "$out/$name" | cut -f1) in $((SECONDS - start)) s"
done
