"""The API's request and answer models, generated from its OpenAPI schema by
datamodel-code-generator (`python client/generate.py`): do not edit by hand."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, RootModel


class AlsoIn(BaseModel):
    """
    Another place holding (nearly) the same passage: a copy folded into the hit.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    document_id: Annotated[str, Field(title="Document Id")]
    document_title: Annotated[str, Field(title="Document Title")]
    source_name: Annotated[str, Field(title="Source Name")]
    kb_id: Annotated[str, Field(title="Kb Id")]
    page: Annotated[int | None, Field(title="Page")] = None
    chunk_index: Annotated[int, Field(title="Chunk Index")]


class Audience(BaseModel):
    """
    A tenant-local group of users that items can be shared with.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    tenant_id: Annotated[str, Field(title="Tenant Id")]
    tag: Annotated[str, Field(title="Tag")]
    description: Annotated[str | None, Field(title="Description")] = ""
    members: Annotated[list[str] | None, Field(title="Members")] = None
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]


class AudienceIn(BaseModel):
    """
    Body of `PUT /api/v1/audiences/{tag}`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    description: Annotated[str | None, Field(max_length=2000, title="Description")] = ""


class AudienceList(BaseModel):
    """
    Body of `GET /api/v1/audiences`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[Audience], Field(title="Items")]


class AudienceMembersIn(BaseModel):
    """
    Body of `PUT /api/v1/audiences/{tag}/members`: the complete member list.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    user_ids: Annotated[list[str], Field(max_length=10000, title="User Ids")]
    tenant_id: Annotated[str | None, Field(title="Tenant Id")] = None
    audience_tag: Annotated[str | None, Field(title="Audience Tag")] = None


