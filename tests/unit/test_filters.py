"""The store-neutral filter read in Python: the semantics both vector stores give it."""

from __future__ import annotations

from core.filters import Filter, Match, MatchAny, Range, SearchScope

PAYLOAD = {
    "tenant_id": "t1",
    "kb_id": "kb1",
    "active": True,
    "readers": ["role:admin", "tenant"],
    "version": 3,
    "heading_path": ["Install", "Setup"],
}


def test_must_should_and_must_not_combine_as_in_qdrant() -> None:
    assert Filter(must=(Match("tenant_id", "t1"), Match("kb_id", "kb1"))).matches(PAYLOAD)
    assert not Filter(must=(Match("tenant_id", "t1"), Match("kb_id", "kb2"))).matches(PAYLOAD)
    assert Filter(should=(Match("kb_id", "kb2"), Match("kb_id", "kb1"))).matches(PAYLOAD)
    assert not Filter(should=(Match("kb_id", "kb2"), Match("kb_id", "kb3"))).matches(PAYLOAD)
    assert not Filter(must_not=(Match("active", True),)).matches(PAYLOAD)
    assert Filter().matches(PAYLOAD)


def test_a_nested_filter_is_a_condition() -> None:
    either = Filter(should=(Match("kb_id", "kb9"), Range("version", gte=3)))
    assert Filter(must=(Match("tenant_id", "t1"), either)).matches(PAYLOAD)
    assert not Filter(must=(Match("tenant_id", "t1"), Filter(must_not=(either,)))).matches(PAYLOAD)


def test_list_fields_match_on_any_element() -> None:
    assert Match("heading_path", "Setup").holds(PAYLOAD)
    assert MatchAny("heading_path", ("Usage", "Install")).holds(PAYLOAD)
    assert not Match("heading_path", "Usage").holds(PAYLOAD)


def test_missing_fields_and_mixed_types_never_match() -> None:
    assert not Match("url", "x").holds(PAYLOAD)
    assert not Range("page", gte=0).holds(PAYLOAD)
    # A boolean is not a number and a number is not a boolean.
    assert not Match("active", 1).holds(PAYLOAD)
    assert not Match("version", True).holds({"version": 1})
    assert not Range("active", gte=0).holds(PAYLOAD)
    # must_not on a missing field holds.
    assert Filter(must_not=(Match("url", "x"),)).matches(PAYLOAD)


def test_ranges_are_half_open() -> None:
    assert Range("version", gte=3, lt=4).holds(PAYLOAD)
    assert not Range("version", lt=3).holds(PAYLOAD)
    assert not Range("version", gte=4).holds(PAYLOAD)


def test_a_search_scope_admits_only_active_chunks_of_its_tenant_and_kbs() -> None:
    scope = SearchScope("t1", ("kb1", "kb2"), ("tenant",))
    assert scope.admits(PAYLOAD)
    assert not scope.admits({**PAYLOAD, "active": False})
    assert not scope.admits({**PAYLOAD, "tenant_id": "t2"})
    assert not scope.admits({**PAYLOAD, "kb_id": "kb3"})
    assert not SearchScope("t1", (), ("tenant",)).admits(PAYLOAD)
