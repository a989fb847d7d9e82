"""Zero-shot CLIP: the frozen model, scored with a hand-written class prompt; nothing trains.

The pFedMMA tables' "CLIP" row. ``template="generic"`` (the default) is the prompt the
federated repositories use, ``"a photo of a {}."``; ``template="coop"`` is CoOp's per-dataset
prompt (:data:`COOP_TEMPLATES`, by task id; other datasets take the generic one). Results
record which one ran (the method's hyper-parameters).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from baselines.base import Method, Payload, register

__all__ = ["COOP_TEMPLATES", "ZeroShotClip", "coop_template"]

GENERIC = "a photo of a {}."
#: CoOp's hand-written prompts of the base-to-novel datasets, by task id.
COOP_TEMPLATES = MappingProxyType({
    "oxford_pets": "a photo of a {}, a type of pet.",
    "flowers102": "a photo of a {}, a type of flower.",
    "fgvc_aircraft": "a photo of a {}, a type of aircraft.",
    "dtd": "{} texture.",
    "eurosat": "a centered satellite photo of {}.",
    "food101": "a photo of {}, a type of food.",
    "ucf101": "a photo of a person doing {}.",
})


def coop_template(task: str | None) -> str:
    """CoOp's prompt for ``task`` (``"a photo of a {}."`` where CoOp uses the generic one)."""
    return COOP_TEMPLATES.get(str(task or ""), GENERIC)


@register
class ZeroShotClip(Method):
    """Zero-shot CLIP: no adapter, no upload, no message; every client scores with the frozen
    model and the chosen prompt."""

    name = "clip-zeroshot"
    kinds = ("clip",)

    def __init__(self, lr: float = 0.0, template: str = "generic", **hp: Any) -> None:
        if template not in ("generic", "coop"):
            raise ValueError(f"template must be generic or coop, got {template!r}")
        super().__init__(lr=lr, template=template, **hp)
        self.template = template

    def adapters(self):
        return {}

    def eval_adapters(self) -> dict[str, float]:
        return {}

    def setup(self, bundles, public, *, seed, cache_dir=None) -> None:
        for bundle in bundles.values():
            bundle.template = (GENERIC if self.template == "generic"
                               else coop_template(getattr(bundle, "task", None)))

    def local_train(self, client) -> Payload:
        return Payload({}, {"loss": 0.0})

    def aggregate(self, uploads, clients, round) -> dict[int, Payload]:
        return {}

    def global_model(self, arch: str):
        """The frozen model is the global model: nothing to load."""
        return None