class BodyRestoreBackupApiV1RestoresPost(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    file: Annotated[
        str,
        Field(
            json_schema_extra={"contentMediaType": "application/octet-stream"},
            title="File",
        ),
    ]
    """
    a snapshot tar from `POST /backups`
    """


class KbIds(RootModel[list[str]]):
    root: Annotated[list[str], Field(max_length=100, title="Kb Ids")]


class TopK(RootModel[int]):
    root: Annotated[int, Field(ge=1, le=10, title="Top K")]


class ScoreThreshold(RootModel[float]):
    root: Annotated[float, Field(ge=0.0, le=1.0, title="Score Threshold")]


class MaxContextTokens(RootModel[int]):
    root: Annotated[int, Field(ge=16, le=200000, title="Max Context Tokens")]


class UserId(RootModel[str]):
    root: Annotated[str, Field(pattern="^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$", title="User Id")]


class BotSearchOptions(BaseModel):
    """
    The query of a bot's search and the overrides of its knowledge settings it allows (left
    out: the bot's own); the admin's search playground takes exactly these.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    query: Annotated[str, Field(max_length=2000, min_length=1, pattern="\\S", title="Query")]
    kb_ids: Annotated[KbIds | None, Field(title="Kb Ids")] = None
    top_k: Annotated[TopK | None, Field(title="Top K")] = None
    score_threshold: Annotated[ScoreThreshold | None, Field(title="Score Threshold")] = None
    strict: Annotated[bool | None, Field(title="Strict")] = None
    max_context_tokens: Annotated[MaxContextTokens | None, Field(title="Max Context Tokens")] = None
    user_id: Annotated[UserId | None, Field(title="User Id")] = None


class TurnId(RootModel[str]):
    root: Annotated[str, Field(max_length=200, title="Turn Id")]


class BotSearchRequest(BaseModel):
    """
    A bot's search: the bot's attached, active KBs, narrowed by `kb_ids` if given.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    query: Annotated[str, Field(max_length=2000, min_length=1, pattern="\\S", title="Query")]
    kb_ids: Annotated[KbIds | None, Field(title="Kb Ids")] = None
    top_k: Annotated[TopK | None, Field(title="Top K")] = None
    score_threshold: Annotated[ScoreThreshold | None, Field(title="Score Threshold")] = None
    strict: Annotated[bool | None, Field(title="Strict")] = None
    max_context_tokens: Annotated[MaxContextTokens | None, Field(title="Max Context Tokens")] = None
    user_id: Annotated[UserId | None, Field(title="User Id")] = None
    bot_id: Annotated[str, Field(max_length=100, min_length=1, title="Bot Id")]
    session_id: Annotated[str, Field(max_length=200, min_length=1, title="Session Id")]
    turn_id: Annotated[TurnId | None, Field(title="Turn Id")] = None


class ExpiresInS(RootModel[int]):
    root: Annotated[int, Field(ge=1, le=315360000, title="Expires In S")]


class BotTokenCreate(BaseModel):
    """
    Body of `POST /api/v1/bots/{bot_id}/tokens`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    name: Annotated[str | None, Field(max_length=200, min_length=1, title="Name")] = "agent"
    expires_in_s: Annotated[ExpiresInS | None, Field(title="Expires In S")] = None


class Name(RootModel[str]):
    root: Annotated[str, Field(max_length=200, min_length=1, title="Name")]


class CacheHits(BaseModel):
    """
    Which cache layers answered.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    access: Annotated[bool | None, Field(title="Access")] = False
    embedding: Annotated[bool | None, Field(title="Embedding")] = False
    result: Annotated[bool | None, Field(title="Result")] = False


class CrawlCounts(BaseModel):
    """
    What a crawl did so far.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    seen: Annotated[int | None, Field(title="Seen")] = 0
    fetched: Annotated[int | None, Field(title="Fetched")] = 0
    unchanged: Annotated[int | None, Field(title="Unchanged")] = 0
    failed: Annotated[int | None, Field(title="Failed")] = 0
    removed: Annotated[int | None, Field(title="Removed")] = 0


class Url(RootModel[str]):
    root: Annotated[str, Field(max_length=2048, min_length=8, pattern="^https?://\\S+$")]


class FileUrl(RootModel[str]):
    root: Annotated[str, Field(max_length=2048, min_length=8, pattern="^https?://\\S+$")]


class MaxPages(RootModel[int]):
    root: Annotated[int, Field(ge=1, le=100000, title="Max Pages")]


class MaxDepth(RootModel[int]):
    root: Annotated[int, Field(ge=0, le=20, title="Max Depth")]


class CrawlJobCreate(BaseModel):
    """
    Body of `POST .../crawl-jobs`: left out, the KB's `urls` and `files` and the
    configured limits.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    urls: Annotated[list[Url] | None, Field(max_length=100, title="Urls")] = None
    file_urls: Annotated[list[FileUrl] | None, Field(max_length=1000, title="File Urls")] = None
    max_pages: Annotated[MaxPages | None, Field(title="Max Pages")] = None
    max_depth: Annotated[MaxDepth | None, Field(title="Max Depth")] = None
    include: Annotated[list[str] | None, Field(max_length=50, title="Include")] = None
    exclude: Annotated[list[str] | None, Field(max_length=50, title="Exclude")] = None


class CrawlUrlError(BaseModel):
    """
    Why one URL was not taken.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    url: Annotated[str, Field(title="Url")]
    reason: Annotated[str, Field(title="Reason")]
    transient: Annotated[bool | None, Field(title="Transient")] = False


class DeadLetterEntry(BaseModel):
    """
    A message a pipeline stage gave up on, and why.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    stage: Annotated[str, Field(title="Stage")]
    tenant_id: Annotated[str | None, Field(title="Tenant Id")] = None
    kb_id: Annotated[str | None, Field(title="Kb Id")] = None
    document_id: Annotated[str | None, Field(title="Document Id")] = None
    error: Annotated[str, Field(title="Error")]
    attempts: Annotated[int, Field(title="Attempts")]
    count: Annotated[int | None, Field(title="Count")] = 1
    at: Annotated[AwareDatetime, Field(title="At")]
    size_bytes: Annotated[int, Field(title="Size Bytes")]
    redriven_at: Annotated[AwareDatetime | None, Field(title="Redriven At")] = None


class DeadLetterPage(BaseModel):
    """
    Body of `GET /api/v1/dead-letters`: newest first; pass the last `at` as `before`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[DeadLetterEntry], Field(title="Items")]


class DocumentContent(BaseModel):
    """
    Body of `GET .../documents/{document_id}/content`: the item's extracted text.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    document_id: Annotated[str, Field(title="Document Id")]
    title: Annotated[str, Field(title="Title")]
    content: Annotated[str, Field(title="Content")]


class ExpectedItem(RootModel[str]):
    root: Annotated[str, Field(max_length=2000, pattern="\\S")]


class EvaluationCase(BaseModel):
    """
    A question and what a good answer contains: document ids of the KB, or text snippets
    that a relevant passage holds (case and spacing are ignored).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    query: Annotated[str, Field(max_length=2000, min_length=1, pattern="\\S", title="Query")]
    expected: Annotated[list[ExpectedItem], Field(max_length=20, min_length=1, title="Expected")]


class EvaluationRequest(BaseModel):
    """
    Body of `POST /api/v1/knowledge-bases/{kb_id}/evaluations`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    cases: Annotated[list[EvaluationCase], Field(max_length=100, min_length=1, title="Cases")]
    k: Annotated[int | None, Field(ge=1, le=10, title="K")] = 4


class FieldProblem(BaseModel):
    """
    One invalid field of a request: where it is (`records.0.content`, `query.limit`) and
    what is wrong with it.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    field: Annotated[str, Field(title="Field")]
    message: Annotated[str, Field(title="Message")]


class FunctionTools(BaseModel):
    """
    Body of `GET /api/v1/bots/{bot_id}/tools`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    openai: Annotated[list[dict[str, Any]], Field(title="Openai")]
    gemini: Annotated[dict[str, list[dict[str, Any]]], Field(title="Gemini")]
    system_instructions: Annotated[str, Field(title="System Instructions")]


class AudienceTags(RootModel[list[str]]):
    root: Annotated[list[str], Field(max_length=100, title="Audience Tags")]


class UserGrants(RootModel[list[str]]):
    root: Annotated[list[str], Field(max_length=1000, title="User Grants")]


class OwnerUserId(RootModel[str]):
    root: Annotated[
        str, Field(pattern="^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$", title="Owner User Id")
    ]


class Tags(RootModel[list[str]]):
    root: Annotated[list[str], Field(max_length=100, title="Tags")]


class Health(BaseModel):
    """
    Body of `GET /healthz`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    status: Annotated[Literal["ok"], Field(title="Status")]


class Url1(RootModel[str]):
    root: Annotated[str, Field(max_length=2048, title="Url")]


class KeyedRecord(BaseModel):
    """
    A record of a batch or a full sync: upserted by its `external_id`, which it must have.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    external_id: Annotated[str, Field(max_length=512, min_length=1, title="External Id")]
    title: Annotated[str | None, Field(max_length=500, title="Title")] = ""
    content: Annotated[str, Field(max_length=5000000, min_length=1, title="Content")]
    url: Annotated[Url1 | None, Field(title="Url")] = None
    metadata: Annotated[dict[str, Any] | None, Field(title="Metadata")] = None


class Code(RootModel[str]):
    root: Annotated[
        str, Field(max_length=32, pattern="^[a-z0-9](?:[a-z0-9-]{0,31})$", title="Code")
    ]


class Url2(RootModel[str]):
    root: Annotated[str, Field(max_length=2048, min_length=8, pattern="^https?://\\S+$")]


class File(RootModel[str]):
    root: Annotated[str, Field(max_length=2048, min_length=8, pattern="^https?://\\S+$")]


class Description(RootModel[str]):
    root: Annotated[str, Field(max_length=5000, title="Description")]


class DefaultLanguage(RootModel[str]):
    root: Annotated[str, Field(max_length=16, min_length=2, title="Default Language")]


class Urls(RootModel[list[Url2]]):
    root: Annotated[list[Url2], Field(max_length=1000, title="Urls")]


class Files(RootModel[list[File]]):
    root: Annotated[list[File], Field(max_length=1000, title="Files")]


class DenseWeight(RootModel[float]):
    root: Annotated[float, Field(ge=0.0, le=1.0, title="Dense Weight")]


class KnowledgeConfig(BaseModel):
    """
    How a bot searches: which KBs, how many hits, how sure, and what to say otherwise.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    enabled: Annotated[bool | None, Field(title="Enabled")] = False
    kb_ids: Annotated[list[str] | None, Field(max_length=100, title="Kb Ids")] = None
    top_k: Annotated[int | None, Field(ge=1, le=10, title="Top K")] = 4
    score_threshold: Annotated[float | None, Field(ge=0.0, le=1.0, title="Score Threshold")] = 0.55
    strict: Annotated[bool | None, Field(title="Strict")] = True
    trigger_instructions: Annotated[
        str | None, Field(max_length=4000, title="Trigger Instructions")
    ] = ""
    fallback_message: Annotated[
        str | None, Field(max_length=1000, min_length=1, title="Fallback Message")
    ] = "Sorry, I could not find that in my knowledge base."
    retrieval_mode: Annotated[Literal["dense", "hybrid"] | None, Field(title="Retrieval Mode")] = (
        "hybrid"
    )
    fusion: Annotated[
        Literal["convex", "rrf", "dbsf", "zscore", "gated"] | None,
        Field(title="Fusion"),
    ] = "convex"
    dense_weight: Annotated[DenseWeight | None, Field(title="Dense Weight")] = None
    rrf_k: Annotated[int | None, Field(ge=1, le=1000, title="Rrf K")] = 60
    max_context_tokens: Annotated[MaxContextTokens | None, Field(title="Max Context Tokens")] = None


class KnowledgePatch(BaseModel):
    """
    A partial change of a bot's knowledge attachment: only the fields given change
    (`max_context_tokens: null` removes the limit, `dense_weight: null` has it chosen per
    query; no other field may be null).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    enabled: Annotated[bool | None, Field(title="Enabled")] = None
    kb_ids: Annotated[list[str] | None, Field(max_length=100, title="Kb Ids")] = None
    top_k: Annotated[int | None, Field(ge=1, le=10, title="Top K")] = None
    score_threshold: Annotated[float | None, Field(ge=0.0, le=1.0, title="Score Threshold")] = None
    strict: Annotated[bool | None, Field(title="Strict")] = None
    trigger_instructions: Annotated[
        str | None, Field(max_length=4000, title="Trigger Instructions")
    ] = None
    fallback_message: Annotated[
        str | None, Field(max_length=1000, min_length=1, title="Fallback Message")
    ] = None
    retrieval_mode: Annotated[Literal["dense", "hybrid"] | None, Field(title="Retrieval Mode")] = (
        None
    )
    fusion: Annotated[
        Literal["convex", "rrf", "dbsf", "zscore", "gated"] | None,
        Field(title="Fusion"),
    ] = None
    dense_weight: Annotated[DenseWeight | None, Field(title="Dense Weight")] = None
    rrf_k: Annotated[int | None, Field(ge=1, le=1000, title="Rrf K")] = None
    max_context_tokens: Annotated[MaxContextTokens | None, Field(title="Max Context Tokens")] = None


class KnowledgeResult(BaseModel):
    """
    One hit of a person's search: the passage, its source, score and place, then where to
    cite it.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    content: Annotated[str, Field(title="Content")]
    source: Annotated[str, Field(title="Source")]
    score: Annotated[float, Field(title="Score")]
    document_title: Annotated[str, Field(title="Document Title")]
    chunk_index: Annotated[int, Field(title="Chunk Index")]
    retrieval_rationale: Annotated[str, Field(title="Retrieval Rationale")]
    kb_id: Annotated[str, Field(title="Kb Id")]
    page: Annotated[int | None, Field(title="Page")] = None
    heading_path: Annotated[list[str] | None, Field(title="Heading Path")] = None
    url: Annotated[str | None, Field(title="Url")] = None
    citation: Annotated[str, Field(title="Citation")]
    also_in: Annotated[list[AlsoIn] | None, Field(title="Also In")] = None


class SessionId(RootModel[str]):
    root: Annotated[str, Field(max_length=200, title="Session Id")]


class KnowledgeSearchRequest(BaseModel):
    """
    A person's search over their tenant's active KBs, as their token allows.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    query: Annotated[str, Field(max_length=2000, min_length=1, pattern="\\S", title="Query")]
    kb_ids: Annotated[KbIds | None, Field(title="Kb Ids")] = None
    top_k: Annotated[int | None, Field(ge=1, le=50, title="Top K")] = 5
    retrieval_mode: Annotated[
        Literal["dense", "sparse", "hybrid"] | None, Field(title="Retrieval Mode")
    ] = None
    """
    left out: the searched knowledge bases' default retrieval when they all have the same one (an evaluation applied to them), else hybrid
    """
    score_threshold: Annotated[ScoreThreshold | None, Field(title="Score Threshold")] = None
    max_context_tokens: Annotated[MaxContextTokens | None, Field(title="Max Context Tokens")] = None
    session_id: Annotated[SessionId | None, Field(title="Session Id")] = None
    turn_id: Annotated[TurnId | None, Field(title="Turn Id")] = None


class MigrationProgress(BaseModel):
    """
    How far a building generation is: its copy of the live chunks, then its checks.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    total: Annotated[int | None, Field(title="Total")] = 0
    done: Annotated[int | None, Field(title="Done")] = 0
    cursor: Annotated[str | None, Field(title="Cursor")] = None
    copied: Annotated[bool | None, Field(title="Copied")] = False
    check_pass: Annotated[int | None, Field(title="Check Pass")] = 0
    mended: Annotated[int | None, Field(title="Mended")] = 0
    started_at: Annotated[AwareDatetime | None, Field(title="Started At")] = None
    updated_at: Annotated[AwareDatetime | None, Field(title="Updated At")] = None
    rate_per_s: Annotated[float | None, Field(title="Rate Per S")] = 0.0


class ModelIdentity(BaseModel):
    """
    An embedding model, as its vectors are told apart: provider, model and vector size.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    provider: Annotated[Literal["local", "gemini", "hashed"], Field(title="Provider")]
    model: Annotated[str | None, Field(title="Model")] = ""
    dimensions: Annotated[int, Field(ge=1, title="Dimensions")]


class PlaygroundHit(BaseModel):
    """
    A hit of the bot's search, with where to cite it.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    score: Annotated[float, Field(title="Score")]
    chunk_text: Annotated[str, Field(title="Chunk Text")]
    document_id: Annotated[str, Field(title="Document Id")]
    document_title: Annotated[str, Field(title="Document Title")]
    source_name: Annotated[str, Field(title="Source Name")]
    kb_id: Annotated[str, Field(title="Kb Id")]
    chunk_index: Annotated[int, Field(title="Chunk Index")]
    page: Annotated[int | None, Field(title="Page")] = None
    heading_path: Annotated[list[str] | None, Field(title="Heading Path")] = None
    url: Annotated[str | None, Field(title="Url")] = None
    retrieval_rationale: Annotated[str, Field(title="Retrieval Rationale")]
    also_in: Annotated[list[AlsoIn] | None, Field(title="Also In")] = None
    indexed_at: Annotated[str | None, Field(title="Indexed At")] = None
    citation: Annotated[str, Field(title="Citation")]


class Readiness(BaseModel):
    """
    Body of `GET /readyz`: `ready`, or why not, with each dependency's state.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    status: Annotated[Literal["ready", "not ready", "starting"], Field(title="Status")]
    checks: Annotated[dict[str, str] | None, Field(title="Checks")] = None


class Url4(RootModel[str]):
    root: Annotated[str, Field(max_length=2048, title="Url")]


class RecordReplace(BaseModel):
    """
    Body of `PUT .../documents/{document_id}`: a record's new title, body and URL (its
    external id and permissions stay).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    title: Annotated[str | None, Field(max_length=500, title="Title")] = ""
    content: Annotated[str, Field(max_length=5000000, min_length=1, title="Content")]
    url: Annotated[Url4 | None, Field(title="Url")] = None
    metadata: Annotated[dict[str, Any] | None, Field(title="Metadata")] = None


class RedriveOut(BaseModel):
    """
    A dead letter started again: its document's new run (none for a connector record).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    stage: Annotated[str, Field(title="Stage")]
    document_id: Annotated[str | None, Field(title="Document Id")] = None


class RestoreOut(BaseModel):
    """
    Answer of `POST /api/v1/restores`: what was written back.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    records: Annotated[dict[str, int], Field(title="Records")]
    """
    records written back, per MongoDB collection
    """
    points: Annotated[int, Field(title="Points")]
    """
    vector-store points written back
    """
    restarted_documents: Annotated[int, Field(title="Restarted Documents")]
    """
    documents the snapshot caught in progress, started through the pipeline again
    """


class RrfK(RootModel[int]):
    root: Annotated[int, Field(ge=1, le=1000, title="Rrf K")]


class RetrievalConfig(BaseModel):
    """
    A way to search: a retrieval mode and, for hybrid, how its rankings are fused (what an
    evaluation tries, and a KB's default for the searches no bot's settings govern).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    retrieval_mode: Annotated[Literal["dense", "sparse", "hybrid"], Field(title="Retrieval Mode")]
    fusion: Annotated[
        Literal["convex", "rrf", "dbsf", "zscore", "gated"] | None,
        Field(title="Fusion"),
    ] = None
    dense_weight: Annotated[DenseWeight | None, Field(title="Dense Weight")] = None
    rrf_k: Annotated[RrfK | None, Field(title="Rrf K")] = None


class Returned(BaseModel):
    """
    A hit that came back for a missed case.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    document_id: Annotated[str, Field(title="Document Id")]
    document_title: Annotated[str, Field(title="Document Title")]
    score: Annotated[float, Field(title="Score")]
    text: Annotated[str, Field(title="Text")]


class Scores(BaseModel):
    """
    Mean figures over the cases (definitions in the README).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    recall_at_k: Annotated[float, Field(title="Recall At K")]
    recall_at_10: Annotated[float, Field(title="Recall At 10")]
    mrr: Annotated[float, Field(title="Mrr")]
    ndcg_at_10: Annotated[float, Field(title="Ndcg At 10")]


class SearchHit(BaseModel):
    """
    One retrieved passage: adjacent chunks of a document come merged as one, and copies of
    it in other documents are listed in `also_in` instead of taking places of their own.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    score: Annotated[float, Field(title="Score")]
    chunk_text: Annotated[str, Field(title="Chunk Text")]
    document_id: Annotated[str, Field(title="Document Id")]
    document_title: Annotated[str, Field(title="Document Title")]
    source_name: Annotated[str, Field(title="Source Name")]
    kb_id: Annotated[str, Field(title="Kb Id")]
    chunk_index: Annotated[int, Field(title="Chunk Index")]
    page: Annotated[int | None, Field(title="Page")] = None
    heading_path: Annotated[list[str] | None, Field(title="Heading Path")] = None
    url: Annotated[str | None, Field(title="Url")] = None
    retrieval_rationale: Annotated[str, Field(title="Retrieval Rationale")]
    also_in: Annotated[list[AlsoIn] | None, Field(title="Also In")] = None
    indexed_at: Annotated[str | None, Field(title="Indexed At")] = None


class SearchMetrics(BaseModel):
    """
    Where the time went, in milliseconds, step by step (`services.search.clock` says what
    each step is); `vector_search_ms` is ranking and fetch together.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    access_ms: Annotated[float | None, Field(title="Access Ms")] = 0.0
    limit_ms: Annotated[float | None, Field(title="Limit Ms")] = 0.0
    cache_ms: Annotated[float | None, Field(title="Cache Ms")] = 0.0
    embedding_ms: Annotated[float | None, Field(title="Embedding Ms")] = 0.0
    ranking_ms: Annotated[float | None, Field(title="Ranking Ms")] = 0.0
    fetch_ms: Annotated[float | None, Field(title="Fetch Ms")] = 0.0
    shaping_ms: Annotated[float | None, Field(title="Shaping Ms")] = 0.0
    writes_ms: Annotated[float | None, Field(title="Writes Ms")] = 0.0
    vector_search_ms: Annotated[float | None, Field(title="Vector Search Ms")] = 0.0
    total_ms: Annotated[float | None, Field(title="Total Ms")] = 0.0
    cache: CacheHits | None = None
    generation: Annotated[int | None, Field(title="Generation")] = None


class SearchResponse(BaseModel):
    """
    Body of the internal search's answer.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    hits: Annotated[list[SearchHit], Field(title="Hits")]
    metrics: SearchMetrics | None = None
    fallback_message: Annotated[str | None, Field(title="Fallback Message")] = None


class StoredChunk(BaseModel):
    """
    A chunk as the vector store holds it.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    chunk_index: Annotated[int, Field(title="Chunk Index")]
    chunk_text: Annotated[str, Field(title="Chunk Text")]
    context: Annotated[str | None, Field(title="Context")] = ""
    active: Annotated[bool, Field(title="Active")]
    page: Annotated[int | None, Field(title="Page")] = None
    heading_path: Annotated[list[str] | None, Field(title="Heading Path")] = None
    start: Annotated[int | None, Field(title="Start")] = None
    end: Annotated[int | None, Field(title="End")] = None
    version: Annotated[int | None, Field(title="Version")] = None


class StoredChunks(BaseModel):
    """
    Body of `GET .../documents/{document_id}/chunks`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[StoredChunk], Field(title="Items")]


class TenantSearchRequest(BaseModel):
    """
    Admin tooling's search over a tenant's active KBs, in any retrieval mode.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    tenant_id: Annotated[str, Field(max_length=200, min_length=1, title="Tenant Id")]
    kb_ids: Annotated[list[str], Field(max_length=100, title="Kb Ids")]
    query: Annotated[str, Field(max_length=2000, min_length=1, pattern="\\S", title="Query")]
    top_k: Annotated[int | None, Field(ge=1, le=50, title="Top K")] = 4
    score_threshold: Annotated[float | None, Field(ge=0.0, le=1.0, title="Score Threshold")] = 0.0
    retrieval_mode: Annotated[
        Literal["dense", "sparse", "hybrid"] | None, Field(title="Retrieval Mode")
    ] = "hybrid"
    fusion: Annotated[
        Literal["convex", "rrf", "dbsf", "zscore", "gated"] | None,
        Field(title="Fusion"),
    ] = "convex"
    dense_weight: Annotated[DenseWeight | None, Field(title="Dense Weight")] = None
    rrf_k: Annotated[int | None, Field(ge=1, le=1000, title="Rrf K")] = 60
    max_context_tokens: Annotated[MaxContextTokens | None, Field(title="Max Context Tokens")] = None


class TokenCreate(BaseModel):
    """
    Body of `POST /api/v1/tokens`: a user token names its user.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    name: Annotated[str, Field(max_length=200, min_length=1, title="Name")]
    role: Annotated[Literal["admin", "user", "bot"] | None, Field(title="Role")] = "user"
    """
    What a token may do within its tenant.
    """
    user_id: Annotated[UserId | None, Field(title="User Id")] = None
    expires_in_s: Annotated[ExpiresInS | None, Field(title="Expires In S")] = None


class TokenInfo(BaseModel):
    """
    An issued token as it may be shown again: everything but its secret.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    tenant_id: Annotated[str, Field(title="Tenant Id")]
    role: Annotated[Literal["admin", "user", "bot"], Field(title="Role")]
    """
    What a token may do within its tenant.
    """
    name: Annotated[str, Field(title="Name")]
    user_id: Annotated[str | None, Field(title="User Id")] = None
    bot_id: Annotated[str | None, Field(title="Bot Id")] = None
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    expires_at: Annotated[AwareDatetime | None, Field(title="Expires At")] = None


class TokenList(BaseModel):
    """
    Body of `GET /api/v1/tokens`: the tenant's tokens, without their secrets.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[TokenInfo], Field(title="Items")]


class TokenOut(BaseModel):
    """
    A newly created token; the secret is shown once.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    name: Annotated[str, Field(title="Name")]
    tenant_id: Annotated[str, Field(title="Tenant Id")]
    role: Annotated[Literal["admin", "user", "bot"], Field(title="Role")]
    """
    What a token may do within its tenant.
    """
    user_id: Annotated[str | None, Field(title="User Id")] = None
    bot_id: Annotated[str | None, Field(title="Bot Id")] = None
    expires_at: Annotated[AwareDatetime | None, Field(title="Expires At")] = None
    token: Annotated[str, Field(title="Token")]


class User(BaseModel):
    """
    A person of a tenant, known by the id the tenant's identity provider gives them.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    tenant_id: Annotated[str, Field(title="Tenant Id")]
    user_id: Annotated[str, Field(title="User Id")]
    display_name: Annotated[str | None, Field(title="Display Name")] = ""
    created_at: Annotated[AwareDatetime, Field(title="Created At")]


class UserIn(BaseModel):
    """
    Body of `PUT /api/v1/users/{user_id}`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    display_name: Annotated[str | None, Field(max_length=200, title="Display Name")] = ""


class UserList(BaseModel):
    """
    Body of `GET /api/v1/users`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[User], Field(title="Items")]


class ValidationError(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    loc: Annotated[list[str | int], Field(title="Location")]
    msg: Annotated[str, Field(title="Message")]
    type: Annotated[str, Field(title="Error Type")]
    input: Annotated[Any | None, Field(title="Input")] = None
    ctx: Annotated[dict[str, Any] | None, Field(title="Context")] = None


class WikiPageIn(BaseModel):
    """
    Body of `POST /api/v1/knowledge/wiki`: creates a page or a new version of it.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    kb_id: Annotated[str, Field(min_length=1, title="Kb Id")]
    topic: Annotated[str, Field(pattern="^[a-z0-9][a-z0-9-]{0,127}$", title="Topic")]
    title: Annotated[str, Field(max_length=500, min_length=1, title="Title")]
    summary: Annotated[str | None, Field(max_length=2000, title="Summary")] = ""
    content: Annotated[str, Field(max_length=2000000, min_length=1, pattern="\\S", title="Content")]
    tags: Annotated[list[str] | None, Field(title="Tags")] = None
    visibility_mode: Literal["private", "shared", "restricted"] | None = None
    audience_tags: Annotated[list[str] | None, Field(title="Audience Tags")] = None
    user_grants: Annotated[list[str] | None, Field(title="User Grants")] = None
    owner_user_id: Annotated[str | None, Field(title="Owner User Id")] = None
    tenant_id: Annotated[str | None, Field(title="Tenant Id")] = None


class WikiPageOut(BaseModel):
    """
    A wiki page: its newest version's text and status, and its governance.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    topic: Annotated[str, Field(title="Topic")]
    kb_id: Annotated[str, Field(title="Kb Id")]
    document_id: Annotated[str, Field(title="Document Id")]
    title: Annotated[str, Field(title="Title")]
    summary: Annotated[str, Field(title="Summary")]
    content: Annotated[str | None, Field(title="Content")] = None
    version: Annotated[int, Field(title="Version")]
    parse_status: Annotated[
        Literal[
            "queued",
            "extracting",
            "chunking",
            "embedding",
            "indexing",
            "indexed",
            "failed",
            "deleting",
        ],
        Field(title="ParseStatus"),
    ]
    """
    Where a document is in the ingestion pipeline.
    """
    knowledge_item_id: Annotated[str, Field(title="Knowledge Item Id")]
    owner_user_id: Annotated[str | None, Field(title="Owner User Id")]
    creator_user_id: Annotated[str | None, Field(title="Creator User Id")]
    visibility_mode: Annotated[
        Literal["private", "shared", "restricted"], Field(title="Visibility")
    ]
    """
    Who may read an item, before grants and audiences narrow or widen it.
    """
    audience_tags: Annotated[list[str], Field(title="Audience Tags")]
    user_grants: Annotated[list[str], Field(title="User Grants")]
    tags: Annotated[list[str], Field(title="Tags")]
    archived_at: Annotated[AwareDatetime | None, Field(title="Archived At")]
    last_error: Annotated[str | None, Field(title="Last Error")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]


class Applied(BaseModel):
    """
    What an evaluation's configuration was applied to, and the target's retrieval
    settings before and after.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    evaluation_id: Annotated[str, Field(title="Evaluation Id")]
    kb_id: Annotated[str, Field(title="Kb Id")]
    target: Annotated[Literal["bot", "kb"], Field(title="Target")]
    bot_id: Annotated[str | None, Field(title="Bot Id")] = None
    config: RetrievalConfig
    scores: Scores
    before: RetrievalConfig | None
    after: RetrievalConfig


class ApplyToBot(BaseModel):
    """
    Apply a configuration to a bot's knowledge settings (the bot must have the KB
    attached; bots search dense or hybrid, not sparse).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    target: Annotated[Literal["bot"], Field(title="Target")]
    bot_id: Annotated[str, Field(max_length=100, min_length=1, title="Bot Id")]
    config: RetrievalConfig | None = None


class ApplyToKb(BaseModel):
    """
    Apply a configuration as the KB's default retrieval: people's searches of the KB use
    it when they do not name a mode.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    target: Annotated[Literal["kb"], Field(title="Target")]
    config: RetrievalConfig | None = None


class AuditEntry(BaseModel):
    """
    One change asked of the API: who, what, when, and how it ended.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    tenant_id: Annotated[str, Field(title="Tenant Id")]
    at: Annotated[AwareDatetime, Field(title="At")]
    token_id: Annotated[str, Field(title="Token Id")]
    user_id: Annotated[str | None, Field(title="User Id")] = None
    role: Annotated[Literal["admin", "user", "bot"], Field(title="Role")]
    """
    What a token may do within its tenant.
    """
    method: Annotated[str, Field(title="Method")]
    path: Annotated[str, Field(title="Path")]
    status: Annotated[int, Field(title="Status")]
    outcome: Annotated[str, Field(title="Outcome")]
    details: Annotated[dict[str, Any] | None, Field(title="Details")] = None


class AuditPage(BaseModel):
    """
    Body of `GET /api/v1/audit`: newest first; pass the last `at` as `before` for more.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[AuditEntry], Field(title="Items")]


