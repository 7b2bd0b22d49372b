"""Who may read a knowledge item, said once: owner, visibility, audiences and grants.

Every item (an uploaded document, a text, a connector's record, a wiki page) has an owner and a
visibility:

- `private`: its owner and the tenant's admins;
- `shared`: every user of the tenant, or, when it names `audience_tags`, only their members
  (and its owner and admins);
- `restricted`: the users in `user_grants`, the members of `audience_tags`, its owner and
  admins.

An archived item is read by nobody through search.

The rule is compiled into the item's *readers*: the principals that may read it
(`role:admin`, `tenant`, `user:<id>`, `audience:<tag>`). They are stored with the item and with
every one of its chunks in the vector store, and a caller is the set of principals it holds
(`Reader`), so "may read" is one test: do the two sets meet. The vector query filters on it, so
nothing unreadable ever leaves the store and top-k is filled with readable chunks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

ADMINS = "role:admin"
TENANT = "tenant"

# Audience tags and user ids: short, printable, no separators of the principal syntax.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$"
_NAME = re.compile(NAME_PATTERN)


def user_principal(user_id: str) -> str:
    """The principal of one user."""
    return f"user:{user_id}"


def audience_principal(tag: str) -> str:
    """The principal held by every member of an audience."""
    return f"audience:{tag}"


def valid_name(name: str) -> bool:
    """Whether `name` may be a user id or an audience tag."""
    return bool(_NAME.match(name))


class Visibility(StrEnum):
    """Who may read an item, before grants and audiences narrow or widen it."""

    PRIVATE = "private"
    SHARED = "shared"
    RESTRICTED = "restricted"


class Governance(BaseModel):
    """An item's ownership and visibility."""

    model_config = ConfigDict(frozen=True)

    owner_user_id: str | None = None
    creator_user_id: str | None = None
    visibility_mode: Visibility = Visibility.SHARED
    audience_tags: list[str] = Field(default_factory=list)
    user_grants: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    archived_at: datetime | None = None

    def readers(self) -> list[str]:
        """The principals that may read the item (none once it is archived), sorted."""
        if self.archived_at is not None:
            return []
        readers = {ADMINS}
        if self.owner_user_id:
            readers.add(user_principal(self.owner_user_id))
        audiences = {audience_principal(tag) for tag in self.audience_tags}
        if self.visibility_mode is Visibility.SHARED:
            readers |= audiences or {TENANT}
        elif self.visibility_mode is Visibility.RESTRICTED:
            readers |= audiences | {user_principal(user) for user in self.user_grants}
        return sorted(readers)

    @property
    def tenant_wide(self) -> bool:
        """Whether every user of the tenant may read it."""
        return TENANT in self.readers()


@dataclass(frozen=True)
class Reader:
    """A caller as the access rule sees it: the principals it holds.

    `admin` callers administer every item of their tenant (archived ones included) and read
    every unarchived one; a user reads what names them, their audiences or the tenant; a bot
    searching for nobody in particular reads only what the whole tenant may read.
    """

    principals: frozenset[str]
    user_id: str | None = None
    admin: bool = False

    @classmethod
    def administrator(cls, user_id: str | None = None) -> Reader:
        """An admin of the tenant (optionally a named user)."""
        principals = {ADMINS, TENANT}
        if user_id:
            principals.add(user_principal(user_id))
        return cls(frozenset(principals), user_id, admin=True)

    @classmethod
    def user(cls, user_id: str, audiences: Iterable[str] = ()) -> Reader:
        """A user of the tenant, a member of `audiences`."""
        principals = {TENANT, user_principal(user_id)} | {audience_principal(a) for a in audiences}
        return cls(frozenset(principals), user_id)

    @classmethod
    def tenant_wide(cls) -> Reader:
        """Anyone of the tenant: reads only what every user may read."""
        return cls(frozenset({TENANT}))

    def can_read(self, readers: Iterable[str]) -> bool:
        """Whether an item with these readers is readable by this caller."""
        return not self.principals.isdisjoint(readers)

    def owns(self, governance: Governance) -> bool:
        """Whether this caller is the item's owner."""
        return self.user_id is not None and governance.owner_user_id == self.user_id

    def manages(self, governance: Governance) -> bool:
        """Whether this caller may change or delete the item: its owner or an admin."""
        return self.admin or self.owns(governance)

    @property
    def key(self) -> tuple[str, ...]:
        """The principals, sorted: what an answer cached for this caller depends on."""
        return tuple(sorted(self.principals))


class GovernanceChange(BaseModel):
    """Governance fields a request sets; those left out keep their value (or the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    visibility_mode: Visibility | None = None
    audience_tags: list[str] | None = Field(default=None, max_length=100)
    user_grants: list[str] | None = Field(default=None, max_length=1000)
    owner_user_id: str | None = Field(default=None, pattern=NAME_PATTERN)
    tags: list[str] | None = Field(default=None, max_length=100)
    # True archives the item (gone from search, kept for admins); false brings it back.
    archived: bool | None = None

    @field_validator("audience_tags", "user_grants")
    @classmethod
    def _names(cls, values: list[str] | None) -> list[str] | None:
        if values is None:
            return None
        for value in values:
            if not valid_name(value):
                raise ValueError(f"{value!r} is not a valid user id or audience tag")
        return list(dict.fromkeys(values))

    @field_validator("tags")
    @classmethod
    def _tags(cls, values: list[str] | None) -> list[str] | None:
        if values is None:
            return None
        for value in values:
            if not value.strip() or len(value) > 100:
                raise ValueError("a tag is 1 to 100 characters")
        return list(dict.fromkeys(v.strip() for v in values))

    @property
    def empty(self) -> bool:
        """Whether it sets nothing."""
        return not self.model_fields_set

    def apply(self, base: Governance, now: datetime) -> Governance:
        """`base` with the fields this change sets."""
        changes: dict[str, object] = {
            name: getattr(self, name)
            for name in ("visibility_mode", "audience_tags", "user_grants", "owner_user_id", "tags")
            if name in self.model_fields_set and getattr(self, name) is not None
        }
        if self.archived is not None:
            changes["archived_at"] = (base.archived_at or now) if self.archived else None
        return base.model_copy(update=changes)
