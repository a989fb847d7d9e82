"""Do the image tokens say where they sit in the picture? (#13)

The spatial client twins (``synth-spatial``, the spatial statements of ``synth-pair-relation``,
the Bongard-HOI relations) stay at chance under a LoRA. Each picture reaches the language model
as nine image tokens, one per cell of the 3 x 3 scene grid, in reading order; the vision heads
of pretraining read every cell with the same weights, so nothing asks a token to carry its
cell. This script fits linear probes (:func:`picture_gap.linear_probe`, on the first 3/4 of the
tokens, scored on the rest) for an image token's cell (one of nine), per layer of the model
(0 = the projected token the language model receives), over every image token and over the
tokens whose cell holds an object (an empty cell may be told by its background and borders).
A token whose cell the probe finds at layer 0 carries it in its content; a later layer can
only have it from the attention pattern (the language model's rotary positions).

    python benchmarks/position_gap.py [--model-cache DIR] [--model tiny-llava-qwen]
        [--tasks synth-spatial synth-pair-relation] [--samples 400] [--seed 0] [--json FILE]

One thread, CPU: about a minute per task at the defaults.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import torch
from picture_gap import hidden_states, linear_probe, probe_main

DEFAULT_TASKS = ("synth-spatial", "synth-pair-relation")
CELLS = 9


def token_cells(sample: dict[str, Any]) -> list[tuple[int, bool]]:
    """Per image token of ``sample``, in prompt order (nine per picture, row by row): its grid
    cell and whether an object's centre lies in it (from ``meta["scenes"]``)."""
    from drake.synth.scene import Scene

    meta = sample["meta"]
    meta = json.loads(meta) if isinstance(meta, str) else meta
    out = []
    for summary in meta["scenes"]:
        held = {obj.cell() for obj in Scene.from_summary(summary).objects}
        out += [(cell, cell in held) for cell in range(CELLS)]
    return out


def cell_probes(tokens: Sequence[torch.Tensor], samples: Sequence[dict[str, Any]]
                ) -> dict[str, Any]:
    """Per layer, the probe accuracy of a token's cell over ``all`` tokens and over the
    ``occupied`` ones, with the counts of ``tokens`` and of those ``holding`` an object;
    ``tokens[i]`` is sample ``i``'s ``(layers + 1, tokens, hidden)``."""
    x = torch.cat([t.transpose(0, 1) for t in tokens])  # tokens, layers + 1, hidden
    labels = [label for s in samples for label in token_cells(s)]
    if len(labels) != len(x):
        raise ValueError(f"{len(x)} image tokens but {len(labels)} cells in the samples' scenes")
    cells = torch.tensor([cell for cell, _ in labels])
    held = torch.tensor([occupied for _, occupied in labels])
    out: dict[str, Any] = {"tokens": len(labels), "holding": int(held.sum()), "all": [],
                           "occupied": []}
    for layer in range(x.shape[1]):
        out["all"].append(linear_probe(x[:, layer], cells, (3 * len(cells)) // 4,
                                       classes=CELLS))
        kept = x[held, layer]
        out["occupied"].append(linear_probe(kept, cells[held], (3 * len(kept)) // 4,
                                            classes=CELLS))
    return out


def measure(bundle: Any, task: str, count: int, seed: int) -> dict[str, Any]:
    from drake.synth.catalog import generate_sample

    samples = [generate_sample(task, "train", i, seed) for i in range(count)]
    tokens, _, _ = hidden_states(bundle, samples)
    return {"task": task, "samples": count, **cell_probes(tokens, samples)}


def table(result: dict[str, Any]) -> str:
    pct = lambda v: f"{100 * v:.1f}"  # noqa: E731
    return (f"{result['task']} ({result['samples']} samples, {result['tokens']} image tokens, "
            f"{result['holding']} holding an object): a token's cell by layer (chance "
            f"{pct(1 / CELLS)}), all tokens " + ", ".join(pct(v) for v in result["all"])
            + "; occupied " + ", ".join(pct(v) for v in result["occupied"]))


def main() -> None:
    probe_main(__doc__, DEFAULT_TASKS, 400, measure, table)


if __name__ == "__main__":
    main()
