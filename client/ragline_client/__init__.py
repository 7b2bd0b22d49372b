"""Ragline's Python client: `Ragline` (sync) and `AsyncRagline` (async) have the same methods,
one per operation of the API, with typed models for every request and answer
(`ragline_client.models`) and a typed error for every refusal (`ragline_client.errors`).

    from ragline_client import Ragline

    with Ragline(base_url="http://127.0.0.1:8000", token="rl_...") as ragline:
        kb = ragline.create_knowledge_base(name="Handbook", code="handbook")
        document = ragline.wait_until_final(ragline.upload_file("handbook", "refunds.pdf"))
        for hit in ragline.search("how long do refunds take?", kb_ids=["handbook"]).results:
            print(hit.citation, hit.content)
"""

from ragline_client._async.client import AsyncRagline
from ragline_client._shared import RetryPolicy
from ragline_client._sync.client import Ragline
from ragline_client.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RaglineError,
    RateLimitError,
    RetryableStatusError,
    ServiceUnavailableError,
    UnexpectedResponseError,
    UnsupportedMediaTypeError,
    WaitTimeout,
)

__version__ = "0.1.0"

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncRagline",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "InternalServerError",
    "InvalidRequestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Ragline",
    "RaglineError",
    "RateLimitError",
    "RetryPolicy",
    "RetryableStatusError",
    "ServiceUnavailableError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "WaitTimeout",
]
