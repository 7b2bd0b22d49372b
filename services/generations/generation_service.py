"""What admins do with the vector store's generations (`schemas.index_generations`): list them
with a build's progress, start a build for another embedding model, cancel it, drop a retired
one at once. The embedding model is the deployment's: only its own admin token may change it.
"""

from __future__ import annotations

import logging

from core.errors import Conflict, Forbidden, InvalidRequest, NotFound, PermanentError
from infra.embedding.encoders import Encoders
from infra.mongo.generation_repository import GenerationRepository
from infra.mongo.token_repository import BOOTSTRAP_TOKEN_ID
from schemas.domain import Principal
from schemas.index_generations import GenerationState, IndexGeneration, ModelIdentity

log = logging.getLogger(__name__)


class GenerationService:
    """Lists, starts, cancels and drops generations."""

    def __init__(self, generations: GenerationRepository, encoders: Encoders) -> None:
        self._generations = generations
        self._encoders = encoders

    def check_admin(self, principal: Principal) -> None:
        """`Forbidden` unless the caller holds the deployment's admin token: the model is the
        whole deployment's, not a tenant's."""
        _deployment_admin(principal)

    async def list(self) -> list[IndexGeneration]:
        """Every generation, oldest first."""
        return await self._generations.all()

    async def get(self, number: int) -> IndexGeneration:
        """One generation (`NotFound` if there is none of that number)."""
        found = await self._generations.get(number)
        if found is None:
            raise NotFound("generation", str(number))
        return found

    async def start(self, principal: Principal, model: ModelIdentity) -> IndexGeneration:
        """Starts building a generation for `model`, once it is known to load and to make
        vectors of its stated size (loaded here, it is ready when searches switch to it)."""
        _deployment_admin(principal)
        try:
            await self._encoders.get(model)
        except PermanentError as exc:
            raise InvalidRequest(f"the model {model.label} cannot be used: {exc}") from exc
        except Exception as exc:  # a model that fails to load says why, whatever raised it
            raise InvalidRequest(f"the model {model.label} does not load: {exc}") from exc
        generation = await self._generations.start(model, principal.token_id, principal.tenant_id)
        log.warning(
            "generation %d is being built for %s (asked by %s)",
            generation.number,
            model.label,
            principal.token_id,
        )
        return generation

    async def cancel(self, principal: Principal, number: int) -> IndexGeneration:
        """Stops building generation `number`; the live one serves on as it was."""
        _deployment_admin(principal)
        await self.get(number)
        cancelled = await self._generations.cancel(number, f"cancelled by {principal.token_id}")
        log.warning("the build of generation %d was cancelled", number)
        return cancelled

    async def drop(self, principal: Principal, number: int) -> IndexGeneration:
        """Drops a retired generation's store now rather than after its grace period."""
        _deployment_admin(principal)
        generation = await self.get(number)
        if generation.state is not GenerationState.RETIRED:
            raise Conflict(f"generation {number} is {generation.state.value}, not retired")
        return await self._generations.drop_now(number)


def _deployment_admin(principal: Principal) -> None:
    if principal.token_id != BOOTSTRAP_TOKEN_ID:
        raise Forbidden(
            "the embedding model is the whole deployment's: it is changed with the "
            "deployment's admin token"
        )
