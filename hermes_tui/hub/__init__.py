"""Model files: the catalog, models on this machine, downloads, imports.

Shared by ``hermes-tui models ...`` and the models screen. Nothing here prints or
imports the UI; long work (``download``) reports through a callback and stops when a
``threading.Event`` is set, so a screen can run it in a worker thread.
"""

from typing import TYPE_CHECKING

from hermes_tui.util.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from hermes_tui.hub.catalog import (
        CATALOG_PATH,
        ROLES,
        CatalogModel,
        default_chat_model,
        default_compression_model,
        load_catalog,
    )
    from hermes_tui.hub.downloads import DownloadProgress, download
    from hermes_tui.hub.errors import (
        CatalogError,
        DownloadCancelled,
        HubError,
        HubUnreachable,
        NotEnoughSpace,
    )
    from hermes_tui.hub.hf import hf_cache_dir, hub_endpoint
    from hermes_tui.hub.local import LocalModel, delete_model, find_local_model, local_models

# Each name's module, imported on first use: the app's first frame needs the catalog,
# not the downloads (and the archive libraries under them).
_MODULE_OF = {
    **dict.fromkeys(("CATALOG_PATH", "ROLES", "CatalogModel", "default_chat_model", "default_compression_model", "load_catalog"), "catalog"),
    **dict.fromkeys(("DownloadProgress", "download"), "downloads"),
    **dict.fromkeys(("CatalogError", "DownloadCancelled", "HubError", "HubUnreachable", "NotEnoughSpace"), "errors"),
    **dict.fromkeys(("hf_cache_dir", "hub_endpoint"), "hf"),
    **dict.fromkeys(("LocalModel", "delete_model", "find_local_model", "local_models"), "local"),
}


__getattr__ = lazy_exports(__name__, _MODULE_OF, globals())


__all__ = [
    "CATALOG_PATH",
    "ROLES",
    "CatalogError",
    "CatalogModel",
    "DownloadCancelled",
    "DownloadProgress",
    "HubError",
    "HubUnreachable",
    "LocalModel",
    "NotEnoughSpace",
    "default_chat_model",
    "default_compression_model",
    "delete_model",
    "download",
    "find_local_model",
    "hf_cache_dir",
    "hub_endpoint",
    "load_catalog",
    "local_models",
]
