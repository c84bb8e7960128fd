#!/usr/bin/env bash
# Sets up the Python side of bench/sbibm.R: a virtual environment bench/sbibm/.venv (git-ignored)
# with CPU torch, sbi (current release, its own defaults) and sbibm (its tasks, reference
# posterior samples and c2st metric).
#
# sbibm 1.1.0 pins sbi < 0.22 and pulls elfi, pyabc, pyabcranger, diffeqtorch, deneb (for
# its other tasks and algorithms), which do not install together on Python 3.11 with a current
# torch. Only its two_moons and slcp tasks and its metrics are used here, which need torch, pyro,
# numpy, pandas and scikit-learn, so sbibm is installed with --no-deps beside a current sbi.
# Exits non-zero with a message when anything fails; bench/sbibm.R then skips the Python side.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
venv="${SBIBM_VENV:-$here/.venv}"
py="${PYTHON:-python3}"
fail() { echo "bench/sbibm/setup.sh: $*" >&2; exit 1; }

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch, sbi, sbibm, sklearn' 2>/dev/null; then
  echo "bench/sbibm/setup.sh: $venv is ready"
  exit 0
fi
"$py" -c 'import sys; assert sys.version_info >= (3, 9)' 2>/dev/null || fail "needs Python >= 3.9 ($py)"
[ -d "$venv" ] || "$py" -m venv "$venv" || fail "could not create the virtual environment $venv"
pip="$venv/bin/pip"
"$pip" install -q --upgrade pip || fail "pip upgrade failed"

# CPU-only torch from the PyTorch index when it answers, else PyPI's torch.
if curl -s -m 10 -o /dev/null -w '%{http_code}' https://download.pytorch.org/whl/cpu/torch/ 2>/dev/null | grep -q '^2'; then
  "$pip" install -q torch --index-url https://download.pytorch.org/whl/cpu || fail "torch (CPU index) failed"
else
  echo "bench/sbibm/setup.sh: the PyTorch CPU index is out of reach; installing torch from PyPI" >&2
  "$pip" install -q torch || fail "torch failed to install"
fi
"$pip" install -q "sbi>=0.25" pyro-ppl pandas scikit-learn || fail "sbi, pyro-ppl, pandas or scikit-learn failed to install"
"$pip" install -q --no-deps "sbibm==1.1.0" || fail "sbibm failed to install"
"$venv/bin/python" -c 'import torch, sbi, sbibm, sklearn; sbibm.get_task("two_moons"); sbibm.get_task("slcp"); import importlib.util, os; spec = importlib.util.spec_from_file_location("c2st", os.path.join(os.path.dirname(sbibm.__file__), "metrics", "c2st.py")); spec.loader.exec_module(importlib.util.module_from_spec(spec))' ||
  fail "the environment is installed but sbibm's tasks do not load"
"$venv/bin/python" -c 'import torch, sbi, sbibm, sklearn, pyro; print("torch", torch.__version__, "sbi", sbi.__version__, "sbibm", sbibm.__version__, "pyro", pyro.__version__, "sklearn", sklearn.__version__)'
echo "bench/sbibm/setup.sh: $venv is ready"
