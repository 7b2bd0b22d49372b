"""MongoDB settings: the connection and its bounds."""

from __future__ import annotations

from pydantic import BaseModel, Field


class MongoSettings(BaseModel):
    """MongoDB connection."""

    url: str = Field(
        default="mongodb://127.0.0.1:27017/?directConnection=true",
        description="MongoDB connection string.",
    )
    database: str = Field(default="ragline", description="Name of the MongoDB database.")
    timeout_ms: int = Field(
        default=5_000,
        ge=100,
        description="Server selection and connection timeout (ms).",
    )
