"""What a method trains and sends, counted from the method itself on a given model.

:func:`parameter_counts` installs a method on a bundle, lets ``clients`` clients run
:meth:`~baselines.base.Method.local_train` with a budget of zero steps (so each returns exactly the
upload it would send, untrained), hands the uploads to the method's own
:meth:`~baselines.base.Method.aggregate`, and counts: the parameters a client trains, the
parameters of its upload, and those of the message it gets back. Nothing is read from a table,
so a count moves when a method's code does.

Shapes are all that matter, so a real model can be counted without its weights: build it from
its config (``python benchmarks/clip_comm.py`` does OpenAI's ViT-B/16 CLIP, the pFedMMA tables'
backbone).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from baselines.base import ClientInfo, Method, Payload

__all__ = ["OPENAI_CLIP_SHAPES", "Compute", "Counts", "measure_compute", "parameter_counts",
           "shape_bundle"]


@dataclass(frozen=True)
class Counts:
    """Per-client parameter counts of one method on one model (client 0's; every client of a
    homogeneous federation has the same)."""

    trainable: int
    up: int
    down: int


def _probe(cid: int, arch: str, bundle: Any, control: Any):
    """A client handle with no step to take and no data: what a client sends untrained."""
    from drake.runtime.client import ClientRecord, RuntimeClient

    return RuntimeClient(cid, arch, bundle, control, ClientRecord(), [], None, round_=0,
                         steps=0, batch_size=1, lr=1e-3, seed=0)


def _numel(payload: Payload) -> int:
    return sum(t.numel() for s in payload.tensors.values() for t in s.values())


def parameter_counts(method: Method, bundle: Any, arch: str, *, clients: int = 10,
                     seed: int = 0) -> Counts:
    """Install ``method`` on ``bundle`` (its model is changed in place) and count, for client 0
    of ``clients`` equal clients, its trainable, uploaded and downloaded parameters per round."""
    from drake.runtime.local import install_adapters

    for p in bundle.model.parameters():
        p.requires_grad_(False)
    control = install_adapters(method, {arch: bundle}, seed=seed)[arch]
    trainable = sum(p.numel() for name in control.names for p in control.params(name))
    uploads = {c: method.local_train(_probe(c, arch, bundle, control)) for c in range(clients)}
    infos = {c: ClientInfo(c, arch, 1) for c in range(clients)}
    messages = method.aggregate(uploads, infos, 0)
    down = _numel(messages[0]) if 0 in messages else 0
    return Counts(trainable=trainable, up=_numel(uploads[0]), down=down)


#: The published shapes of OpenAI's CLIP (``config.json`` of ``openai/clip-vit-base-patch16``
#: and ``-patch32`` on the Hub): enough to build the model without its weights.
OPENAI_CLIP_SHAPES: Mapping[str, Mapping[str, Any]] = {
    name: {"projection_dim": 512,
           "text_config": {"vocab_size": 49408, "hidden_size": 512, "intermediate_size": 2048,
                           "num_hidden_layers": 12, "num_attention_heads": 8,
                           "max_position_embeddings": 77},
           "vision_config": {"hidden_size": 768, "intermediate_size": 3072,
                             "num_hidden_layers": 12, "num_attention_heads": 12,
                             "image_size": 224, "patch_size": patch}}
    for name, patch in (("clip-vit-b16", 16), ("clip-vit-b32", 32))
}


def shape_bundle(name: str = "clip-vit-b16", seed: int = 0):
    """A :class:`~drake.models.clip.ClipBundle` of ``name``'s published shapes with random
    weights, and the drake tokenizer standing in for CLIP's (prompt lengths, not ids, matter to a
    count). No download."""
    from transformers import CLIPConfig, CLIPModel

    from drake.models import load_model
    from drake.models.clip import ClipBundle, HubClip
    from drake.models.zoo import CLIP_ZOO

    shapes = OPENAI_CLIP_SHAPES[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CLIPModel(CLIPConfig(**shapes))
    tokenizer = load_model("tiny-clip", pretrained=False, seed=seed).tokenizer
    return ClipBundle(name, CLIP_ZOO[name], HubClip(model), tokenizer,
                      pixel_fn=lambda images: torch.zeros(len(images), 3, 224, 224))


@dataclass(frozen=True)
class Compute:
    """One method's measured cost per local iteration (FedMosaic's Tab. 10 terms): model FLOPs
    of its clients' training and of its server step, per client iteration, and the parameters
    its models hold (base model and every adapter) summed over the federation's
    architectures."""

    client_flops: float
    server_flops: float
    params: int

    @property
    def flops(self) -> float:
        return self.client_flops + self.server_flops


def measure_compute(config: Any) -> Compute:
    """Measure a method's Tab. 10 costs on a run configuration (``RunConfig``): one round
    trained and aggregated as warm-up (so that round 1 carries what methods send back, e.g.
    FedMKT's logits), then round 1's client training and the server's aggregation counted with
    ``torch.utils.flop_counter.FlopCounterMode`` (every aten op of the models, forward and
    backward), divided by the iterations the round's clients took. Evaluation is not counted.
    """
    from torch.utils.flop_counter import FlopCounterMode

    from drake.runtime import LocalRuntime

    rt = LocalRuntime(config)
    records, pending, errors = rt._fresh_records(), {}, []

    def infos(r: int) -> dict[int, ClientInfo]:
        return {c: ClientInfo(c, rt.models[c], len(rt.data.streams[c].seen(r)))
                for c in range(rt.data.num_clients)}

    uploads = rt.train_round(0, records, pending, errors)
    pending.update(rt.method.aggregate(uploads, infos(0), 0))
    with FlopCounterMode(display=False) as client:
        uploads = rt.train_round(1, records, pending, errors)
    with FlopCounterMode(display=False) as server:
        rt.method.aggregate(uploads, infos(1), 1)
    iterations = sum(rt.client_steps(c, 1) for c in uploads)
    params = sum(sum(p.numel() for p in b.model.parameters()) for b in rt.bundles.values())
    return Compute(client.get_total_flops() / iterations,
                   server.get_total_flops() / iterations, params)
