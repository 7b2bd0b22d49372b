"""Fixtures of the end-to-end tests: the stack a module runs against, and an admin client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import RunningPipeline
from tests.e2e.client import CLIENT_LIMITS, Api


@pytest.fixture(scope="module")
def stack(mechanics_pipeline: RunningPipeline) -> RunningPipeline:
    """The stack this module's tests run against: the session's stack for mechanics (the hashed
    embedder), unless the module names another: the session's stack with the packaged model
    (`running_pipeline`) where the model is the subject, or one of its own."""
    return mechanics_pipeline


@pytest.fixture
async def api(stack: RunningPipeline) -> AsyncIterator[Api]:
    """The admin of tenant `default`."""
    async with httpx.AsyncClient(base_url=stack.url, timeout=30, limits=CLIENT_LIMITS) as http:
        yield Api(http, stack, stack.admin_token)