class BatchIn(BaseModel):
    """
    Body of `POST .../documents/batch`: records upserted by `external_id`, with who may
    read them (`visibility_mode`, `audience_tags`, `user_grants`, `owner_user_id`).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    records: Annotated[list[KeyedRecord], Field(max_length=1000, min_length=1, title="Records")]
    visibility_mode: Literal["private", "shared", "restricted"] | None = None
    audience_tags: Annotated[list[str] | None, Field(title="Audience Tags")] = None
    user_grants: Annotated[list[str] | None, Field(title="User Grants")] = None
    owner_user_id: Annotated[str | None, Field(title="Owner User Id")] = None
    tags: Annotated[list[str] | None, Field(title="Tags")] = None
    confirm_tenant_wide: Annotated[bool | None, Field(title="Confirm Tenant Wide")] = False


class Bot(BaseModel):
    """
    An agent or voice bot that searches knowledge.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    tenant_id: Annotated[str, Field(title="Tenant Id")]
    name: Annotated[str, Field(title="Name")]
    knowledge: KnowledgeConfig
    revision: Annotated[int | None, Field(title="Revision")] = 0
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]


class BotCreate(BaseModel):
    """
    Body of `POST /api/v1/bots`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    name: Annotated[str, Field(max_length=200, min_length=1, title="Name")]
    knowledge: KnowledgeConfig | None = None


class BotList(BaseModel):
    """
    Body of `GET /api/v1/bots`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[Bot], Field(title="Items")]


