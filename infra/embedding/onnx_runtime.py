"""The local model's transformer on onnxruntime, exported once from its own weights.

One short search query through torch costs 10-15 ms here; the same weights exported to ONNX
(fp32) and run by a single-threaded onnxruntime session without spinning cost about 4-5 ms,
with the same vectors (cosine 1.0000). onnxruntime's default thread pool spins on every core
and oversubscribes a small machine, so the session is pinned to one thread.

The export is cached in a directory under a name keyed by a hash of what it is made from (the
weights, the tokenizer and model configuration, the sequence length, this module's export
version): a changed model is exported again, an unchanged one is reused, and a process that
finds its export never loads torch. Tokenising, mean pooling and normalising happen here,
as sentence-transformers does them for a Transformer + mean Pooling (+ Normalize) model.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from core.errors import PermanentError
from infra.embedding.base import normalise

log = logging.getLogger(__name__)

# Bump when `export_onnx` changes what it writes: every cached export is then made again.
EXPORT_VERSION = 1
OPSET = 17
# The transformer's inputs, in the order the exported graph takes them.
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"
# Files of a model directory that decide what the export computes (weights are matched by
# suffix: `model.safetensors`, sharded `*.safetensors` and their index, `pytorch_model.bin`).
CONFIG_FILES = (
    "config.json",
    "sentence_bert_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.txt",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".safetensors.index.json", ".bin.index.json")


class OnnxUnavailable(PermanentError):
    """The local model cannot run on onnxruntime (its layout, or its export failed)."""


@dataclass(frozen=True)
class ModelLayout:
    """What the ONNX path needs to know of a sentence-transformers model directory."""

    root: Path
    transformer_dir: Path
    pooling_config: Path
    max_seq_length: int
    dimensions: int

    @property
    def name(self) -> str:
        """The model directory's name (the start of the embedder's `model_id`)."""
        return os.path.basename(str(self.root).rstrip("/"))

    @property
    def cache_name(self) -> str:
        """The start of its exports' file names: its name and a hash of where it lies (models
        elsewhere have exports of their own; an export of this one replaces the previous)."""
        where = hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:8]
        return f"{_safe(self.name)}-{where}"


def read_layout(path: Path) -> ModelLayout:
    """The model's layout, if it is one this module reproduces exactly: a Transformer whose
    tokens are mean-pooled (then optionally normalised), with a fast tokenizer."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules]
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise OnnxUnavailable(f"{path} has no readable modules.json: {exc}") from exc
    if kinds[:2] != ["Transformer", "Pooling"] or set(kinds[2:]) - {"Normalize"}:
        raise OnnxUnavailable(f"{path}: modules {kinds} are not Transformer, Pooling, Normalize")
    transformer_dir = path / str(modules[0].get("path", ""))
    pooling_config = path / str(modules[1].get("path", "")) / "config.json"
    try:
        pooling = json.loads(pooling_config.read_text())
        config = json.loads((transformer_dir / "config.json").read_text())
        st_config_file = transformer_dir / "sentence_bert_config.json"
        st_config = json.loads(st_config_file.read_text()) if st_config_file.exists() else {}
        tokenizer_config_file = transformer_dir / "tokenizer_config.json"
        tokenizer_config = (
            json.loads(tokenizer_config_file.read_text()) if tokenizer_config_file.exists() else {}
        )
    except (OSError, ValueError) as exc:
        raise OnnxUnavailable(f"{path}: unreadable configuration: {exc}") from exc
    if not _mean_pooling(pooling):
        raise OnnxUnavailable(f"{path}: pooling {pooling} is not mean pooling of all tokens")
    if st_config.get("do_lower_case"):
        raise OnnxUnavailable(f"{path}: do_lower_case is not reproduced")
    if not (transformer_dir / "tokenizer.json").is_file():
        raise OnnxUnavailable(f"{path}: no fast tokenizer (tokenizer.json)")
    # As sentence-transformers caps it: its own setting, else the tokenizer's, never beyond the
    # model's position embeddings.
    limits = [
        int(value)
        for value in (
            st_config.get("max_seq_length") or tokenizer_config.get("model_max_length"),
            config.get("max_position_embeddings"),
        )
        if isinstance(value, int | float) and value > 0
    ]
    if not limits:
        raise OnnxUnavailable(f"{path}: no maximum sequence length")
    dimensions = int(pooling.get("word_embedding_dimension") or config.get("hidden_size") or 0)
    if dimensions != config.get("hidden_size"):
        raise OnnxUnavailable(f"{path}: pooled size {dimensions} is not the hidden size")
    return ModelLayout(path, transformer_dir, pooling_config, min(limits), dimensions)


def _mean_pooling(pooling: dict[str, Any]) -> bool:
    if "pooling_mode" in pooling:
        return bool(pooling["pooling_mode"] == "mean")
    flags = {key: bool(value) for key, value in pooling.items() if key.startswith("pooling_mode_")}
    return flags.get("pooling_mode_mean_tokens", False) and sum(flags.values()) == 1


