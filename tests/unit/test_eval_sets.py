"""The committed evaluation sets load and are well-formed; the section splitter works."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.build_eval_sets import (
    PER_KIND,
    PER_MANUAL,
    TEMPLATES,
    html_sections,
    title_words,
)
from benchmarks.judging import (
    PASSAGE_THRESHOLD,
    RUN_WORDS,
    SHINGLE_CHARS,
    Fingerprint,
    contains_identifier,
)

EVAL = Path(__file__).parents[2] / "benchmarks" / "eval"
MANPAGES = Path(__file__).parents[3] / "shared" / "eval" / "manpages.json"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVAL / name).read_text(encoding="utf-8"))
    return data


def test_multiformat_set_is_well_formed() -> None:
    data = _load("multiformat.json")
    assert data["judge"] == {
        "shingle_chars": SHINGLE_CHARS,
        "run_words": RUN_WORDS,
        "threshold": PASSAGE_THRESHOLD,
    }
    queries, sections = data["queries"], data["sections"]
    assert len(queries) == 2 * PER_MANUAL
    assert {q["section"] for q in queries.values()} == set(sections)
    manuals = [sections[q["section"]]["manual"] for q in queries.values()]
    assert manuals.count("debian-policy") == manuals.count("debian-reference") == PER_MANUAL
    titles = [q["text"].casefold() for q in queries.values()]
    assert len(set(titles)) == len(titles)
    for query in queries.values():
        section = sections[query["section"]]
        assert query["text"] == section["title"]
        assert not query["text"][0].isdigit()  # numbering stripped
        assert len(section["text"].split()) >= 50

    documents = {d["path"]: d for d in data["documents"]}
    assert len({d["upload_name"] for d in documents.values()}) == len(documents)
    assert not any(d["upload_name"].endswith(".gz") for d in documents.values())
    assert not any("debian-faq" in path for path in documents)
    all_formats, one_copy = data["kbs"]["all_formats"], data["kbs"]["one_copy"]
    assert set(all_formats) == set(documents)
    assert set(one_copy) < set(all_formats)
    for manual in ("debian-policy", "debian-reference"):
        formats = {d["format"] for d in documents.values() if d["manual"] == manual}
        assert formats == {"html", "txt", "pdf"}
        copies = {documents[path]["format"] for path in one_copy if manual in path}
        assert copies == {"html"}


def test_multiformat_sections_cannot_be_taken_for_one_another() -> None:
    sections = _load("multiformat.json")["sections"]
    prints = {key: Fingerprint.of(section["text"]) for key, section in sections.items()}
    for key, fingerprint in prints.items():
        for other, other_print in prints.items():
            if other != key:
                assert fingerprint.similarity(other_print) < PASSAGE_THRESHOLD, (key, other)


def test_exact_term_set_is_well_formed() -> None:
    data = _load("exact_terms.json")
    identifiers, queries = data["identifiers"], data["queries"]
    assert len(identifiers) == PER_KIND * len(TEMPLATES)
    kinds = [item["kind"] for item in identifiers.values()]
    assert all(kinds.count(kind) == PER_KIND for kind in TEMPLATES)
    assert len(queries) == 2 * len(identifiers)
    for key, item in identifiers.items():
        bare, words = queries[f"{key}-bare"], queries[f"{key}-words"]
        assert bare["text"] == item["identifier"]
        assert bare["style"] == "bare"
        assert words["style"] == "words"
        assert contains_identifier(words["text"], item["identifier"])
        assert len(words["text"].split()) > 1


@pytest.mark.skipif(not MANPAGES.is_file(), reason="the man-page corpus is not on this machine")
def test_each_identifier_occurs_in_exactly_one_page() -> None:
    corpus: dict[str, str] = json.loads(MANPAGES.read_text())["corpus"]
    folded = {page: text.casefold() for page, text in corpus.items()}
    for item in _load("exact_terms.json")["identifiers"].values():
        identifier = item["identifier"]
        pages = [
            page
            for page, text in folded.items()
            if identifier.casefold() in text and contains_identifier(corpus[page], identifier)
        ]
        assert pages == [item["page"]], item


def test_numbered_headings_split_sections(tmp_path: Path) -> None:
    page = tmp_path / "ch-x.html"
    page.write_text(
        "<html><body><div class='related'><h3>Navigation</h3>Prev | Next</div>"
        "<div class='toc'><p>4.1. Alpha beta</p></div>"
        "<h1><span>4. </span>Source packages<a class='headerlink'>¶</a></h1><p>Intro.</p>"
        "<h2>4.1. Standards <code>conformance</code></h2><p>One.</p>"
        "<div class='tip'><h3>Tip</h3><p>A tip.</p></div>"
        "<h2>Chapter 5. The end</h2><p>Two.</p></body></html>",
        encoding="utf-8",
    )
    sections = html_sections(page, "manual")
    assert [(s.number, s.title, s.text) for s in sections] == [
        ("4", "Source packages", "Intro."),
        ("4.1", "Standards conformance", "One. Tip A tip."),
        ("5", "The end", "Two."),
    ]
    assert sections[1].key == "manual/ch-x.html#4.1"


def test_title_words_count_content_words() -> None:
    assert title_words("The main archive area") == (4, 3)
    assert title_words("Git references") == (2, 2)
    assert title_words("About the checklist") == (3, 1)