class BotUpdate(BaseModel):
    """
    Body of `PATCH /api/v1/bots/{bot_id}`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    name: Annotated[Name | None, Field(title="Name")] = None
    knowledge: KnowledgePatch | None = None


class CrawlJob(BaseModel):
    """
    A crawl of a KB's pages and files.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    tenant_id: Annotated[str, Field(title="Tenant Id")]
    kb_id: Annotated[str, Field(title="Kb Id")]
    state: Annotated[
        Literal["created", "queued", "started", "completed", "failed", "cancelled"],
        Field(title="CrawlState"),
    ]
    """
    Where a crawl job is: created → queued → started → completed | failed (or cancelled).
    """
    urls: Annotated[list[str], Field(title="Urls")]
    file_urls: Annotated[list[str], Field(title="File Urls")]
    max_pages: Annotated[int, Field(title="Max Pages")]
    max_depth: Annotated[int, Field(title="Max Depth")]
    include: Annotated[list[str], Field(title="Include")]
    exclude: Annotated[list[str], Field(title="Exclude")]
    counts: CrawlCounts | None = None
    errors: Annotated[list[CrawlUrlError] | None, Field(title="Errors")] = None
    enqueued: Annotated[int | None, Field(title="Enqueued")] = 0
    done: Annotated[int | None, Field(title="Done")] = 0
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    queued_at: Annotated[AwareDatetime | None, Field(title="Queued At")] = None
    started_at: Annotated[AwareDatetime | None, Field(title="Started At")] = None
    finished_at: Annotated[AwareDatetime | None, Field(title="Finished At")] = None
    error: Annotated[str | None, Field(title="Error")] = None


