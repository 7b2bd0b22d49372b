"""The paraphrased-question set as committed: how it was built is what it holds (pure logic)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.build_paraphrase_set import OUT, PARTS, SOURCES, shared_run, split_of


def _set() -> dict[str, Any]:
    return dict(json.loads(OUT.read_text(encoding="utf-8")))


def test_a_shared_run_is_three_content_words_in_a_row_stemmed_without_stop_words() -> None:
    passage = "Packages can be held back from upgrades with apt-mark hold."
    assert shared_run("how are packages held back from upgrading?", passage) == (
        "packag",
        "held",
        "back",
    )
    # Two shared words, or three not in a row, are not a run.
    assert shared_run("why are held packages upgraded back?", passage) is None
    assert shared_run("keep a package at its version", passage) is None


def test_no_question_shares_a_run_of_three_content_words_with_an_answer() -> None:
    questions = _set()["questions"]
    assert len(questions) >= 400
    for qid, question in questions.items():
        for answer in question["answers"]:
            assert shared_run(question["text"], answer["text"]) is None, qid


def test_the_corpora_come_in_the_formats_users_upload_and_each_answers_questions() -> None:
    data = _set()
    formats: dict[str, set[str]] = {}
    for document in data["documents"]:
        formats.setdefault(document["manual"], set()).add(document["format"])
    assert len(formats) >= 6
    assert all("html" in kinds for kinds in formats.values())
    assert set().union(*formats.values()) == {"html", "pdf", "text"}
    answered = Counter(q["corpus"] for q in data["questions"].values())
    assert set(answered) == set(formats)
    # One upload name per document: a KB takes a file of a name it holds as a new version.
    names = [document["upload_name"] for document in data["documents"]]
    assert len(names) == len(set(names))


def test_the_parts_are_whole_corpora_and_match_the_sources() -> None:
    data = _set()
    entries = [
        json.loads(line)
        for path in sorted(Path(SOURCES).glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    assert {e["id"] for e in entries} == set(data["questions"])
    splits = split_of(entries)
    assert splits == {qid: q["split"] for qid, q in data["questions"].items()}
    for question in data["questions"].values():
        assert question["split"] == PARTS[question["corpus"]]
    per_part = Counter(splits.values())
    assert per_part["test"] >= 200
    assert per_part["tune"] >= 150
    # Every answer of a question lies in its own part's corpora: no passage is in both parts.
    for qid, question in data["questions"].items():
        assert {PARTS[a["manual"]] for a in question["answers"]} == {question["split"]}, qid
