"""Real-data source adapters, one module per source kind, loaded only when a build needs one.

``ADAPTERS`` maps a ``TaskSpec.source`` kind to ``"module:Class"`` so that importing this package
costs nothing: ``datasets`` and ``huggingface_hub`` load only inside the adapter that uses them.
"""

from __future__ import annotations

import importlib

from drake.adapters.base import Adapter, AdapterOptions, Conversion, Rejection

ADAPTERS: dict[str, str] = {
    "llava-tar": "drake.adapters.llava_tar:LlavaTarAdapter",
    "hf-classification": "drake.adapters.classification:HubClassificationAdapter",
    "fedbn-folder": "drake.adapters.folders:FedBNFolderAdapter",
    "local-image-folder": "drake.adapters.folders:ImageFolderAdapter",
    "hf-tap": "drake.adapters.tap:TapAdapter",
    "hf-llava-conversations": "drake.adapters.llava_conversations:LlavaConversationsAdapter",
}


def adapter_class(kind: str) -> type[Adapter]:
    """The adapter class for a source kind (imports its module on first use)."""
    from drake.errors import UnknownNameError

    if kind not in ADAPTERS:
        raise UnknownNameError(f"no source adapter for kind {kind!r}; known: {sorted(ADAPTERS)}")
    module, _, name = ADAPTERS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


__all__ = ["ADAPTERS", "Adapter", "AdapterOptions", "Conversion", "Rejection", "adapter_class"]
