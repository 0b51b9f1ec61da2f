# Sourced by scripts/test, scripts/run and scripts/gpu-check: makes $PY a python with a CUDA build of torch,
# ninja and pytest, and cudnn_algos built from this tree. Installs only what is missing, so it also works where no
# package registry is reachable but torch is already installed (the GPU machine).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}

# one interpreter asks what is there (each import costs seconds on a fresh machine): "torch" a CUDA build of torch,
# "ext" cudnn_algos._C imports beside it, "torchvision" it imports; each word printed as soon as it is known, so a
# crash on a later import keeps the earlier answers
have=" $("$PY" -c 'def say(w): print(w, end=" ", flush=True)
try:
    import torch
    if torch.version.cuda: say("torch")
    import cudnn_algos._C  # noqa: F401
    say("ext")
except Exception: pass
try:
    import torchvision  # noqa: F401
    say("torchvision")
except Exception: pass' 2>/dev/null || true) "
if [[ "$have" != *" torch "* ]]; then
  have=" "  # what else it said was said beside another torch
  echo "bootstrap: installing torch==2.14.1 (a CUDA 13 build)" >&2
  "$PY" -m pip install -q torch==2.14.1
fi
if ! "$PY" -c "import importlib.util as u, setuptools, sys; v = tuple(int(p) for p in setuptools.__version__.split('.')[:2]); sys.exit(v < (70, 1) and u.find_spec('wheel') is None)" 2>/dev/null; then
  echo "bootstrap: installing setuptools>=70.1 (the editable build uses this environment's)" >&2
  "$PY" -m pip install -q "setuptools>=70.1"
fi
source scripts/optional.sh  # absent, install_optional
missing=$(absent ninja pytest hypothesis numpy pandas matplotlib)
if [ -n "$missing" ]; then
  echo "bootstrap: installing$missing" >&2
  "$PY" -m pip install -q $missing
fi
# torchvision for the corpus's families (the CPU tests of cudnn_algos.corpus): the build matching this torch, or none
# (those tests then skip, saying so) — a torchvision built for another torch is removed again, never kept
if [[ "$have" != *" torchvision "* ]]; then
  "$PY" -m pip install -q --no-deps torchvision 2>/dev/null | grep -v "Running pip as the 'root' user" || true
  "$PY" -c "import torchvision" 2>/dev/null || "$PY" -m pip uninstall -q -y torchvision 2>/dev/null || true
fi
# Dask for the sweep, pyarrow for the dataset (cudnn_algos[sweep]) and scikit-learn and LightGBM for training a
# selector (cudnn_algos[selector]); their CPU tests skip without them; pytest-xdist lets scripts/test use spare cores: all
# installed where a registry answers, in one pip call; where none does (the GPU machine), pip gives up at once, and a
# later run on the same machine does not ask again (scripts/optional.sh)
install_optional "distributed:dask[distributed]" pyarrow "sklearn:scikit-learn" lightgbm "xdist:pytest-xdist"
echo "bootstrap: optional packages checked after ${SECONDS}s" >&2
# (re)build the extension when it is missing, does not import, or its sources changed since the last build here: a
# hash of their contents, kept in build/ (file times are no guide where a tree is copied in afresh before each run)
# (cudnn_algos/_build.py's sources_digest; setup.py writes the same stamp after an editable build)
sources_hash=$("$PY" cudnn_algos/_build.py digest)
stamp=build/bootstrap-sources.sha1
so=$(ls cudnn_algos/_C*.so 2>/dev/null | head -n1 || true)
if [ -z "$so" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sources_hash $so" ] \
   || [[ "$have" != *" ext "* ]]; then
  echo "bootstrap: building cudnn_algos._C" >&2
  rm -f cudnn_algos/_C*.so "$stamp"  # a failed build must not leave the previous one to be imported as if it were new
  "$PY" -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | grep -v "Running pip as the 'root' user" || true
  "$PY" -c "import torch, cudnn_algos._C" || { echo "bootstrap: the extension did not build" >&2; exit 1; }
  so=$(ls cudnn_algos/_C*.so | head -n1)
  mkdir -p build && echo "$sources_hash $so" > "$stamp"
fi
echo "bootstrap: ready after ${SECONDS}s" >&2
export PY
