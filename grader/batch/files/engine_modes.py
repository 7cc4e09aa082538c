"""The output modes a batch file export may ask for: a batch engine does not refuse a mode it does
not read, it drops the constraint, so such a mode is refused before anything is written."""

from __future__ import annotations

from grader.errors import InputError
from grader.output_modes import OutputMode

DROPPED: dict[str, str] = {
    "vllm_guided_json": (
        "vLLM removed the guided_json request field (0.12): its run-batch takes the line, logs "
        'that the field is removed ("output will NOT be constrained") and answers without '
        "the schema; a batch has no refusal to fall back on"
    ),
    "ollama_format": (
        "`format` is a field of Ollama's native /api/chat; a batch line goes to "
        "/v1/chat/completions, where vLLM and Ollama ignore it, so the replies would not be "
        "constrained"
    ),
}
"""The modes whose constraint batch engines drop, and why."""


def check_batch_mode(mode: OutputMode) -> None:
    """InputError when batch engines would drop `mode`'s constraint (`DROPPED`)."""
    why = DROPPED.get(mode)
    if why is not None:
        raise InputError(
            f"--output-mode {mode} cannot be exported for a batch engine: {why}",
            hint="use --output-mode json_schema (response_format json_schema, which vLLM, "
            "SGLang, llama.cpp and Ollama's OpenAI endpoint honour) or vllm_structured_outputs "
            "(vLLM >= 0.10.2)",
        )
