"""The client page's LangChain example, run as written against the running API, with the one
thing it cannot have here, a hosted chat model, swapped for a model that answers with the
prompt it was given: the retriever's passages, with their citations, reach the model.

Cost: about 5 s on the session's mechanics stack (hashed embedder, no model).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from ragline_client import Ragline
from tests.conftest import RunningPipeline

pytestmark = pytest.mark.e2e

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python-client.md"
HOSTED_MODEL = (
    "from langchain_openai import ChatOpenAI  # or any chat model LangChain supports\n",
    'llm = ChatOpenAI(model="gpt-4o-mini")\n',
)


class PromptEcho(BaseChatModel):
    """A chat model that answers with the prompt it was given."""

    @property
    def _llm_type(self) -> str:
        return "prompt-echo"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = "\n".join(str(message.content) for message in messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=prompt))])


def _langchain_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    (example,) = [block for block in blocks if "ragline_client.langchain" in block]
    return str(example)


@pytest.fixture
def bot_token(stack: RunningPipeline) -> Iterator[str]:
    """A bot's token, the bot holding a KB with the refund policy in it."""
    with Ragline(base_url=stack.url, token=stack.admin_token) as admin:
        kb = admin.create_knowledge_base(name="Policies")
        policy = admin.add_text(
            kb.id, title="Refund policy", content="Refunds take 14 days to reach your card."
        )
        assert admin.wait_until_final(policy, timeout=120).parse_status == "indexed"
        # The hashed embedder's scores are not a model's: no threshold.
        knowledge = {"enabled": True, "kb_ids": [kb.id], "score_threshold": 0.0}
        bot = admin.create_bot(name="Support", knowledge=knowledge)
        yield admin.create_bot_token(bot.id, name="agent").token


def test_the_pages_langchain_example_answers_from_the_bots_passages(
    stack: RunningPipeline, bot_token: str, capsys: pytest.CaptureFixture[str]
) -> None:
    example = _langchain_example()
    assert len([line for line in example.splitlines() if line.strip()]) < 15
    for line in HOSTED_MODEL:
        assert line in example, "the page's example changed: update this test"
    runnable = example.replace(HOSTED_MODEL[0], "").replace(HOSTED_MODEL[1], "llm = PromptEcho()\n")
    names: dict[str, Any] = {
        "RAGLINE_URL": stack.url,
        "BOT_TOKEN": bot_token,
        "PromptEcho": PromptEcho,
    }
    try:
        exec(runnable, names)  # noqa: S102 - the documentation's own example, run as a user would
    finally:
        names["retriever"].client.close()
    printed = capsys.readouterr().out
    # The passage reached the model, under its citation.
    assert "[Refund policy" in printed
    assert "Refunds take 14 days to reach your card." in printed
    assert "Q: How long do refunds take?" in printed
