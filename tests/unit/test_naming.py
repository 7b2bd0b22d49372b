"""The naming rule of `ragline.system` holds, and the API's services are the system's."""

from __future__ import annotations

import re
import typing
from functools import cached_property

from api.state import Services
from ragline.system import System


def _named_for(kind: type) -> str:
    """The attribute a service or repository class is reached by: `XxxService` is
    `xxx_service`, `XxxRepository` is `xxx_repo`."""
    words = re.sub(r"(?<!^)(?=[A-Z])", "_", kind.__name__).lower()
    return words.removesuffix("_repository") + "_repo" if words.endswith("_repository") else words


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
    # Each is built once per process, as a cached attribute.
    reached = [name for name in vars(System) if name.endswith(("_service", "_repo"))]
    assert sorted(reached) == sorted(named)
    for name in named:
        kind = _built(name)
        # A variant of a service (the retiring sync) is named for it with a qualifier in front.
        canonical = _named_for(kind)
        assert name == canonical or name.endswith(f"_{canonical}"), (name, kind)
        assert kind.__name__.endswith(("Service", "Repository")), (name, kind)
    for name, value in vars(System).items():
        if isinstance(value, cached_property) and name not in named:
            kind = _built(name)
            if isinstance(kind, type):
                assert not kind.__name__.endswith(("Service", "Repository")), (name, kind)


def test_every_service_the_api_calls_is_built_by_the_system_as_that_class() -> None:
    wanted = {
        name: typing.get_type_hints(member.fget)["return"]
        for name, member in vars(Services).items()
        if isinstance(member, property)
    }
    assert len(wanted) >= 17
    for name, kind in wanted.items():
        assert _built(name) is kind, name