class CrawlJobList(BaseModel):
    """
    A KB's crawl jobs, newest first.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[CrawlJob], Field(title="Items")]


class CrawlJobQueued(BaseModel):
    """
    Answer to `POST .../crawl-jobs`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    queued: Annotated[bool | None, Field(title="Queued")] = True
    job_id: Annotated[str, Field(title="Job Id")]
    job: CrawlJob


class DocumentOut(BaseModel):
    """
    A document as the API shows it.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    kb_id: Annotated[str, Field(title="Kb Id")]
    filename: Annotated[str, Field(title="Filename")]
    title: Annotated[str, Field(title="Title")]
    content_type: Annotated[str, Field(title="Content Type")]
    size_bytes: Annotated[int, Field(title="Size Bytes")]
    sha256: Annotated[str, Field(title="Sha256")]
    storage_key: Annotated[str, Field(title="Storage Key")]
    source_key: Annotated[str, Field(title="Source Key")]
    version: Annotated[int, Field(title="Version")]
    external_id: Annotated[str | None, Field(title="External Id")]
    url: Annotated[str | None, Field(title="Url")]
    source: Annotated[str | None, Field(title="Source")] = None
    parse_status: Annotated[
        Literal[
            "queued",
            "extracting",
            "chunking",
            "embedding",
            "indexing",
            "indexed",
            "failed",
            "deleting",
        ],
        Field(title="ParseStatus"),
    ]
    """
    Where a document is in the ingestion pipeline.
    """
    parse_error: Annotated[str | None, Field(title="Parse Error")]
    stalled: Annotated[bool | None, Field(title="Stalled")] = False
    chunk_count: Annotated[int | None, Field(title="Chunk Count")]
    chunks_embedded: Annotated[int, Field(title="Chunks Embedded")]
    text_char_count: Annotated[int | None, Field(title="Text Char Count")]
    attempts: Annotated[dict[str, int], Field(title="Attempts")]
    stage_started_at: Annotated[dict[str, AwareDatetime], Field(title="Stage Started At")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]
    knowledge_item_id: Annotated[str, Field(title="Knowledge Item Id")]
    kind: Annotated[Literal["document", "wiki"], Field(title="ItemKind")]
    """
    What a knowledge item is.
    """
    owner_user_id: Annotated[str | None, Field(title="Owner User Id")]
    creator_user_id: Annotated[str | None, Field(title="Creator User Id")]
    visibility_mode: Annotated[
        Literal["private", "shared", "restricted"], Field(title="Visibility")
    ]
    """
    Who may read an item, before grants and audiences narrow or widen it.
    """
    audience_tags: Annotated[list[str], Field(title="Audience Tags")]
    user_grants: Annotated[list[str], Field(title="User Grants")]
    tags: Annotated[list[str], Field(title="Tags")]
    archived_at: Annotated[AwareDatetime | None, Field(title="Archived At")]
    last_error: Annotated[str | None, Field(title="Last Error")]


class ErrorBody(BaseModel):
    """
    Body of every error answer: `detail` says, for a person, why the request was refused;
    invalid input also lists each field's problem in `errors`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    detail: Annotated[str, Field(min_length=1, title="Detail")]
    errors: Annotated[list[FieldProblem] | None, Field(title="Errors")] = None


