"""What the HTTP layer calls: the process's services, opened by the composition root
(`ragline.api`) and handed to `api.app.create_app`.

The HTTP layer keeps no list of them: a route names the class it calls (a dependency alias in
`api.deps`), and the process finds it by that class (`ragline.system.System.get`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Protocol, TypeVar

from infra.settings import Settings

T = TypeVar("T")

# Each dependency's state: "ok" or what is wrong.
Readiness = Callable[[], Awaitable[dict[str, str]]]


class ServiceLookup(Protocol):
    """Finds the process's service (or repository) of a class."""

    def get(self, kind: type[T]) -> T:
        """The one instance of `kind` (a `LookupError` for a class the process does not
        build)."""
        ...


class ApiServices(ServiceLookup, Protocol):
    """The services behind the routes, the settings, and the probe behind `/readyz`."""

    @property
    def settings(self) -> Settings:
        """The process's settings."""
        ...

    @property
    def readiness(self) -> Readiness:
        """Checks each dependency."""
        ...


# Opens the services for the app's lifetime (closing them with the stack).
OpenServices = Callable[[AsyncExitStack], Awaitable[ApiServices]]
