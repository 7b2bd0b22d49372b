"""Ingestion settings: files and their limits, chunking, and chunk contexts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator


class ChunkingSettings(BaseModel):
    """Sliding-window chunking: fixed-size character windows that overlap."""

    chunk_size_chars: int = Field(
        default=1200, ge=100, description="Length of a chunk's window (characters)."
    )
    chunk_overlap_chars: int = Field(
        default=180,
        ge=0,
        description=(
            "Characters consecutive chunks share; must be smaller than `chunk_size_chars`."
        ),
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingSettings:
        if self.chunk_overlap_chars >= self.chunk_size_chars:
            raise ValueError("chunk_overlap_chars must be smaller than chunk_size_chars")
        return self


class ContextualSettings(BaseModel):
    """The context prefix each chunk is embedded with: generic, or written by an LLM."""

    # Either model provider falls back to the generic prefix for a chunk whose call fails or
    # times out.
    provider: Literal["none", "openai", "gemini"] = Field(
        default="none",
        description=(
            "Who writes chunk contexts: `none` (the generic prefix of title, heading path and "
            "page), `openai` (any OpenAI-compatible chat endpoint) or `gemini`."
        ),
    )
    model: str = Field(
        default="", description="Chat model of the provider (required with a provider)."
    )
    base_url: str | None = Field(
        default=None,
        description=(
            "`openai`: the API root `/chat/completions` is under (unset: OpenAI's); `gemini`: "
            "only to point the client at a compatible endpoint (tests, proxies)."
        ),
    )
    api_key: SecretStr | None = Field(
        default=None, description="API key of the provider (required for `gemini`)."
    )
    timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Limit of one call (s); past it the chunk gets the generic prefix.",
    )
    concurrency: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Calls in flight at once for one message of the chunk stage (count).",
    )
    max_tokens: int = Field(
        default=100,
        ge=8,
        le=2000,
        description=(
            "Token limit of the model's answer (tokens); a thinking model spends it on "
            "thinking too."
        ),
    )
    around_chars: int = Field(
        default=1000,
        ge=0,
        le=20_000,
        description="Text before and after the chunk the model is shown, each side (characters).",
    )
    # So that the prefix leaves most of the embedding model's window to the chunk itself.
    max_answer_chars: int = Field(
        default=240,
        ge=40,
        le=2000,
        description="Length the model's answer is cut to, at a word (characters).",
    )

    @model_validator(mode="after")
    def _provider_needs_a_model(self) -> ContextualSettings:
        if self.provider != "none" and not self.model.strip():
            raise ValueError(f"contextual.model must be set for the {self.provider} provider")
        if self.provider == "gemini" and (
            self.api_key is None or not self.api_key.get_secret_value()
        ):
            raise ValueError("contextual.api_key must be set for the gemini provider")
        return self


class IngestSettings(BaseModel):
    """Upload limits and the pipeline's failure policy."""

    max_upload_mb: int = Field(default=20, ge=1, description="Largest file upload (MB).")
    retry_backoff_s: float = Field(
        default=0.5,
        ge=0,
        description="Wait before a stage's second try, doubled for each further one (s).",
    )
    retry_backoff_max_s: float = Field(
        default=10.0, ge=0, description="Longest wait between two tries of a stage (s)."
    )
    parse_error_max_chars: int = Field(
        default=500,
        ge=50,
        description="Length a failed document's reason is cut to (characters).",
    )
    stall_after_s: float = Field(
        default=600.0,
        gt=0,
        description="Time after which a document in progress that has not moved is stalled (s).",
    )
    ocr_enabled: bool = Field(
        default=True, description="Read PDF pages without a text layer with OCR."
    )
    ocr_max_pages: int = Field(
        default=100, ge=0, description="Most pages of a document read with OCR (count)."
    )
    # About one embedding batch, so embedding starts while a long file is still extracted.
    extract_part_chars: int = Field(
        default=32_000,
        ge=1_000,
        description=(
            "Approximate size of the parts of extracted text handed to the chunk stage "
            "(characters)."
        ),
    )
    # A part carried in its event costs MongoDB nothing; a stored one costs a write, a read and
    # a delete of GridFS files and chunks (about 7 commands). An original carried to the
    # extract stage saves it the two reads of GridFS (it is stored all the same: a re-run reads
    # it from there).
    extract_inline_max_bytes: int = Field(
        default=256 * 1024,
        ge=0,
        description=(
            "Largest part of extracted text, or original file in base64, carried in its Kafka "
            "event rather than only stored in GridFS (bytes of JSON; 0 carries none). Keep it "
            "well below `kafka.max_message_bytes`."
        ),
    )
    # What one file may make the extract stage do; each limit fails the document with a reason.
    parser_memory_mb: int = Field(
        default=2048,
        ge=512,
        description="Address-space cap of the parser process that reads a file (MB).",
    )
    max_document_chars: int = Field(
        default=20_000_000,
        ge=1_000,
        description=("Text a document may hold (characters; 20 million is about 10,000 pages)."),
    )
    max_attachments: int = Field(
        default=100, ge=0, description="Attachments an e-mail may carry (count)."
    )
    max_unpacked_mb: int = Field(
        default=256, ge=1, description="Size a packaged file (DOCX) may unpack to (MB)."
    )

    @property
    def max_upload_bytes(self) -> int:
        """The upload limit in bytes."""
        return self.max_upload_mb * 1024 * 1024

    @property
    def carried_original_max_bytes(self) -> int:
        """The largest original carried in its event: `extract_inline_max_bytes` of base64."""
        return self.extract_inline_max_bytes * 3 // 4