class Gain(BaseModel):
    """
    The best configuration against another on the same cases, compared case by case by
    nDCG@10: the cases it did better, worse and alike, the mean difference with its 95%
    bootstrap interval, and the p-value of a sign-flip randomisation test (`core.paired`). A
    gain is significant at p < 0.05.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    over: RetrievalConfig
    wins: Annotated[int, Field(title="Wins")]
    losses: Annotated[int, Field(title="Losses")]
    ties: Annotated[int, Field(title="Ties")]
    difference: Annotated[float, Field(title="Difference")]
    interval: Annotated[tuple[float, float], Field(title="Interval")]
    p_value: Annotated[float, Field(title="P Value")]
    significant: Annotated[bool, Field(title="Significant")]


class GovernanceChange(BaseModel):
    """
    Governance fields a request sets; those left out keep their value (or the default).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    visibility_mode: Literal["private", "shared", "restricted"] | None = None
    audience_tags: Annotated[AudienceTags | None, Field(title="Audience Tags")] = None
    user_grants: Annotated[UserGrants | None, Field(title="User Grants")] = None
    owner_user_id: Annotated[OwnerUserId | None, Field(title="Owner User Id")] = None
    tags: Annotated[Tags | None, Field(title="Tags")] = None
    archived: Annotated[bool | None, Field(title="Archived")] = None