def export_key(layout: ModelLayout) -> str:
    """A hash of everything the export is made from: the weight files, the tokenizer and model
    configuration, the modules and pooling, the sequence length and the export code's version."""
    digest = hashlib.sha256(
        f"ragline-onnx-export v{EXPORT_VERSION} opset {OPSET} "
        f"max_seq_length {layout.max_seq_length}\n".encode()
    )
    files = [layout.root / "modules.json", layout.pooling_config]
    files += [layout.transformer_dir / name for name in CONFIG_FILES]
    files += [
        file
        for file in sorted(layout.transformer_dir.iterdir())
        if file.name.endswith(WEIGHT_SUFFIXES)
    ]
    for file in files:
        if not file.is_file():
            continue
        with file.open("rb") as handle:
            content = hashlib.file_digest(handle, "sha256").hexdigest()
        digest.update(f"{file.relative_to(layout.root)} {content}\n".encode())
    return digest.hexdigest()


def export_file_name(layout: ModelLayout, key: str) -> str:
    """The cached export's file name: the model's name and its export key."""
    return f"{layout.cache_name}-{key[:24]}.onnx"


def ensure_exported(layout: ModelLayout, directory: Path) -> Path:
    """The model's cached ONNX export in `directory`, exported first if missing or stale.

    Processes starting at once take turns through a lock file: the first exports, the others
    find its file. The export is written to a temporary file and renamed into place, so no
    process ever reads half a file; older exports of the same model are removed.
    """
    target = directory / export_file_name(layout, export_key(layout))
    if target.is_file():
        return target
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with _locked(_lock_file(layout, directory)):
            if target.is_file():
                return target
            _export_into_place(layout, target)
    except OnnxUnavailable:
        raise
    except Exception as exc:
        raise OnnxUnavailable(f"could not export {layout.name} to {directory}: {exc}") from exc
    return target


def load_encoder(
    layout: ModelLayout, directory: Path, batch_size: int = 32, threads: int = 1
) -> OnnxEncoder:
    """An encoder on the model's cached export (exported first if need be). A cached file
    that onnxruntime cannot load (damaged on disk) is exported again, once."""
    model_file = ensure_exported(layout, directory)
    try:
        return OnnxEncoder(model_file, layout, batch_size, threads)
    except OnnxUnavailable:
        raise
    except Exception as exc:
        log.warning(
            "the cached ONNX export %s cannot be loaded (%s): exporting again", model_file, exc
        )
    with _locked(_lock_file(layout, directory)):
        model_file.unlink(missing_ok=True)
    try:
        return OnnxEncoder(ensure_exported(layout, directory), layout, batch_size, threads)
    except OnnxUnavailable:
        raise
    except Exception as exc:
        raise OnnxUnavailable(f"the ONNX export of {layout.name} cannot be loaded: {exc}") from exc


def _lock_file(layout: ModelLayout, directory: Path) -> Path:
    return directory / f".{layout.cache_name}.lock"


def _ours(layout: ModelLayout, directory: Path, pattern: str) -> list[Path]:
    """Files in `directory` of this model's exports: `pattern` around `<name>-<key>`."""
    own = re.compile(pattern.format(re.escape(layout.cache_name) + r"-[0-9a-f]{24}"))
    return [file for file in directory.iterdir() if own.fullmatch(file.name)]


def _export_into_place(layout: ModelLayout, target: Path) -> None:
    # Left by an export that died; no export runs now (this process holds the lock).
    for leftover in _ours(layout, target.parent, r"\.{}\.onnx\.[0-9]+\.tmp"):
        leftover.unlink(missing_ok=True)
    temporary = target.parent / f".{target.name}.{os.getpid()}.tmp"
    try:
        log.info("exporting %s to ONNX (%s)", layout.name, target)
        export_onnx(layout, temporary)
        with temporary.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    directory_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)
    for stale in _ours(layout, target.parent, r"{}\.onnx"):
        if stale != target:
            stale.unlink(missing_ok=True)


@contextlib.contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    with lock_file.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "model"


def export_onnx(layout: ModelLayout, destination: Path) -> None:
    """Exports the model's transformer (token ids in, token embeddings out) to `destination`,
    with dynamic batch and sequence axes, and checks it against torch. Needs torch and onnx."""
    with warnings.catch_warnings():
        # The TorchScript exporter's deprecation notice and its tracer's notes on Python values
        # taken as constants (shapes and flags that are the same for every input of an encoder).
        warnings.simplefilter("ignore")
        _export(layout, destination)


