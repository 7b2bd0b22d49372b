"""The context provider interface, its typed errors, and the prompt.

A provider sends one prompt to a chat model and returns its answer with the tokens it used.
The prompt follows Anthropic's contextual retrieval: the document title, the heading path and
the text around the chunk, asking for one or two sentences that situate the chunk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from core.errors import PermanentError, ServiceUnavailable

# Part of every cache key: a new prompt wording makes new contexts.
PROMPT_VERSION = 1

INSTRUCTION = (
    "Please give a short succinct context of one or two sentences to situate this chunk within "
    "the overall document for the purposes of improving search retrieval of the chunk. Answer "
    "only with the succinct context and nothing else."
)


class ContextUnavailable(ServiceUnavailable):
    """The context model did not answer: connection refused or lost, 5xx, rate limited."""

    def __init__(self, provider: str, detail: str) -> None:
        super().__init__(f"context model ({provider})", detail)
        self.provider = provider


class ContextTimedOut(ContextUnavailable):
    """The context model did not answer within the per-call timeout."""


class ContextRefused(PermanentError):
    """The context model refused the request (4xx) or its answer had no usable text."""

    def __init__(self, provider: str, detail: str) -> None:
        super().__init__(f"context model ({provider}) refused: {detail}")
        self.provider = provider
        self.detail = detail


@dataclass(frozen=True)
class Completion:
    """A model's answer and the tokens the call used."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ContextProvider(Protocol):
    """A chat model that answers one prompt (`openai` or `gemini`)."""

    @property
    def name(self) -> str:
        """The provider's name, as metrics and cache keys use it."""
        ...

    @property
    def model(self) -> str:
        """The model asked."""
        ...

    async def complete(self, prompt: str) -> Completion:
        """The model's answer; raises `ContextUnavailable` or `ContextRefused`."""
        ...

    async def close(self) -> None:
        """Releases the HTTP client."""
        ...


@dataclass(frozen=True)
class ContextRequest:
    """What the model is shown about one chunk."""

    title: str
    heading_path: Sequence[str]
    text: str
    # Text just before and just after the chunk, as far as the chunk stage has it at hand.
    before: str = ""
    after: str = ""


def build_prompt(request: ContextRequest) -> str:
    """The prompt for one chunk; parts that are empty are left out."""
    lines = ["Here is a chunk of a document, with the document's title, the section it is in "
             "and the text around it."]  # fmt: skip
    if request.title.strip():
        lines.append(f"<document_title>{request.title.strip()}</document_title>")
    section = " > ".join(h.strip() for h in request.heading_path if h.strip())
    if section:
        lines.append(f"<section>{section}</section>")
    if request.before.strip():
        lines.append(f"<text_before>…{request.before.strip()}</text_before>")
    lines.append(f"<chunk>{request.text}</chunk>")
    if request.after.strip():
        lines.append(f"<text_after>{request.after.strip()}…</text_after>")
    lines.append(INSTRUCTION)
    return "\n".join(lines)


def context_key(
    provider: str, model: str, title: str, heading_path: Sequence[str], text: str
) -> str:
    """The cache entry of one chunk's context: provider, model, prompt version, the chunk with
    its document title and headings."""
    canonical = json.dumps(
        [provider, model, PROMPT_VERSION, title, list(heading_path), text], ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