class HTTPValidationError(BaseModel):
    model_config = ConfigDict(
        extra="allow",
    )
    detail: Annotated[list[ValidationError] | None, Field(title="Detail")] = None


class IndexGeneration(BaseModel):
    """
    One generation of the vector store (MongoDB collection `index_generations`).
    """

    model_config = ConfigDict(
        extra="allow",
    )
    number: Annotated[int, Field(ge=1, title="Number")]
    model: ModelIdentity
    state: Annotated[
        Literal["building", "live", "retired", "cancelled", "dropped"],
        Field(title="GenerationState"),
    ]
    """
    Where a generation is in its life.
    """
    created_at: Annotated[AwareDatetime | None, Field(title="Created At")] = None
    live_since: Annotated[AwareDatetime | None, Field(title="Live Since")] = None
    retired_at: Annotated[AwareDatetime | None, Field(title="Retired At")] = None
    drop_after: Annotated[AwareDatetime | None, Field(title="Drop After")] = None
    ended_at: Annotated[AwareDatetime | None, Field(title="Ended At")] = None
    started_by: Annotated[str | None, Field(title="Started By")] = "deployment"
    tenant_id: Annotated[str | None, Field(title="Tenant Id")] = None
    progress: MigrationProgress | None = None
    reason: Annotated[str | None, Field(title="Reason")] = None


class IngestResult(BaseModel):
    """
    What happened to one record of a batch.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    external_id: Annotated[str | None, Field(title="External Id")]
    document_id: Annotated[str, Field(title="Document Id")]
    outcome: Annotated[str, Field(title="Outcome")]
    parse_status: Annotated[
        Literal[
            "queued",
            "extracting",
            "chunking",
            "embedding",
            "indexing",
            "indexed",
            "failed",
            "deleting",
        ],
        Field(title="ParseStatus"),
    ]
    """
    Where a document is in the ingestion pipeline.
    """


class KnowledgeBaseCreate(BaseModel):
    """
    Body of `POST /api/v1/knowledge-bases`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    name: Annotated[str, Field(max_length=200, min_length=1, pattern="\\S", title="Name")]
    description: Annotated[str | None, Field(max_length=5000, title="Description")] = ""
    default_language: Annotated[
        str | None, Field(max_length=16, min_length=2, title="Default Language")
    ] = "en"
    default_visibility: Annotated[
        Literal["private", "shared", "restricted"] | None, Field(title="Visibility")
    ] = "shared"
    """
    Who may read an item, before grants and audiences narrow or widen it.
    """
    code: Annotated[Code | None, Field(title="Code")] = None
    urls: Annotated[list[Url2] | None, Field(max_length=1000, title="Urls")] = None
    files: Annotated[list[File] | None, Field(max_length=1000, title="Files")] = None


