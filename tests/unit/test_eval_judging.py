"""The quality benchmark's relevance judging and ranking metrics."""

from __future__ import annotations

import math
import textwrap

import pytest
import pytrec_eval

from benchmarks.judging import (
    PASSAGE_THRESHOLD,
    Passage,
    contains_identifier,
    first_relevant,
    known_item,
    letters_and_digits,
    ndcg_at,
    overlap,
    recall_at,
    reciprocal_rank,
    word_runs,
)

# Debian Policy Manual 4.6.2.0, section 4.7 "Time Stamps" (GPL-2+), as its HTML reads.
SECTION = (
    "Maintainers should preserve the modification times of the upstream source files in a "
    "package, as far as is reasonably possible. [1] The source package may contain "
    "directories that are empty. These directories are not significant and may be dropped. "
    "If a package requires a directory to be present during the build, the build process "
    "must create it. The file permissions of a package's “debian/rules” file are not "
    "significant for the build; dpkg-source sets the file permissions as needed."
)
# Section 4.6 "Error trapping in makefiles", the one before it.
NEIGHBOUR = (
    "Every time you put more than one shell command (this includes using a loop) in a "
    "makefile command you must make sure that errors are trapped. For simple compound "
    "commands, such as changing directory and then running a program, using && rather than "
    "semicolon as a command separator is sufficient. For more complex commands including most "
    "loops and conditionals you should include a separate set -e command at the start of "
    "every makefile command that's actually one of these miniature shell scripts."
)
# Debian Reference 2.100, section 1.2.11 "Special device files" (GPL-2+): a table.
TABLE_HTML = (
    "There are some special device files. Table 1.10. List of special device files "
    "device file action description of response "
    "/dev/null read return end-of-file (EOF) character "
    "/dev/null write return nothing (a bottomless data dump pit) "
    "/dev/zero read return the NUL character (not the same as the ASCII number zero) "
    "/dev/random read return random characters from a true random number generator, "
    "delivering real entropy (slow) "
    "/dev/urandom read return random characters from a cryptographically secure "
    "pseudorandom number generator"
)
# The same table as the plain-text manual draws it: cells wrap line by line.
TABLE_TEXT = """There are some special device files.

Table 1.10. List of special device files

+---------------------------------------------------------------+
|device |action|      description of response                   |
|file   |      |                                                |
|-------+------+------------------------------------------------|
|/dev/  |read  |return end-of-file (EOF) character              |
|null   |      |                                                |
|-------+------+------------------------------------------------|
|/dev/  |write |return nothing (a bottomless data dump pit)     |
|null   |      |                                                |
|-------+------+------------------------------------------------|
|/dev/  |read  |return the NUL character (not the same as the   |
|zero   |      |ASCII number zero)                              |
|-------+------+------------------------------------------------|
|/dev/  |read  |return random characters from a true random     |
|random |      |number generator, delivering real entropy (slow)|
|-------+------+------------------------------------------------|
|/dev/  |read  |return random characters from a                 |
|urandom|      |cryptographically secure pseudorandom number    |
|       |      |generator                                       |
+---------------------------------------------------------------+
"""


def pdf_style(text: str) -> str:
    """The text as a PDF parser gives it: lines, end-of-line hyphens, glued words, a page
    header and number, a ligature."""
    lines = textwrap.wrap(text.replace("fi", "\N{LATIN SMALL LIGATURE FI}"), 62)
    rendered = []
    for number, line in enumerate(lines):
        if number % 3 == 1:
            line = line.replace(" ", "")
        if number % 4 == 2 and line.rsplit(" ", 1)[-1].isalpha():
            head, _, word = line.rpartition(" ")
            line = f"{head} {word[: len(word) // 2]}-\n{word[len(word) // 2 :]}"
        rendered.append(line)
        if number == len(lines) // 2:
            rendered.append("Debian Policy Manual, Release 4.6.2.0\n17")
    return "\n".join(rendered)


def html_style(text: str) -> str:
    """The text as an HTML chunk gives it: other wrapping, straight quotes, a heading."""
    return "4.7. Time Stamps\n\n" + "\n".join(
        textwrap.wrap(text.replace("“", '"').replace("”", '"'), 90)
    )


def test_the_same_passage_counts_in_pdf_and_html_renderings() -> None:
    passage = Passage(SECTION)
    assert passage.judges_relevant(pdf_style(SECTION))
    assert passage.judges_relevant(html_style(SECTION))
    assert passage.similarity(pdf_style(SECTION)) > 0.8


