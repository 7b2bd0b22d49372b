"""Outside local mode, placeholder secrets are refused before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from infra.settings import Settings
from infra.settings.stages import RelaySettings

REAL = {
    "local_mode": False,
    "admin_token": "t0k3n-Long-and-random",
    "internal_secret": "s3cret-Long-and-random",
    "qdrant": {"url": "http://qdrant.internal:6333"},
}


def test_real_secrets_outside_local_mode_are_accepted() -> None:
    settings = Settings.model_validate(REAL)
    assert settings.local_mode is False


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("admin_token", "", "RAGLINE_ADMIN_TOKEN must be set to a real secret"),
        ("admin_token", "changeme", "RAGLINE_ADMIN_TOKEN must be set to a real secret"),
        ("internal_secret", " Secret ", "RAGLINE_INTERNAL_SECRET must be set to a real secret"),
        ("internal_secret_previous", "password", "RAGLINE_INTERNAL_SECRET_PREVIOUS"),
        # The deployment bundles' fill-ins (deploy/k8s/config.yaml), applied unchanged.
        ("admin_token", "<a long random token>", "RAGLINE_ADMIN_TOKEN must be set"),
        ("internal_secret", "<a long random secret>", "RAGLINE_INTERNAL_SECRET must be set"),
    ],
)
def test_placeholder_secrets_are_refused_outside_local_mode(
    field: str, value: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings.model_validate({**REAL, field: value})
    # Local mode generates its own secrets and accepts anything.
    Settings.model_validate({**REAL, "local_mode": True, field: value})


def test_the_embedded_vector_store_is_refused_outside_local_mode() -> None:
    with pytest.raises(ValidationError, match="RAGLINE_QDRANT__URL"):
        Settings.model_validate({**REAL, "qdrant": {}})


def test_the_api_process_refuses_to_start_with_a_placeholder_secret() -> None:
    env = {
        **os.environ,
        "RAGLINE_LOCAL_MODE": "false",
        "RAGLINE_ADMIN_TOKEN": "changeme",
        "RAGLINE_INTERNAL_SECRET": "s3cret-Long-and-random",
        "RAGLINE_QDRANT__URL": "http://127.0.0.1:9",
    }
    done = subprocess.run(
        [sys.executable, "-m", "ragline.api"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "RAGLINE_ADMIN_TOKEN must be set to a real secret" in done.stderr
    # The refused value itself is never printed.
    assert "changeme" not in done.stderr + done.stdout


def test_a_stage_variable_changes_only_the_field_it_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGLINE_STAGES__INDEX__MAX_ATTEMPTS", "7")
    monkeypatch.setenv("RAGLINE_STAGES__EXTRACT__TIME_LIMIT_S", "60")
    stages = Settings().stages
    assert (stages.index.max_attempts, stages.index.time_limit_s) == (7, 120)
    assert (stages.extract.max_attempts, stages.extract.time_limit_s) == (3, 60)
    assert (stages.embed.max_attempts, stages.embed.time_limit_s) == (3, 300)


def test_uncounted_restarts_are_bounded_no_tighter_than_counted_ones() -> None:
    with pytest.raises(ValidationError, match="max_uncounted_redrives"):
        RelaySettings(max_redrives=5, max_uncounted_redrives=4)
    relay = RelaySettings(max_redrives=5, max_uncounted_redrives=5)
    assert (relay.max_redrives, relay.max_uncounted_redrives) == (5, 5)
    assert RelaySettings().max_uncounted_redrives > RelaySettings().max_redrives
