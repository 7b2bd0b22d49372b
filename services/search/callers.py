"""A starting API process learns its callers before their first request: whom the most
recently issued tokens stand for, the newest bots' access (a voice bot names its bot, with no
token), those tokens' users as readers and their tenants' KBs, each held in memory as a first
request would hold it (`services.freshness_service`). A MongoDB outage just after a restart
then refuses none of them; a change made later retires what was learnt as it retires what a
request read."""

from __future__ import annotations

from core.errors import NotFound
from infra.mongo.bot_repository import BotRepository
from services.policy_service import PolicyService
from services.search.access import AccessGuard
from services.search.search_service import SearchService
from services.token_service import TokenService


async def learn_callers(
    tokens: TokenService,
    bots: BotRepository,
    access: AccessGuard,
    policy: PolicyService,
    search: SearchService,
    limit: int,
) -> int:
    """Learns the callers of the `limit` newest tokens and the `limit` newest bots; returns
    how many tokens and bots."""
    principals = await tokens.learn(limit)
    bot_ids = [p.bot_id for p in principals if p.bot_id is not None]
    bot_ids += await bots.newest_ids(limit)
    for bot_id in dict.fromkeys(bot_ids):  # each once, in order
        try:
            await access.for_bot(bot_id)
        except NotFound:
            continue  # deleted meanwhile: its tokens and searches are refused anyway
    people = [p for p in principals if p.bot_id is None]
    for principal in people:
        await policy.reader(principal)
    for tenant_id in sorted({p.tenant_id for p in people}):
        await search.learn_tenant(tenant_id)
    return len(principals) + len(set(bot_ids))
