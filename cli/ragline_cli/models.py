"""The parts of the API's answers the CLI reads, as typed models.

Each model declares only the fields the CLI uses and keeps the whole object it was read from,
so `--json` prints what the API answered, and a newer API's extra fields do no harm. Models are
frozen dataclasses read by `ApiModel.from_json`, which checks each declared field's type (the
CLI depends on nothing beyond httpx, typer and rich).
"""

from __future__ import annotations

import types
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Self, Union, get_args, get_origin, get_type_hints

# A document's statuses in pipeline order; `indexed` and `failed` are final.
PIPELINE = ("queued", "extracting", "chunking", "embedding", "indexing", "indexed")
FINAL_STATUSES = frozenset({"indexed", "failed"})


class UnexpectedAnswer(ValueError):
    """An answer of the API that lacks a field the CLI reads, or holds one of another type."""


@dataclass(frozen=True, kw_only=True)
class ApiModel:
    """An answer of the API: the declared fields typed, the whole object kept as it came."""

    _hints: ClassVar[dict[type, dict[str, Any]]] = {}

    @classmethod
    def from_json(cls, data: Any, where: str = "answer") -> Self:
        """Reads the declared fields of a JSON object; `UnexpectedAnswer` names the first field
        that is missing or of another type."""
        if not isinstance(data, dict):
            raise UnexpectedAnswer(f"{where}: expected an object, got {_kind(data)}")
        hints = ApiModel._hints.get(cls)
        if hints is None:
            hints = ApiModel._hints[cls] = get_type_hints(cls)
        values: dict[str, Any] = {}
        for declared in fields(cls):
            if declared.name in data:
                values[declared.name] = _read(
                    hints[declared.name], data[declared.name], f"{where}.{declared.name}"
                )
            elif declared.default is MISSING and declared.default_factory is MISSING:
                raise UnexpectedAnswer(f"{where}.{declared.name} is missing")
        model = cls(**values)
        object.__setattr__(model, "_answer", data)
        return model

    def as_json(self) -> dict[str, Any]:
        """Every field the API sent, as it sent them."""
        answer: dict[str, Any] = getattr(self, "_answer", None) or {
            declared.name: _as_json(getattr(self, declared.name)) for declared in fields(self)
        }
        return dict(answer)


