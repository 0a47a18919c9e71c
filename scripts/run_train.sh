#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains with
#   build/titan-train --config ${CONFIG_FILE:-configs/debug_model.toml} "$@"
# Example: CONFIG_FILE=configs/debug_model.toml scripts/run_train.sh --training.steps 20
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
exec build/titan-train --config "${CONFIG_FILE:-configs/debug_model.toml}" "$@"
