"""The access table (who may read an item of each visibility) as `core.governance` compiles
it into readers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from core.governance import Governance, GovernanceChange, Reader, Visibility

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ADMIN = Reader.administrator()
OWNER = Reader.user("olga")
MEMBER = Reader.user("mia", ["ops"])
GRANTEE = Reader.user("gus")
STRANGER = Reader.user("sam")
BOT = Reader.tenant_wide()


def readable_by(governance: Governance) -> set[str]:
    named = {"admin": ADMIN, "owner": OWNER, "member": MEMBER, "grantee": GRANTEE}
    named |= {"stranger": STRANGER, "bot": BOT}
    return {name for name, reader in named.items() if reader.can_read(governance.readers())}


@pytest.mark.parametrize(
    ("visibility", "audiences", "grants", "expected"),
    [
        (Visibility.PRIVATE, [], ["gus"], {"admin", "owner"}),
        (Visibility.SHARED, [], [], {"admin", "owner", "member", "grantee", "stranger", "bot"}),
        (Visibility.SHARED, ["ops"], ["gus"], {"admin", "owner", "member"}),
        (Visibility.RESTRICTED, [], ["gus"], {"admin", "owner", "grantee"}),
        (Visibility.RESTRICTED, ["ops"], ["gus"], {"admin", "owner", "member", "grantee"}),
    ],
)
def test_each_visibility_reads_as_the_access_table_says(
    visibility: Visibility, audiences: list[str], grants: list[str], expected: set[str]
) -> None:
    governance = Governance(
        owner_user_id="olga",
        visibility_mode=visibility,
        audience_tags=audiences,
        user_grants=grants,
    )
    assert readable_by(governance) == expected


def test_an_archived_item_is_read_by_nobody() -> None:
    governance = Governance(owner_user_id="olga", archived_at=NOW)
    assert governance.readers() == []
    assert readable_by(governance) == set()


def test_a_change_sets_only_the_fields_it_names() -> None:
    base = Governance(owner_user_id="olga", visibility_mode=Visibility.PRIVATE, tags=["a"])
    changed = GovernanceChange(user_grants=["gus"], visibility_mode="restricted").apply(base, NOW)
    assert (changed.owner_user_id, changed.tags, changed.user_grants) == ("olga", ["a"], ["gus"])
    archived = GovernanceChange(archived=True).apply(changed, NOW)
    assert archived.archived_at == NOW
    assert GovernanceChange(archived=False).apply(archived, NOW).archived_at is None
    assert GovernanceChange().empty


@pytest.mark.parametrize("bad", [{"audience_tags": ["no spaces"]}, {"user_grants": [":x"]}])
def test_malformed_names_are_refused(bad: dict[str, list[str]]) -> None:
    with pytest.raises(ValidationError):
        GovernanceChange.model_validate(bad)


def test_who_manages_an_item() -> None:
    governance = Governance(owner_user_id="olga")
    assert ADMIN.manages(governance)
    assert OWNER.manages(governance)
    assert not GRANTEE.manages(governance)
    assert not BOT.manages(governance)
