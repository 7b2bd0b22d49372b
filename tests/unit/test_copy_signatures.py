"""Copy signatures: computed once per chunk, compared at query time (pure logic, ~0.1 s)."""

from __future__ import annotations

import random

import pytest

from core.copies import MAX_KEPT, SHINGLE_WORDS, Signature, copy_signature, words_of


def _exact_overlap(first: str, second: str) -> float:
    """The overlap coefficient of the two texts' whole shingle sets."""

    def shingles(text: str) -> set[tuple[str, ...]]:
        words = words_of(text)
        return {tuple(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)}

    a, b = shingles(first), shingles(second)
    return len(a & b) / min(len(a), len(b))


def _prose(words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    vocabulary = [f"word{n}" for n in range(3000)]
    return [rng.choice(vocabulary) for _ in range(words)]


def test_a_signature_is_the_same_in_every_process_and_reads_back() -> None:
    # A fixed text's stored form: the hash does not depend on the process (no hash seed).
    assert copy_signature("Error E42") == "0:qko="
    text = " ".join(_prose(150, seed=1))
    stored = copy_signature(text)
    assert Signature.decode(stored) == Signature.of(text)
    assert copy_signature(text) == stored


def test_a_long_text_keeps_a_sample_chosen_by_the_shingle_alone() -> None:
    long = " ".join(_prose(2000, seed=2))
    signature = Signature.of(long)
    assert signature.level >= 3
    assert 0 < len(signature.hashes) <= MAX_KEPT
    step = 1 << signature.level
    assert all(h % step == 0 for h in signature.hashes)
    # A short text is kept whole, and compared with a long one at the long one's level.
    inside = " ".join(long.split()[500:700])
    assert Signature.of(inside).level == 0
    assert Signature.of(inside).overlap(signature) == pytest.approx(1.0, abs=0.1)


def test_sampled_overlaps_follow_the_exact_ones() -> None:
    words = _prose(3000, seed=3)
    for shift in (0, 200, 600, 900, 1400):
        first = " ".join(words[:1500])
        second = " ".join(words[shift : shift + 1500])
        sampled = Signature.of(first).overlap(Signature.of(second))
        assert sampled == pytest.approx(_exact_overlap(first, second), abs=0.12)


def test_unrelated_texts_share_almost_nothing_despite_16_bit_hashes() -> None:
    first, second = " ".join(_prose(200, seed=4)), " ".join(_prose(200, seed=5))
    assert Signature.of(first).overlap(Signature.of(second)) < 0.05


def test_a_union_holds_both_texts() -> None:
    words = _prose(400, seed=6)
    left, right = " ".join(words[:200]), " ".join(words[200:])
    both = Signature.of(left).union(Signature.of(right))
    assert Signature.of(left).overlap(both) == 1.0
    assert both.overlap(Signature.of(" ".join(words))) > 0.95


def test_an_unreadable_signature_is_refused() -> None:
    with pytest.raises(ValueError, match="not a copy signature"):
        Signature.decode("0:not base64!")
    with pytest.raises(ValueError, match="2-byte values"):
        Signature.decode("0:AA==")  # one byte: not a 16-bit hash
