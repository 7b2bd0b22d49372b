"""Who a caller is as a reader, and who owns and may read what they add: the rule of
`core.governance` applied with what is stored (audience memberships, the tenant's users and
audiences, the KB's default visibility, the previous version of a source)."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.errors import Forbidden, InvalidRequest, NotFound
from core.governance import Governance, GovernanceChange, Reader, Visibility
from infra.mongo.audience_repository import AudienceRepository
from infra.mongo.user_repository import UserRepository
from schemas.domain import Document, KnowledgeBase, Principal, Role, utcnow
from services.freshness_service import FreshnessService, Kind, reader_key


@dataclass(frozen=True)
class Submission:
    """Who adds an item and what governance they ask for."""

    reader: Reader
    change: GovernanceChange = field(default_factory=GovernanceChange)
    # Required to make a batch readable by the whole tenant when it names visibility `shared`
    # without an audience: without it, such a batch is refused.
    confirm_tenant_wide: bool = False

    @classmethod
    def connector(cls, change: GovernanceChange | None = None, confirm: bool = False) -> Submission:
        """A connector's records: added with the tenant's authority."""
        return cls(Reader.administrator(), change or GovernanceChange(), confirm)

    def source_key(self, key: str) -> str:
        """The version line an item joins: a user's own items form lines of their own, so one
        user's upload never replaces another's item of the same name."""
        if self.reader.admin or self.reader.user_id is None:
            return key
        return f"u:{self.reader.user_id}:{key}"


class PolicyService:
    """Resolves readers, and decides and checks items' governance."""

    def __init__(
        self, users: UserRepository, audiences: AudienceRepository, freshness: FreshnessService
    ) -> None:
        self._users = users
        self._audiences = audiences
        self._freshness = freshness

    async def reader(self, principal: Principal) -> Reader:
        """The caller of an API request as a reader."""
        if principal.role is Role.ADMIN:
            return Reader.administrator(principal.user_id)
        if principal.user_id is None:
            return Reader.tenant_wide()
        return await self.user(principal.tenant_id, principal.user_id)

    async def user(self, tenant_id: str, user_id: str) -> Reader:
        """A user of the tenant, with the audiences they belong to now (held in memory until an
        audience of the tenant changes)."""
        key = reader_key(tenant_id, user_id)
        held = self._freshness.held(Kind.READER, key)
        if isinstance(held, Reader):
            return held
        since = self._freshness.epoch
        reader = Reader.user(user_id, await self._audiences.of_user(tenant_id, user_id))
        self._freshness.hold(Kind.READER, key, reader, since)
        return reader

    async def for_new_item(
        self,
        tenant_id: str,
        kb: KnowledgeBase,
        by: Submission,
        previous: Governance | None = None,
    ) -> Governance:
        """The governance of one item being added (see `decide`), its names checked."""
        governance = self.decide(kb, by, previous)
        await self.check_exists(tenant_id, governance)
        return governance

    @staticmethod
    def decide(
        kb: KnowledgeBase,
        by: Submission,
        previous: Governance | None = None,
        *,
        batch: bool = False,
    ) -> Governance:
        """The governance of an item being added: the previous version's (or the default:
        the KB's visibility for an admin, private to a user), with the requested changes.
        The names it holds are not checked here (`check_exists`)."""
        reader = by.reader
        if previous is not None:
            base = previous
        elif reader.admin or reader.user_id is None:
            base = Governance(
                owner_user_id=reader.user_id,
                creator_user_id=reader.user_id,
                visibility_mode=kb.default_visibility,
            )
        else:
            base = Governance(
                owner_user_id=reader.user_id,
                creator_user_id=reader.user_id,
                visibility_mode=Visibility.PRIVATE,
            )
        change = by.change
        if (
            not reader.admin
            and change.owner_user_id is not None
            and change.owner_user_id != reader.user_id
        ):
            raise Forbidden("a user can only add items they own")
        governance = change.apply(base, utcnow())
        if (
            batch
            and change.visibility_mode is Visibility.SHARED
            and not governance.audience_tags
            and not by.confirm_tenant_wide
        ):
            raise InvalidRequest(
                "a shared batch without audience_tags is readable by the whole tenant: "
                "set confirm_tenant_wide to true, or name audience_tags"
            )
        return governance

    async def check_exists(self, tenant_id: str, governance: Governance) -> None:
        """422 naming any audience or user the governance names that does not exist."""
        audiences = await self._audiences.unknown(tenant_id, governance.audience_tags)
        if audiences:
            raise InvalidRequest(f"unknown audience: {', '.join(audiences)}")
        people = [governance.owner_user_id] if governance.owner_user_id else []
        users = await self._users.unknown(tenant_id, [*governance.user_grants, *people])
        if users:
            raise InvalidRequest(f"unknown user: {', '.join(users)}")

    @staticmethod
    def visible(reader: Reader, document: Document) -> bool:
        """Whether the caller may see the document (admins see archived ones too)."""
        return reader.admin or reader.can_read(document.readers)

    @classmethod
    def readable(cls, reader: Reader, document: Document) -> Document:
        """The document if the caller may see it; else `NotFound`, so nobody learns that
        something they may not read exists."""
        if cls.visible(reader, document):
            return document
        raise NotFound("document", document.id)

    @classmethod
    def manageable(cls, reader: Reader, document: Document) -> Document:
        """The document if the caller may change or delete it: 404 if they cannot read it,
        403 if they can but are neither its owner nor an admin."""
        cls.readable(reader, document)
        if not reader.manages(document.governance):
            raise Forbidden("only the item's owner or an admin can change it")
        return document
