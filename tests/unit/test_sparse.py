"""Tokenisation and BM25-style sparse vectors."""

from __future__ import annotations

import pytest

from core.sparse import (
    SparseEncoder,
    SparseVector,
    identifier_terms,
    phrases,
    term_index,
    tokens,
    with_feedback,
)


def test_english_is_stemmed_and_stop_words_dropped() -> None:
    assert tokens("The printers were configured") == ["printer", "configur"]
    assert tokens("Configuring a printer") == ["configur", "printer"]


def test_chinese_and_japanese_become_character_bigrams() -> None:
    assert tokens("北京大学") == ["北京", "京大", "大学"]
    assert tokens("東京都に住んでいます") == [
        "東京", "京都", "都に", "に住", "住ん", "んで", "でい", "いま", "ます",
    ]  # fmt: skip
    # A query shares bigrams with a sentence that contains it.
    sentence = set(tokens("我们今天去北京大学学习中文"))
    assert set(tokens("北京大学")) <= sentence


def test_mixed_scripts_and_codes() -> None:
    terms = tokens("Error XJ-4471 in pstore.conf (版本2)")
    assert "xj-4471" in terms
    assert "pstore.conf" in terms
    assert {"xj", "4471", "error"} <= set(terms)
    assert "版本" in terms


def test_documents_weigh_repeats_with_saturation_and_length() -> None:
    encoder = SparseEncoder()
    once = encoder.document("kayak")
    thrice = encoder.document("kayak kayak kayak")
    padded = encoder.document("kayak " + "river " * 300)
    index = term_index("kayak")
    weight = dict(zip(once.indices, once.values, strict=True))
    assert once.indices == [index]
    assert weight[index] > 0
    assert thrice.values[0] > once.values[0]
    assert thrice.values[0] < 3 * once.values[0]
    long_weight = dict(zip(padded.indices, padded.values, strict=True))[index]
    assert long_weight < once.values[0]


def test_queries_weigh_each_distinct_term_once() -> None:
    query = SparseEncoder().query("reset reset the password")
    expected = {term_index(t) for t in ("reset", "password", "reset reset", "reset password")}
    assert sorted(query.indices) == sorted(expected)
    assert query.values == [1.0] * 4
    assert query.indices == sorted(query.indices)


def test_empty_text_is_an_empty_vector() -> None:
    assert SparseEncoder().document("the of and").indices == []
    assert SparseEncoder().query("").indices == []


def test_consecutive_words_count_as_phrases() -> None:
    encoder = SparseEncoder()
    assert phrases("The configuration file of the printer") == [
        "configur file", "file printer",
    ]  # fmt: skip
    query = encoder.query("configuration file")
    assert term_index("configur file") in query.indices
    together = encoder.document("the configuration file is read at boot")
    apart = encoder.document("the configuration is read from a file at boot")

    def score(document: SparseVector) -> float:
        weights = dict(zip(document.indices, document.values, strict=True))
        return float(sum(weights.get(i, 0.0) for i in query.indices))

    assert score(together) > score(apart)


def test_identifiers_in_a_query_are_flags_codes_and_joined_names() -> None:
    assert identifier_terms("what does --no-hardlinks do") == ["hardlink", "no-hardlinks"]
    assert identifier_terms("error XJ-4471 on the router") == ["xj", "4471", "xj-4471"]
    assert identifier_terms("pam_faillock and /etc/gshadow") == [
        "pam_faillock",
        "etc",
        "gshadow",
        "etc/gshadow",
    ]
    assert identifier_terms("SHA384 digests") == ["sha384"]
    # Plain words, hyphenated words and bare numbers are not identifiers.
    assert identifier_terms("How do I return a kayak within 30 days?") == []
    assert identifier_terms("a post-processing tool") == []


def test_feedback_adds_the_terms_most_of_the_best_matches_share() -> None:
    query = SparseEncoder().query("stop a package from being upgraded")
    hold, apt, kernel = term_index("hold"), term_index("apt"), term_index("kernel")
    feedback = [frozenset({hold, apt}), frozenset({hold, kernel}), frozenset({hold, apt})]
    widened = with_feedback(query, feedback, weight=0.3, min_chunks=2)
    weights = dict(zip(widened.indices, widened.values, strict=True))
    assert weights[hold] == pytest.approx(0.3)  # in all three
    assert weights[apt] == pytest.approx(0.2)  # in two of three
    assert kernel not in weights  # in one only
    # The asker's own terms keep their weight.
    for index, value in zip(query.indices, query.values, strict=True):
        assert weights[index] == pytest.approx(value)
    assert widened.indices == sorted(widened.indices)
    assert with_feedback(query, [], weight=0.3, min_chunks=2) == query
