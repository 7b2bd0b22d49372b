"""The quality benchmark's fixtures set can be answered: every question's quote is in a chunk of
its documents as the pipeline cuts them, and only there."""

from __future__ import annotations

from benchmarks.fixture_set import QUESTIONS, documents
from benchmarks.judging import Passage
from workers.chunk.chunking import chunk_document
from workers.extract.extractors import extract


def test_every_question_has_a_relevant_chunk_in_the_fixtures() -> None:
    chunks = [
        chunk.text
        for path in documents()
        for chunk in chunk_document(extract(path.read_bytes(), path.name))[0]
    ]
    for qid, (question, quote) in QUESTIONS.items():
        relevant = [text for text in chunks if Passage(quote).judges_relevant(text)]
        assert relevant, f"{qid}: no chunk holds the answer to {question!r}"
        assert len(relevant) <= 2, f"{qid}: {len(relevant)} chunks judged relevant"
