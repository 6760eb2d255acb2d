"""The Hugging Face hub as it is set up now: endpoint, offline mode, cache folder, errors.

``HF_ENDPOINT`` and ``HF_HUB_OFFLINE`` are read from the environment at call time
(huggingface_hub reads them once, at import).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hermes_tui.hub.errors import HubError, HubUnreachable

IMPORT_HINT = "to use a model you have elsewhere: hermes-tui models import PATH"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_endpoint() -> str:
    """``HF_ENDPOINT`` as set now (huggingface_hub only reads it at import)."""
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or constants.ENDPOINT


def offline() -> bool:
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    return _truthy(env) or constants.is_offline_mode()


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache, the same one ``resolve_model_path`` searches."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE).expanduser()


def unreachable(endpoint: str, reason: str) -> HubUnreachable:
    return HubUnreachable(
        f"cannot reach the Hugging Face hub at {endpoint} ({reason}). "
        f"Models already downloaded still work; {IMPORT_HINT}"
    )


def first_line(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextmanager
def hub_errors(repo_id: str, endpoint: str, revision: str) -> Iterator[None]:
    """Turn huggingface_hub / httpx failures into one-line HubErrors."""
    import httpx2
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        yield
    except OfflineModeIsEnabled:
        raise unreachable(endpoint, "offline mode: HF_HUB_OFFLINE is set") from None
    except httpx2.TransportError as exc:
        raise unreachable(endpoint, first_line(exc)) from None
    except GatedRepoError:
        raise HubError(
            f"{repo_id} is gated: accept its terms at {endpoint}/{repo_id}, then log in "
            "(`hf auth login`, or set HF_TOKEN)"
        ) from None
    except RepositoryNotFoundError:
        raise HubError(
            f"{repo_id}: no such model on {endpoint} (if it is private, log in with `hf auth login` or set HF_TOKEN)"
        ) from None
    except RevisionNotFoundError:
        raise HubError(f"{repo_id}: no revision {revision!r} on {endpoint}") from None
    except RemoteEntryNotFoundError as exc:
        raise HubError(f"{repo_id}: a file listed by the hub is missing ({first_line(exc)})") from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise HubError(
                f"{repo_id}: access denied by {endpoint} (HTTP {status}); log in with `hf auth login`"
            ) from None
        raise HubError(f"{repo_id}: the hub at {endpoint} answered HTTP {status}: {first_line(exc, 100)}") from None