class KnowledgeBaseOut(BaseModel):
    """
    A knowledge base as the API shows it.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    tenant_id: Annotated[str, Field(title="Tenant Id")]
    name: Annotated[str, Field(title="Name")]
    description: Annotated[str, Field(title="Description")]
    default_language: Annotated[str, Field(title="Default Language")]
    default_visibility: Annotated[
        Literal["private", "shared", "restricted"], Field(title="Visibility")
    ]
    """
    Who may read an item, before grants and audiences narrow or widen it.
    """
    code: Annotated[str | None, Field(title="Code")] = None
    urls: Annotated[list[str] | None, Field(title="Urls")] = None
    files: Annotated[list[str] | None, Field(title="Files")] = None
    status: Annotated[Literal["active", "disabled", "deleting"], Field(title="KbStatus")]
    """
    Whether a knowledge base is searchable.
    """
    document_count: Annotated[int, Field(title="Document Count")]
    chunk_count: Annotated[int, Field(title="Chunk Count")]
    default_retrieval: RetrievalConfig | None = None
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]


class KnowledgeBaseUpdate(BaseModel):
    """
    Body of `PATCH /api/v1/knowledge-bases/{kb_id}`: only the fields given change.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    name: Annotated[Name | None, Field(title="Name")] = None
    description: Annotated[Description | None, Field(title="Description")] = None
    default_language: Annotated[DefaultLanguage | None, Field(title="Default Language")] = None
    default_visibility: Literal["private", "shared", "restricted"] | None = None
    code: Annotated[Code | None, Field(title="Code")] = None
    urls: Annotated[Urls | None, Field(title="Urls")] = None
    files: Annotated[Files | None, Field(title="Files")] = None
    status: Annotated[Literal["active", "disabled"] | None, Field(title="Status")] = None


class KnowledgeSearchResponse(BaseModel):
    """
    Body of the answer to `POST /api/v1/knowledge/search`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    results: Annotated[list[KnowledgeResult], Field(title="Results")]
    metrics: SearchMetrics | None = None


class Miss(BaseModel):
    """
    A case whose expected items were not all in the top k, and what came instead.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    query: Annotated[str, Field(title="Query")]
    missing: Annotated[list[str], Field(title="Missing")]
    returned: Annotated[list[Returned], Field(title="Returned")]


class PlaygroundResponse(BaseModel):
    """
    The bot's answer as the internal contract gives it, each hit with its citation.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    hits: Annotated[list[PlaygroundHit], Field(title="Hits")]
    metrics: SearchMetrics
    fallback_message: Annotated[str | None, Field(title="Fallback Message")] = None


class RedriveAllOut(BaseModel):
    """
    Body of `POST /api/v1/dead-letters/redrive`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[RedriveOut], Field(title="Items")]


class SyncIn(BaseModel):
    """
    Body of `POST .../documents/sync`: the complete set of a source's records; the source's
    documents not among them are deleted.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    records: Annotated[list[KeyedRecord], Field(max_length=1000, min_length=0, title="Records")]
    visibility_mode: Literal["private", "shared", "restricted"] | None = None
    audience_tags: Annotated[list[str] | None, Field(title="Audience Tags")] = None
    user_grants: Annotated[list[str] | None, Field(title="User Grants")] = None
    owner_user_id: Annotated[str | None, Field(title="Owner User Id")] = None
    tags: Annotated[list[str] | None, Field(title="Tags")] = None
    confirm_tenant_wide: Annotated[bool | None, Field(title="Confirm Tenant Wide")] = False
    source: Annotated[
        str,
        Field(
            max_length=64,
            min_length=1,
            pattern="^[a-z0-9][a-z0-9._-]*$",
            title="Source",
        ),
    ]


class SyncOut(BaseModel):
    """
    What a full sync did: each record's outcome, and the documents it removed.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    results: Annotated[list[IngestResult], Field(title="Results")]
    run: Annotated[str, Field(title="Run")]
    removed: Annotated[list[str], Field(title="Removed")]


class WikiPageList(BaseModel):
    """
    Body of `GET /api/v1/knowledge/wiki`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[WikiPageOut], Field(title="Items")]


class BatchOut(BaseModel):
    """
    Body of the answer to `POST .../documents/batch`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    results: Annotated[list[IngestResult], Field(title="Results")]


class ConfigResult(BaseModel):
    """
    How one configuration did.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    config: RetrievalConfig
    scores: Scores
    misses: Annotated[list[Miss] | None, Field(title="Misses")] = None
    per_case: Annotated[list[float] | None, Field(title="Per Case")] = None


class DocumentList(BaseModel):
    """
    Body of `GET /api/v1/knowledge-bases/{kb_id}/documents`: a page, newest first.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[DocumentOut], Field(title="Items")]
    next_cursor: Annotated[str | None, Field(title="Next Cursor")] = None


class Evaluation(BaseModel):
    """
    A stored evaluation of a knowledge base.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    id: Annotated[str, Field(title="Id")]
    tenant_id: Annotated[str, Field(title="Tenant Id")]
    kb_id: Annotated[str, Field(title="Kb Id")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    k: Annotated[int, Field(title="K")]
    case_count: Annotated[int, Field(title="Case Count")]
    modes: Annotated[dict[str, ConfigResult], Field(title="Modes")]
    tried: Annotated[list[ConfigResult], Field(title="Tried")]
    best: RetrievalConfig
    best_scores: Scores
    current: RetrievalConfig | None = None
    gain: Gain | None = None
    offered: Annotated[bool | None, Field(title="Offered")] = False


class GenerationOut(BaseModel):
    """
    One generation of the vector store (`schemas.index_generations`), with a build's time
    left at its current rate.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    generation: IndexGeneration
    seconds_left: Annotated[float | None, Field(title="Seconds Left")]
    """
    for one being built: until its copy is done, at its current rate
    """


class GenerationsOut(BaseModel):
    """
    Body of `GET /api/v1/generations`: every generation, oldest first.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[GenerationOut], Field(title="Items")]


class KnowledgeBaseList(BaseModel):
    """
    Body of `GET /api/v1/knowledge-bases`.
    """

    model_config = ConfigDict(
        extra="allow",
    )
    items: Annotated[list[KnowledgeBaseOut], Field(title="Items")]