def _read(kind: Any, value: Any, where: str) -> Any:
    """`value` checked (and read, for models) as the declared type `kind`."""
    origin = get_origin(kind)
    if origin in (Union, types.UnionType):
        options = get_args(kind)
        if value is None and type(None) in options:
            return None
        problems = []
        for option in (o for o in options if o is not type(None)):
            try:
                return _read(option, value, where)
            except UnexpectedAnswer as exc:
                problems.append(str(exc))
        raise UnexpectedAnswer(problems[0] if problems else f"{where}: expected null")
    if origin is list:
        if not isinstance(value, list):
            raise UnexpectedAnswer(f"{where}: expected a list, got {_kind(value)}")
        (item,) = get_args(kind)
        return [_read(item, element, f"{where}[{i}]") for i, element in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise UnexpectedAnswer(f"{where}: expected an object, got {_kind(value)}")
        _, item = get_args(kind)
        return {key: _read(item, element, f"{where}.{key}") for key, element in value.items()}
    if isinstance(kind, type) and issubclass(kind, ApiModel):
        return kind.from_json(value, where)
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind in (str, int, bool) and type(value) is kind:
        return value
    raise UnexpectedAnswer(f"{where}: expected {kind.__name__}, got {_kind(value)}")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _as_json(value: Any) -> Any:
    if isinstance(value, ApiModel):
        return value.as_json()
    if isinstance(value, list):
        return [_as_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    assert not is_dataclass(value)
    return value


@dataclass(frozen=True, kw_only=True)
class KnowledgeBase(ApiModel):
    """A knowledge base."""

    id: str
    name: str
    code: str | None = None
    status: str
    description: str = ""
    default_language: str = ""
    default_visibility: str = ""
    document_count: int = 0
    chunk_count: int = 0

    @property
    def label(self) -> str:
        """How to name it to a person: its code if it has one, else its id."""
        return self.code or self.id


@dataclass(frozen=True, kw_only=True)
class Document(ApiModel):
    """A document and its place in the pipeline."""

    id: str
    kb_id: str
    filename: str
    title: str = ""
    sha256: str = ""
    version: int = 1
    parse_status: str
    parse_error: str | None = None
    chunk_count: int | None = None
    chunks_embedded: int = 0
    stalled: bool = False

    @property
    def final(self) -> bool:
        """Indexed or failed: the pipeline is done with it."""
        return self.parse_status in FINAL_STATUSES

    def passed(self, status: str) -> bool:
        """Whether the document has gone past this pipeline status."""
        if self.parse_status not in PIPELINE or status not in PIPELINE:
            return False
        return PIPELINE.index(self.parse_status) > PIPELINE.index(status)

    @property
    def chunks_done(self) -> int:
        """Chunks embedded so far (all of them once indexed)."""
        if self.parse_status == "indexed" and self.chunk_count is not None:
            return self.chunk_count
        if self.chunk_count is None:
            return self.chunks_embedded
        return min(self.chunks_embedded, self.chunk_count)


@dataclass(frozen=True, kw_only=True)
class DocumentPage(ApiModel):
    """A page of a document listing, newest first."""

    items: list[Document]
    next_cursor: str | None = None


@dataclass(frozen=True, kw_only=True)
class IssuedToken(ApiModel):
    """A newly issued token, with its secret (shown once)."""

    id: str
    name: str
    role: str
    user_id: str | None = None
    expires_at: str | None = None
    token: str


@dataclass(frozen=True, kw_only=True)
class TokenInfo(ApiModel):
    """An issued token, without its secret."""

    id: str
    name: str
    role: str
    user_id: str | None = None
    bot_id: str | None = None
    created_at: str
    expires_at: str | None = None


@dataclass(frozen=True, kw_only=True)
class SearchResult(ApiModel):
    """One passage of a person's search."""

    content: str
    source: str
    score: float
    document_title: str
    citation: str = ""
    kb_id: str
    retrieval_rationale: str = ""


@dataclass(frozen=True, kw_only=True)
class RetrievalConfig(ApiModel):
    """A retrieval mode and, for hybrid, its fusion."""

    retrieval_mode: str
    fusion: str | None = None
    dense_weight: float | None = None
    rrf_k: int | None = None

    @property
    def label(self) -> str:
        """`hybrid convex 0.5`, `hybrid convex per query`, `hybrid rrf k=60`, `hybrid dbsf 0.5`,
        `dense` (a bot's dense settings keep a fusion they do not use)."""
        if self.retrieval_mode != "hybrid":
            return self.retrieval_mode
        if self.fusion == "rrf" and self.rrf_k is not None:
            return f"{self.retrieval_mode} rrf k={self.rrf_k}"
        if self.fusion in ("convex", "dbsf", "zscore", "gated"):
            weight = "per query" if self.dense_weight is None else f"{self.dense_weight:g}"
            return f"{self.retrieval_mode} {self.fusion} {weight}"
        return self.retrieval_mode


@dataclass(frozen=True, kw_only=True)
class Scores(ApiModel):
    """Mean figures over an evaluation's cases."""

    recall_at_k: float
    recall_at_10: float
    mrr: float
    ndcg_at_10: float


@dataclass(frozen=True, kw_only=True)
class Returned(ApiModel):
    """A hit that came back instead of what a missed case expected."""

    document_id: str
    document_title: str
    score: float
    text: str


@dataclass(frozen=True, kw_only=True)
class Miss(ApiModel):
    """A case whose expected items were not all in the top k."""

    query: str
    missing: list[str]
    returned: list[Returned] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ConfigResult(ApiModel):
    """How one configuration did, with its misses for the best of each mode."""

    config: RetrievalConfig
    scores: Scores
    misses: list[Miss] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Gain(ApiModel):
    """The best configuration against the KB's current one, case by case by nDCG@10."""

    over: RetrievalConfig
    wins: int
    losses: int
    ties: int
    difference: float
    p_value: float
    significant: bool


@dataclass(frozen=True, kw_only=True)
class Evaluation(ApiModel):
    """A kept evaluation of a knowledge base."""

    id: str
    kb_id: str
    k: int
    case_count: int
    modes: dict[str, ConfigResult]
    tried: list[ConfigResult] = field(default_factory=list)
    best: RetrievalConfig
    best_scores: Scores
    # Whether applying the best is offered: a significant gain over the KB's configuration.
    gain: Gain | None = None
    offered: bool = False


@dataclass(frozen=True, kw_only=True)
class Applied(ApiModel):
    """An evaluation's configuration applied to a bot or as a KB's default retrieval."""

    evaluation_id: str
    kb_id: str
    target: str
    bot_id: str | None = None
    config: RetrievalConfig
    scores: Scores
    # The target's retrieval settings before (None: a KB without a default) and after.
    before: RetrievalConfig | None = None
    after: RetrievalConfig


@dataclass(frozen=True, kw_only=True)
class Restored(ApiModel):
    """What a restore wrote back."""

    records: dict[str, int]
    points: int
    restarted_documents: int
