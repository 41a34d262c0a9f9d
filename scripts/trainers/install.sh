#!/usr/bin/env bash
# Install the two drafter trainers on CPU into a venv of their own, for the opt-in test
# tests/export/test_trainers_optin.py and for trying docs/export.md's recipes by hand.
#
#   scripts/trainers/install.sh [VENV]        (default ./.trainers-venv)
#   EAGLE_TRAINERS_PYTHON=VENV/bin/python .venv/bin/python -m pytest tests/export -k trainers
#
# Versions and why they are installed this way (checked against their wheels' metadata):
# - torch 2.13.0 CPU, pinned by a constraint at every step: a plain `torch`, or any torch pip
#   must fetch from PyPI, is the CUDA build (several GB); 2.13.0 is the CPU wheel this
#   machine's pip finds locally.
# - speculators 0.9.0 (asks torch>=2.9.0,<=2.14.1: 2.13.0 fits) with its requirements EXCEPT
#   torchvision and torchaudio: PyPI's Linux torchvision is built against CUDA torch, and with
#   a CPU torch `import transformers.PreTrainedModel` fails ("operator torchvision::nms does
#   not exist"), which breaks `import speculators`. Nothing in speculators imports either.
# - specforge 0.2.0 WITHOUT its requirements: it pins torch==2.11.0 (a CUDA build on PyPI)
#   and sglang==0.5.14 (the GPU serving stack). The code the export needs is light:
#   specforge.data.prompt_builder.prepare_prompt_tasks reads pre-tokenized JSONL with the
#   standard library, and its run config (specforge.config.schema) needs pydantic and pyyaml.
#   Its transformers==5.8.1 pin is not applied either: speculators resolves its own
#   transformers (5.19.0 today, the newest it allows), which is what a speculators user gets;
#   SpecForge's prompts path never imports transformers.
set -euo pipefail
VENV="${1:-.trainers-venv}"
python3 -m venv "$VENV"
PY="$VENV/bin/python"
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
echo "torch==2.13.0" >"$CONSTRAINTS"
pip_install() { "$VENV/bin/pip" install -q -c "$CONSTRAINTS" "$@"; }

pip_install "torch==2.13.0"
pip_install --no-deps "speculators==0.9.0" "specforge==0.2.0"
# speculators' own requirement list, minus extras and the two CUDA-built vision/audio wheels
mapfile -t SPECULATORS_DEPS < <("$PY" - <<'PY'
from importlib.metadata import requires
for req in requires("speculators") or []:
    name = req.split(";")[0].strip()
    if "extra ==" in req or name.split("<")[0].split(">")[0].split("=")[0] in (
        "torchvision", "torchaudio"):
        continue
    print(name)
PY
)
pip_install "${SPECULATORS_DEPS[@]}" "pydantic>=2" "pyyaml"
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio 2>/dev/null || true

"$PY" - <<'PY'
from importlib.metadata import version
import speculators.data_generation.preprocessing  # noqa: F401  (prepare-data's module)
import specforge.data.prompt_builder  # noqa: F401
import specforge.config.schema  # noqa: F401
for name in ("torch", "speculators", "specforge", "transformers", "datasets"):
    print(f"{name} {version(name)}")
PY
echo "trainers ready: EAGLE_TRAINERS_PYTHON=$PY"
