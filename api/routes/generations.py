"""The vector store's generations: one per embedding model. Changing the model builds a new
generation in the background and switches searches to it when it is complete
(`schemas.index_generations`); only the deployment's admin token may see or change them."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.deadline import bulk_operation
from api.deps import DeploymentAdmin, GenerationServiceDep
from api.responses import AUTHENTICATED, BODY, refusals
from schemas.api import GenerationOut, GenerationsOut
from schemas.index_generations import ModelIdentity

router = APIRouter(prefix="/api/v1/generations", tags=["generations"], responses=AUTHENTICATED)


@router.get("")
async def list_generations(
    _: DeploymentAdmin, generation_service: GenerationServiceDep
) -> GenerationsOut:
    """Every generation, oldest first: its model, its state, and a build's progress (chunks
    copied of the total, rate, time left, check passes)."""
    generations = await generation_service.list()
    return GenerationsOut(items=[GenerationOut.of(g) for g in generations])


@router.get("/{number}", responses=refusals(404, 422))
async def get_generation(
    number: int, _: DeploymentAdmin, generation_service: GenerationServiceDep
) -> GenerationOut:
    """One generation, with its progress."""
    return GenerationOut.of(await generation_service.get(number))


# Loading the target model to check it takes seconds to tens of seconds: the bulk budget.
@router.post("", status_code=status.HTTP_202_ACCEPTED, responses=refusals(409, *BODY))
@bulk_operation
async def start_generation(
    model: ModelIdentity, principal: DeploymentAdmin, generation_service: GenerationServiceDep
) -> GenerationOut:
    """Starts building a generation for another embedding model: every live chunk is
    embedded again by it from the chunks already made, while searches go on with the live
    one; it goes live when it holds every chunk. 409 while another is being built, or if the
    live one already has this model; 422 if the model does not load or makes vectors of
    another size."""
    return GenerationOut.of(await generation_service.start(principal, model))


@router.post("/{number}/cancel", responses=refusals(404, 409, 422))
async def cancel_generation(
    number: int, principal: DeploymentAdmin, generation_service: GenerationServiceDep
) -> GenerationOut:
    """Stops building a generation (its store is dropped); the live one serves on as it was."""
    return GenerationOut.of(await generation_service.cancel(principal, number))


@router.post("/{number}/drop", responses=refusals(404, 409, 422))
async def drop_generation(
    number: int, principal: DeploymentAdmin, generation_service: GenerationServiceDep
) -> GenerationOut:
    """Drops a retired generation's store now, not after its grace period."""
    return GenerationOut.of(await generation_service.drop(principal, number))