def _export(layout: ModelLayout, destination: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import inspect

    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(layout.transformer_dir))
    model.eval()
    accepted = inspect.signature(model.forward).parameters
    names = [name for name in INPUT_NAMES if name in accepted]

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            output: torch.Tensor = self.model(**dict(zip(names, inputs, strict=True)))[0]
            return output

    # A padded row in the example, so that the traced graph keeps the attention mask's path.
    ids = torch.randint(1000, 2000, (2, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    example = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    inputs = tuple(example[name] for name in names)
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, OUTPUT_NAME]}
    with torch.no_grad():
        expected = TokenEmbeddings()(*inputs).numpy()
        torch.onnx.export(
            TokenEmbeddings(),
            inputs,
            str(destination),
            input_names=names,
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
    session = _session(destination)
    (got,) = session.run([OUTPUT_NAME], {n: x.numpy() for n, x in zip(names, inputs, strict=True)})
    difference = float(np.max(np.abs(np.asarray(got) - expected) * mask.numpy()[..., None]))
    if difference > 1e-3:
        raise OnnxUnavailable(f"the ONNX export of {layout.name} differs from torch: {difference}")


def _session(model_file: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    # One thread and no spinning: on a small CPU the default pool spins on every core and
    # slows the rest of the process (and machine) down more than it speeds one query up.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])


class OnnxEncoder:
    """Embeds texts with an exported transformer on onnxruntime: tokenised, truncated, mean
    pooled and normalised exactly as sentence-transformers does for the model."""

    def __init__(
        self, model_file: Path, layout: ModelLayout, batch_size: int = 32, threads: int = 1
    ) -> None:
        from tokenizers import Tokenizer

        self._session = _session(model_file)
        self._inputs = [entry.name for entry in self._session.get_inputs()]
        if not set(self._inputs) <= set(INPUT_NAMES):
            raise OnnxUnavailable(f"{model_file} takes unexpected inputs {self._inputs}")
        tokenizer = Tokenizer.from_file(str(layout.transformer_dir / "tokenizer.json"))
        # tokenizer.json carries its own fixed padding and truncation: replaced by the model's
        # sequence length, and padding per batch below.
        padding = tokenizer.padding
        self._pad_id = int(padding["pad_id"]) if padding else 0
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=layout.max_seq_length)
        self._tokenizer = tokenizer
        self._dimensions = layout.dimensions
        self._batch_size = batch_size
        # A burst of queries is cut into one part per thread, run on the one session at once
        # (`run` is thread-safe and releases the GIL): each part on one core.
        self._threads = max(1, threads)
        self._pool = (
            ThreadPoolExecutor(self._threads, thread_name_prefix="onnx")
            if self._threads > 1
            else None
        )

    @property
    def dimensions(self) -> int:
        """Length of each vector."""
        return self._dimensions

    def close(self) -> None:
        """Stops the threads a burst is shared out to."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised vector per text, shape (len(texts), dimensions)."""
        vectors = np.zeros((len(texts), self._dimensions), dtype=np.float32)
        if not texts:
            return vectors
        encodings = self._tokenizer.encode_batch(list(texts))
        # Texts of similar length share a batch, so that little of it is padding.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        parts = min(self._threads, len(order))
        size = min(self._batch_size, -(-len(order) // parts))
        batches = [order[start : start + size] for start in range(0, len(order), size)]
        if self._pool is None or len(batches) == 1:
            for rows in batches:
                vectors[rows] = self._run(encodings, rows)
        else:
            runs = [self._pool.submit(self._run, encodings, rows) for rows in batches]
            for rows, run in zip(batches, runs, strict=True):
                vectors[rows] = run.result()
        return normalise(vectors)

    def _run(self, encodings: Sequence[Any], rows: list[int]) -> NDArray[np.float32]:
        """The mean-pooled (not yet normalised) vectors of one batch of encoded texts."""
        width = max(len(encodings[i].ids) for i in rows)
        feeds = {
            "input_ids": np.full((len(rows), width), self._pad_id, dtype=np.int64),
            "attention_mask": np.zeros((len(rows), width), dtype=np.int64),
            "token_type_ids": np.zeros((len(rows), width), dtype=np.int64),
        }
        for row, i in enumerate(rows):
            encoding = encodings[i]
            length = len(encoding.ids)
            feeds["input_ids"][row, :length] = encoding.ids
            feeds["attention_mask"][row, :length] = encoding.attention_mask
            feeds["token_type_ids"][row, :length] = encoding.type_ids
        (tokens,) = self._session.run([OUTPUT_NAME], {name: feeds[name] for name in self._inputs})
        return _mean_pool(np.asarray(tokens, dtype=np.float32), feeds["attention_mask"])


def _mean_pool(tokens: NDArray[np.float32], mask: NDArray[np.int64]) -> NDArray[np.float32]:
    """The mean of each row's unmasked token embeddings (sentence-transformers' Pooling)."""
    weights = mask[..., np.newaxis].astype(np.float32)
    sums = (tokens * weights).sum(axis=1)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    pooled: NDArray[np.float32] = (sums / counts).astype(np.float32)
    return pooled
