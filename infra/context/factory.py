"""Builds the configured context provider."""

from __future__ import annotations

from infra.context.base import ContextProvider
from infra.settings.ingest import ContextualSettings


def build_context_provider(settings: ContextualSettings) -> ContextProvider | None:
    """The provider the settings ask for; None means the generic prefix only."""
    if settings.provider == "openai":
        from infra.context.openai import OpenAIChatProvider

        return OpenAIChatProvider(settings)
    if settings.provider == "gemini":
        from infra.context.gemini import GeminiContextProvider

        return GeminiContextProvider(settings)
    return None
