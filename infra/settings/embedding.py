"""Embedding settings: the model and its batches."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from schemas.index_generations import ModelIdentity


class EmbeddingSettings(BaseModel):
    """Which embedding model turns text into dense vectors."""

    provider: Literal["local", "gemini", "hashed"] = Field(
        default="local",
        description=(
            "Embedding model: `local` (sentence-transformers on the CPU), `gemini`, or `hashed` "
            "(hashed word and character-trigram features with no model file: fast and "
            "deterministic, but blind to meaning; for tests and tiny demos, never production)."
        ),
    )
    model: str = Field(
        default="",
        description=(
            "Path of the local provider's sentence-transformers model; empty means the "
            "packaged all-MiniLM-L6-v2."
        ),
    )
    dimensions: int = Field(
        default=384,
        ge=8,
        description=(
            "Length of each vector (count); must match the local model, and is the size asked "
            "of Gemini."
        ),
    )
    batch_size: int = Field(
        default=32,
        ge=1,
        le=256,
        description="Chunks per Kafka batch and per model call (count).",
    )
    # The API process needs only one copy (queries are single texts).
    parallelism: int = Field(
        default=0,
        ge=0,
        le=32,
        description=(
            "Single-threaded copies of the local model that share every batch (count; 0: one "
            "per CPU this process may use)."
        ),
    )
    torch_threads: int = Field(
        default=0,
        ge=0,
        description=(
            "torch threads per model copy (count; 0: 1 with several copies, torch's default "
            "with one)."
        ),
    )
    document_nice: int = Field(
        default=0,
        ge=0,
        le=19,
        description=(
            "Nice value of the threads that embed documents with the local model (0: as the "
            "process's own); a generation's build sets it higher for its own model."
        ),
    )
    # onnxruntime, single-threaded, is about 3x faster than torch for one short query, and a
    # process that only searches never loads torch. Documents are always embedded with torch,
    # which is faster for batches.
    query_runtime: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="What runs the local model for search queries: `onnx` or `torch`.",
    )
    onnx_dir: Path | None = Field(
        default=None,
        description=(
            "Cache directory of the local model's ONNX export, keyed by a hash of its weights "
            "and tokenizer; unset means `onnx` under `run_dir`."
        ),
    )
    # One by default: on two cores the API's other core is busy with the store and the requests.
    query_threads: int = Field(
        default=1,
        ge=0,
        le=32,
        description=(
            "Threads a burst of search queries is shared out to, each running a part on the "
            "one onnxruntime session (count; 0: one per CPU this process may use)."
        ),
    )
    gemini_model: str = Field(
        default="gemini-embedding-001", description="Model of the `gemini` provider."
    )
    gemini_api_key: SecretStr | None = Field(
        default=None, description="API key of the `gemini` provider (required with it)."
    )
    gemini_base_url: str | None = Field(
        default=None,
        description=(
            "Endpoint of the `gemini` provider, only to point it at a compatible one (tests, "
            "proxies)."
        ),
    )

    @property
    def identity(self) -> ModelIdentity:
        """The configured model, as a generation of the vector store records it."""
        return ModelIdentity(
            provider=self.provider, model=self._model_name(), dimensions=self.dimensions
        )

    def _model_name(self) -> str:
        if self.provider == "gemini":
            return self.gemini_model
        return self.model if self.provider == "local" else ""

    def for_model(self, identity: ModelIdentity) -> EmbeddingSettings:
        """These settings with `identity`'s model in place of the configured one (a
        generation's own model: what its vectors and queries are embedded with)."""
        update: dict[str, object] = {
            "provider": identity.provider,
            "dimensions": identity.dimensions,
        }
        if identity.provider == "gemini":
            update["gemini_model"] = identity.model
        elif identity.provider == "local":
            update["model"] = identity.model
        return self.model_copy(update=update)

    def onnx_path(self, run_dir: Path) -> Path:
        """The directory of the cached ONNX exports, for a process whose data is in `run_dir`."""
        return self.onnx_dir or run_dir / "onnx"