def test_a_chunk_holding_part_of_a_section_counts_by_the_smaller_text() -> None:
    passage = Passage(SECTION)
    # A chunk that ends with the section's first half: half of the section is there.
    assert passage.judges_relevant(NEIGHBOUR + " 4.7. Time Stamps " + SECTION[:230])
    # A chunk holding only the section's first sentence is mostly about something else.
    assert not passage.judges_relevant(NEIGHBOUR + " " + SECTION[:60])


def test_an_unrelated_passage_does_not_count() -> None:
    assert not Passage(SECTION).judges_relevant(NEIGHBOUR)
    assert not Passage(SECTION).judges_relevant(pdf_style(NEIGHBOUR))
    assert Passage(SECTION).similarity(NEIGHBOUR) < PASSAGE_THRESHOLD / 2


def test_a_table_drawn_as_a_text_grid_counts() -> None:
    passage = Passage(TABLE_HTML)
    assert passage.judges_relevant(TABLE_TEXT)
    # Word runs carry it: the grid interleaves the cells' letters line by line.
    assert overlap(word_runs(TABLE_HTML), word_runs(TABLE_TEXT)) > 0.6
    assert not passage.judges_relevant(SECTION)


def test_reduction_ignores_case_spacing_and_ligatures() -> None:
    assert letters_and_digits("Theﬁle\n“debian/rules”  is-") == "thefiledebianrulesis"


def test_identifiers_are_found_as_whole_tokens() -> None:
    assert contains_identifier("Use --no-clobber.", "--no-clobber")
    assert contains_identifier("see PAM_CRED_ERR", "pam_cred_err")
    assert contains_identifier("read /etc/gai.conf.", "/etc/gai.conf")
    assert not contains_identifier("use --no-clobber-all", "--no-clobber")
    assert not contains_identifier("in /etc/gai.conf.d/", "/etc/gai.conf")
    assert not contains_identifier("in /usr/etc/gai.conf", "/etc/gai.conf")
    assert not contains_identifier("MY_PAM_CRED_ERR", "PAM_CRED_ERR")


def test_known_item_keeps_the_first_relevant_hit_only() -> None:
    assert known_item([False, True, True, False, True]) == [False, True, False, False, False]
    assert first_relevant([False, False, True]) == 3
    assert first_relevant([False, False]) is None


def test_metrics_against_hand_computation() -> None:
    ranking = known_item([False, True, False, True])
    assert recall_at(ranking, 1) == 0.0
    assert recall_at(ranking, 4) == 1.0
    assert reciprocal_rank(ranking, 10) == 0.5
    assert ndcg_at(ranking, 10) == pytest.approx(1 / math.log2(3))  # 0.6309
    # Relevant at rank 5: inside the top 10, outside the top 4.
    late = [False] * 4 + [True]
    assert recall_at(late, 4) == 0.0
    assert reciprocal_rank(late, 10) == 0.2
    assert reciprocal_rank(late, 4) == 0.0
    assert ndcg_at(late, 10) == pytest.approx(1 / math.log2(6))  # 0.3869
    # Two relevant items, found at ranks 1 and 3: DCG 1 + 1/2, ideal 1 + 1/log2(3).
    assert ndcg_at([True, False, True], 10, relevant=2) == pytest.approx(1.5 / 1.6309298)
    assert recall_at([True, False, True], 2, relevant=2) == 0.5
    assert ndcg_at([], 10) == recall_at([], 4) == reciprocal_rank([], 10) == 0.0


def test_metrics_agree_with_trec_eval() -> None:
    rankings = {
        "first": [True, False, False],
        "third": [False, False, True, True],
        "eleventh": [False] * 10 + [True],
        "none": [False] * 10,
        "two": [False, True, False, True],
    }
    relevant = {"first": 1, "third": 2, "eleventh": 1, "none": 1, "two": 2}
    qrels = {qid: {f"relevant-{i}": 1 for i in range(count)} for qid, count in relevant.items()}
    run: dict[str, dict[str, float]] = {}
    for qid, flags in rankings.items():
        found = iter(range(relevant[qid]))
        run[qid] = {
            (f"relevant-{next(found)}" if flag else f"other-{rank}"): float(len(flags) - rank)
            for rank, flag in enumerate(flags)
        }
    measures = {"ndcg_cut.10", "recall.10", "recip_rank"}
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    for qid, flags in rankings.items():
        assert ndcg_at(flags, 10, relevant[qid]) == pytest.approx(trec[qid]["ndcg_cut_10"])
        assert recall_at(flags, 10, relevant[qid]) == pytest.approx(trec[qid]["recall_10"])
        if len(flags) <= 10:
            assert reciprocal_rank(flags, 10) == pytest.approx(trec[qid]["recip_rank"])
