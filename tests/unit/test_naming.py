"""The naming rule of `ragline.system` holds, and the API finds every service it asks for."""

from __future__ import annotations

import typing
from functools import cached_property
from typing import Annotated, get_args, get_origin

import pytest

import api.deps
from infra.audit_repository import AuditRepository
from infra.blob_store import BlobStore
from ragline.system import System, attribute_of
from services.search.search_service import SearchService


def _built(name: str) -> type:
    """The class a `System` attribute is declared to hold."""
    attribute = vars(System)[name]
    assert isinstance(attribute, cached_property), name
    hints = typing.get_type_hints(attribute.func)
    kind: type = hints["return"]
    return kind


def test_services_and_repositories_are_reached_by_the_name_of_their_class() -> None:
    named = [
        name
        for name, value in vars(System).items()
        if isinstance(value, cached_property) and name.endswith(("_service", "_repo"))
    ]
    assert len(named) > 20
    # Each is built once per process (a method `open_xxx_service` builds a new one each call).
    reached = [
        name
        for name in vars(System)
        if name.endswith(("_service", "_repo")) and not name.startswith("open_")
    ]
    assert sorted(reached) == sorted(named)
    for name in named:
        kind = _built(name)
        # A variant of a service (the retiring sync) is named for it with a qualifier in front.
        canonical = attribute_of(kind)
        assert name == canonical or name.endswith(f"_{canonical}"), (name, kind)
        assert kind.__name__.endswith(("Service", "Repository")), (name, kind)
    for name, value in vars(System).items():
        if isinstance(value, cached_property) and name not in named:
            kind = _built(name)
            if isinstance(kind, type):
                assert not kind.__name__.endswith(("Service", "Repository")), (name, kind)


def test_every_dependency_alias_of_the_api_names_a_class_the_system_builds() -> None:
    aliases = {
        name: get_args(value)[0]
        for name, value in vars(api.deps).items()
        if get_origin(value) is Annotated and name.endswith(("ServiceDep", "RepositoryDep"))
    }
    assert len(aliases) >= 17
    for name, kind in aliases.items():
        assert name == f"{kind.__name__}Dep"
        assert _built(attribute_of(kind)) is kind


def test_the_system_finds_a_service_by_its_class_and_refuses_other_classes() -> None:
    system = System.__new__(System)
    vars(system)["search_service"] = marker = object.__new__(SearchService)
    assert system.get(SearchService) is marker
    with pytest.raises(LookupError, match="neither a service nor a repository"):
        system.get(BlobStore)
    assert attribute_of(AuditRepository) == "audit_repo"
