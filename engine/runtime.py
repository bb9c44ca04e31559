"""The one object that owns a llama.cpp model and context.

Not thread-safe, on purpose: one thread (the UI's engine worker, or the CLI's main thread)
owns an Engine. Its live context is sequence 0 of a unified KV cache; sequence 1 is a
scratch sequence used to cut a token range out of the live state (capture) and to bring a
saved range back in next to a kept prefix (restore), through llama.cpp's public seq-state
API only.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from llmchat.engine.errors import ContextFullError, EngineError, ModelLoadError, SnapshotRefused
from llmchat.engine.modelfile import check_gguf, describe, file_identity, library_identity
from llmchat.engine.template import ChatTemplate

LIVE = 0  # the live sequence
SCRATCH = 1  # capture/restore staging sequence

KV_TYPES = {"f16": 1, "f32": 0, "q8_0": 8, "q4_0": 2, "bf16": 30}

# How the model's memory can be cut. "attention": every cell is one position of one token,
# so a range [start, end) can be captured and restored on its own (per-turn delta segments).
# "swa" (sliding-window layers keep only the last window), "recurrent" and "hybrid" (a state
# that summarises all positions) cannot: their snapshots are whole-sequence states.
MEMORY_KINDS = ("attention", "swa", "recurrent", "hybrid")


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    max_tokens: int = 512
    seed: int = -1  # -1: a new seed per reply

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Sampling:
        if not d:
            return cls()
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EngineConfig:
    model_path: Path
    n_ctx: int = 0  # 0: the model's training context, capped at 8192
    n_batch: int = 512
    n_threads: int = 0  # 0: all cores
    flash_attn: bool = True
    type_k: str = "f16"
    type_v: str = "f16"
    identity_cache: Path | None = None  # JSON file caching the model file's digest by path/size/mtime


@dataclass
class DecodeStats:
    tokens: int = 0
    ms: float = 0.0


@dataclass
class ModelInfo:
    name: str
    path: str
    n_ctx: int
    n_ctx_train: int
    memory_kind: str
    fingerprint: dict[str, Any] = field(default_factory=dict)
    fingerprint_id: str = ""
    template_note: str = ""
    bytes_per_token: int = 0


_log_lock = threading.Lock()
_log_cb: Any = None


def _silence_llama_logs() -> None:
    """Route llama.cpp's log to nowhere (it prints to stderr by default, under our UI)."""
    global _log_cb
    import llama_cpp

    with _log_lock:
        if _log_cb is None:

            @llama_cpp.llama_log_callback
            def _cb(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
                if os.environ.get("LLMCHAT_LLAMA_LOG"):
                    os.write(2, text)

            _log_cb = _cb
            llama_cpp.llama_log_set(_log_cb, ctypes.c_void_p(0))


class Engine:
    """Owns the model, the context, the tokenizer and the chat template."""

    def __init__(self, config: EngineConfig) -> None:
        import llama_cpp

        self._ll = llama_cpp
        self.config = config
        path = check_gguf(Path(config.model_path))
        _silence_llama_logs()
        llama_cpp.llama_backend_init()
        mparams = llama_cpp.llama_model_default_params()
        t0 = time.perf_counter()
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), mparams)
        if not model:
            raise ModelLoadError(f"llama.cpp could not load the model (corrupt or unsupported GGUF): {path}")
        self._model = model
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(model))
        if config.n_ctx < 0:
            llama_cpp.llama_model_free(model)
            raise EngineError(f"--n-ctx must be positive, not {config.n_ctx}")
        n_ctx = config.n_ctx or min(n_ctx_train or 8192, 8192)
        if config.type_k not in KV_TYPES or config.type_v not in KV_TYPES:
            raise EngineError(
                f"unknown KV cache type: {config.type_k}/{config.type_v} (use one of {sorted(KV_TYPES)})"
            )
        if (config.type_v != "f16" or config.type_k != "f16") and not config.flash_attn:
            raise EngineError("a quantised KV cache needs flash attention")
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = min(config.n_batch, n_ctx)
        cparams.n_ubatch = min(config.n_batch, n_ctx)
        cparams.n_seq_max = 2
        cparams.kv_unified = True
        threads = config.n_threads or (os.cpu_count() or 2)
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
            if config.flash_attn
            else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        cparams.type_k = KV_TYPES[config.type_k]
        cparams.type_v = KV_TYPES[config.type_v]
        cparams.no_perf = True
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        if not ctx:
            llama_cpp.llama_model_free(model)
            raise ModelLoadError(f"llama.cpp could not create a context of {n_ctx} tokens for {path}")
        self._ctx = ctx
        self._mem = llama_cpp.llama_get_memory(ctx)
        self.n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        # llama.cpp may clamp the batch (to a small n_ctx): chunk prefills by what it accepts
        self.n_batch = max(1, min(int(llama_cpp.llama_n_batch(ctx)), int(llama_cpp.llama_n_ubatch(ctx))))
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self.load_ms = (time.perf_counter() - t0) * 1000
        self.tokens: list[int] = []  # what sequence LIVE holds, position by position
        self._has_logits = False
        self._closed = False

        if llama_cpp.llama_model_is_hybrid(model):
            kind = "hybrid"
        elif llama_cpp.llama_model_is_recurrent(model):
            kind = "recurrent"
        elif int(llama_cpp.llama_model_n_swa(model)) > 0:
            kind = "swa"
        else:
            kind = "attention"
        self.memory_kind = kind
        self.template = ChatTemplate(
            self.meta("tokenizer.chat_template"),
            bos=self.token_text(self.bos) if self.bos >= 0 else "",
            eos=self.token_text(self.eos) if self.eos >= 0 else "",
        )
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        ident = file_identity(path, config.identity_cache)
        self.info = ModelInfo(
            name=self.meta("general.name") or describe(path),
            path=str(path),
            n_ctx=self.n_ctx,
            n_ctx_train=n_ctx_train,
            memory_kind=kind,
            template_note=self.template.note,
        )
        self.info.fingerprint = {
            "model_size": ident.size,
            "model_digest": ident.digest,
            "llama_cpp_python": llama_cpp.__version__,
            "llama_build": library_identity(),
            "n_ctx": self.n_ctx,
            "type_k": config.type_k,
            "type_v": config.type_v,
            "flash_attn": config.flash_attn,
            "kv_unified": True,
            "n_seq_max": 2,
            "memory_kind": kind,
            "n_layer": int(llama_cpp.llama_model_n_layer(model)),
            "n_embd": int(llama_cpp.llama_model_n_embd(model)),
            "layout": 1,  # llmchat's own segment layout version
        }
        self.info.fingerprint_id = hashlib.sha256(
            orjson.dumps(self.info.fingerprint, option=orjson.OPT_SORT_KEYS)
        ).hexdigest()
        self.prefill_rate_tps = 0.0  # best measured tokens/s of batched prefill here (0 = unknown)
        # Warm up: the first decode pages the mmapped weights in and builds the compute graph;
        # without this, the first prefill of a process (and the re-prefill estimates taken from
        # it) would be several times slower than the machine really is.
        self._decode([max(self.bos, 0)], logits_last=True)
        self.clear()

    # ------------------------------------------------------------------ model facts
    @property
    def bos(self) -> int:
        return int(self._ll.llama_vocab_bos(self._vocab))

    @property
    def eos(self) -> int:
        return int(self._ll.llama_vocab_eos(self._vocab))

    def is_eog(self, token: int) -> bool:
        return bool(self._ll.llama_vocab_is_eog(self._vocab, token))

    def meta(self, key: str) -> str | None:
        size = 1 << 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._ll.llama_model_meta_val_str(self._model, key.encode(), buf, size)
            if n < 0:
                return None
            if n < size:
                return buf.value.decode("utf-8", errors="replace")
            size = n + 1

    # ------------------------------------------------------------------ tokens
    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        data = text.encode("utf-8", errors="replace")
        cap = len(data) + 16
        arr = (ctypes.c_int32 * cap)()
        n = self._ll.llama_tokenize(self._vocab, data, len(data), arr, cap, False, special)
        if n < 0:
            cap = -n
            arr = (ctypes.c_int32 * cap)()
            n = self._ll.llama_tokenize(self._vocab, data, len(data), arr, cap, False, special)
        return list(arr[:n])

    def token_bytes(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = self._ll.llama_token_to_piece(self._vocab, token, buf, 64, 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._ll.llama_token_to_piece(self._vocab, token, buf, -n, 0, True)
        return buf.raw[:n]

    def token_text(self, token: int) -> str:
        return self.token_bytes(token).decode("utf-8", errors="replace")

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ live context
    def keep(self, n: int) -> bool:
        """Cut the live context to its first n tokens. False when the memory cannot be cut
        there (recurrent/hybrid/SWA models): then the caller must start from an empty context."""
        if n >= len(self.tokens):
            return True
        ok = bool(self._ll.llama_memory_seq_rm(self._mem, LIVE, n, -1))
        if ok and self._pos_max(LIVE) != n - 1:
            ok = False
        if not ok:
            return False
        del self.tokens[n:]
        self._has_logits = False
        return True

    def clear(self) -> None:
        self._ll.llama_memory_clear(self._mem, True)
        self.tokens = []
        self._has_logits = False

    def _pos_max(self, seq: int) -> int:
        return int(self._ll.llama_memory_seq_pos_max(self._mem, seq))

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        progress: Callable[[int, int], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> DecodeStats:
        """Decode `tokens` after the live context, in batches; logits of the last one are kept."""
        stats = DecodeStats()
        if not tokens:
            return stats
        if len(self.tokens) + len(tokens) > self.n_ctx:
            raise ContextFullError(
                f"the conversation needs {len(self.tokens) + len(tokens)} tokens but the context holds {self.n_ctx}"
            )
        t0 = time.perf_counter()
        done = 0
        total = len(tokens)
        while done < total:
            if should_stop is not None and should_stop():
                break
            chunk = tokens[done : done + self.n_batch]
            self._decode(chunk, logits_last=(done + len(chunk) == total))
            done += len(chunk)
            if progress is not None:
                progress(done, total)
        stats.tokens = done
        stats.ms = (time.perf_counter() - t0) * 1000
        if done >= 32 and stats.ms > 0:
            # the best rate seen: a busy machine measures slower, and the estimate of what a
            # re-prefill costs should err on the side of less, never more
            self.prefill_rate_tps = max(self.prefill_rate_tps, done / (stats.ms / 1000))
        return stats

    def _fill_batch(self, tokens: Sequence[int], pos0: int, seq: int, *, logits_last: bool) -> Any:
        b = self._batch
        n = len(tokens)
        for i, tok in enumerate(tokens):
            b.token[i] = tok
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 0
        if logits_last:
            b.logits[n - 1] = 1
        b.n_tokens = n
        return b

    def _decode(self, chunk: Sequence[int], *, logits_last: bool) -> None:
        pos0 = len(self.tokens)
        b = self._fill_batch(chunk, pos0, LIVE, logits_last=logits_last)
        rc = self._ll.llama_decode(self._ctx, b)
        if rc != 0:
            # llama_decode may have stored part of the batch: put the memory back as it was.
            self._ll.llama_memory_seq_rm(self._mem, LIVE, pos0, -1)
            self._has_logits = False
            raise EngineError(f"llama_decode failed (code {rc}) at position {pos0}")
        self.tokens.extend(chunk)
        self._has_logits = logits_last

    def calibrate(self, n: int = 64) -> float:
        """Measure the batched prefill rate (tokens/s) without touching the live context: n
        tokens are decoded in the scratch sequence and dropped. Used when a restore must say
        what re-prefill would cost and nothing has been measured yet."""
        n = max(8, min(n, self.n_batch, self.n_ctx - len(self.tokens)))
        if n < 8:
            return self.prefill_rate_tps
        b = self._fill_batch([max(self.bos, 0)] * n, 0, SCRATCH, logits_last=True)
        t0 = time.perf_counter()
        rc = self._ll.llama_decode(self._ctx, b)
        ms = (time.perf_counter() - t0) * 1000
        self._ll.llama_memory_seq_rm(self._mem, SCRATCH, -1, -1)
        self._has_logits = False
        if rc == 0 and ms > 0:
            self.prefill_rate_tps = max(self.prefill_rate_tps, n / (ms / 1000))
        return self.prefill_rate_tps

    # ------------------------------------------------------------------ generation
    def _make_sampler(self, s: Sampling) -> Any:
        ll = self._ll
        chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        if s.repeat_penalty != 1.0:
            ll.llama_sampler_chain_add(
                chain,
                ll.llama_sampler_init_penalties(self.n_vocab, s.repeat_last_n, s.repeat_penalty, 0.0, 0.0),
            )
        if s.temperature <= 0:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
            return chain
        if s.top_k > 0:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_k(s.top_k))
        if s.top_p < 1.0:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_p(s.top_p, 1))
        if s.min_p > 0:
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_min_p(s.min_p, 1))
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_temp(s.temperature))
        seed = s.seed if s.seed >= 0 else int.from_bytes(os.urandom(4), "little")
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_dist(seed))
        return chain

    def generate(self, sampling: Sampling, *, should_stop: Callable[[], bool] | None = None) -> Iterator[int]:
        """Sample tokens after the live context. Each yielded token is decoded into the context
        before the next is sampled (or when the generator is closed), so `self.tokens` always
        equals what the KV cache holds. The end-of-generation token, when sampled, is yielded
        and decoded too: it is part of the reply's context."""
        if not self._has_logits:
            raise EngineError("no logits to sample from: decode at least one token first")
        sampler = self._make_sampler(sampling)
        pending: int | None = None
        try:
            for _ in range(sampling.max_tokens):
                if should_stop is not None and should_stop():
                    break
                if len(self.tokens) >= self.n_ctx:
                    break
                tok = int(self._ll.llama_sampler_sample(sampler, self._ctx, -1))
                self._ll.llama_sampler_accept(sampler, tok)
                pending = tok
                yield tok
                self._decode([tok], logits_last=True)
                pending = None
                if self.is_eog(tok):
                    break
        finally:
            if pending is not None and len(self.tokens) < self.n_ctx:
                self._decode([pending], logits_last=True)
            self._ll.llama_sampler_free(sampler)

    # ------------------------------------------------------------------ KV capture / restore
    @property
    def can_cut(self) -> bool:
        return self.memory_kind == "attention"

    def _get_seq(self, seq: int) -> bytearray:
        size = int(self._ll.llama_state_seq_get_size(self._ctx, seq))
        buf = bytearray(size)
        arr = (ctypes.c_uint8 * size).from_buffer(buf)
        n = int(self._ll.llama_state_seq_get_data(self._ctx, arr, size, seq))
        del arr
        if n != size:
            raise EngineError(f"llama_state_seq_get_data wrote {n} of {size} bytes")
        return buf

    def capture(self, start: int, end: int) -> bytearray:
        """The KV state of live positions [start, end) as a seq-state blob.

        For cuttable memory this is a delta: only those cells (the scratch sequence is made to
        share exactly them, read out, and dropped). For other memories it must be the whole
        sequence (start must be 0)."""
        if end > len(self.tokens) or start < 0 or start >= end:
            raise EngineError(
                f"capture range [{start}, {end}) is outside the live context of {len(self.tokens)}"
            )
        if not self.can_cut:
            if start != 0:
                raise EngineError(f"{self.memory_kind} memory can only be captured whole")
            return self._get_seq(LIVE)
        self._ll.llama_memory_seq_rm(self._mem, SCRATCH, -1, -1)
        self._ll.llama_memory_seq_cp(self._mem, LIVE, SCRATCH, start, end)
        try:
            return self._get_seq(SCRATCH)
        finally:
            self._ll.llama_memory_seq_rm(self._mem, SCRATCH, -1, -1)

    def restore(self, blob: bytearray | bytes | memoryview, tokens: Sequence[int]) -> None:
        """Append a captured blob holding `tokens` (positions len(self.tokens)...) to the live
        context. Whole-sequence blobs (uncuttable memory) need an empty live context.
        Raises SnapshotRefused (and leaves the live context as it was) if llama.cpp rejects it
        or the result does not hold exactly the expected positions."""
        start = len(self.tokens)
        end = start + len(tokens)
        if end > self.n_ctx:
            raise SnapshotRefused(f"snapshot needs {end} positions, the context holds {self.n_ctx}")
        size = len(blob)
        try:  # writable buffers (bytearray, a private file mapping) are used in place
            arr: Any = (ctypes.c_uint8 * size).from_buffer(blob)
        except TypeError:
            arr = (ctypes.c_uint8 * size).from_buffer_copy(blob)
        if not self.can_cut or start == 0:
            if start != 0:
                raise SnapshotRefused(f"{self.memory_kind} memory restores only whole sequences")
            n = int(self._ll.llama_state_seq_set_data(self._ctx, arr, size, LIVE))
            del arr
            if n != size or self._pos_max(LIVE) != end - 1:
                self.clear()
                raise SnapshotRefused(f"llama.cpp rejected the snapshot (read {n} of {size} bytes)")
        else:
            n = int(self._ll.llama_state_seq_set_data(self._ctx, arr, size, SCRATCH))
            del arr
            ok = (
                n == size
                and self._pos_max(SCRATCH) == end - 1
                and int(self._ll.llama_memory_seq_pos_min(self._mem, SCRATCH)) == start
            )
            if ok:
                self._ll.llama_memory_seq_cp(self._mem, SCRATCH, LIVE, start, end)
            self._ll.llama_memory_seq_rm(self._mem, SCRATCH, -1, -1)
            if not ok or self._pos_max(LIVE) != end - 1:
                self._ll.llama_memory_seq_rm(self._mem, LIVE, start, -1)
                raise SnapshotRefused(
                    f"llama.cpp rejected the snapshot for positions {start}..{end} (read {n} of {size} bytes)"
                )
        self.tokens.extend(tokens)
        self._has_logits = False

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._ll.llama_batch_free(self._batch)
        self._ll.llama_free(self._ctx)
        self._ll.llama_model_free(self._model)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
