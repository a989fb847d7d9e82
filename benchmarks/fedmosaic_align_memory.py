"""Memory of FedMosaic's PQ-LoRA alignment (FedMosaic §4.2.2) on the shipped tiny pair.

Before federated training, ``fedmosaic`` and ``fedmosaic-pqlora`` align the larger model's
frozen PQ-LoRA ``A``/``B`` to the smaller model's on public samples
(``baselines.fedmosaic.align.align_pair``), keeping every attended token's features of every
PQ-LoRA layer of both models. This script prints, for the runtime's settings (r 8, N_B 4,
every linear layer of a block-end layer, ``--samples`` public samples):

* the bytes of those features if each layer kept its own inputs and outputs, and the bytes
  kept now (layers that read one tensor share it; the outputs are kept only for
  ``b_features="layer"``), per model;
* the peak RSS of a fresh process that loads both models and aligns them (``--b-features``).

Measured (2 cores, 256 samples, ``b_features="adapter"``): per model the features took 361 MB
(llama) and 422 MB (qwen) when every layer kept its own inputs and outputs, and take 114 MB and
138 MB now; the aligning process peaked at 1,862 MB before and 1,088 MB now (429 MB with the
models loaded), with the same held-out MSE (2.09 -> 0.289).

    python benchmarks/fedmosaic_align_memory.py [--samples 256] [--b-features adapter]

The alignment runs once per model pair and is cached next to the models, so this is the peak
of a run's set-up when the cache is cold (the first FedMosaic run of a seed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

MODELS = ("tiny-llava-llama", "tiny-llava-qwen")


def pair_and_samples(count: int) -> tuple[list, list[dict]]:
    """Both shipped tiny models with PQ-LoRA as FedMosaic puts it (r 8, N_B the shallowest
    model's, at most 4) and ``count`` public samples (open and multi-picture, alternately)."""
    from baselines.fedmosaic import block_map, inject_pqlora
    from drake.models import load_model
    from drake.synth.catalog import generate_sample

    pair = [load_model(name) for name in MODELS]
    nb = min(4, *(b.num_layers for b in pair))  # as FedMosaic.install
    for bundle in pair:
        inject_pqlora(bundle.model, block_map(bundle.num_layers, nb), r=8)
    tasks = ("synth-public-open", "synth-public-multi")
    return pair, [generate_sample(tasks[i % 2], "public", i, seed=0) for i in range(count)]


def align_peak(count: int, b_features: str) -> dict[str, float]:
    """In this process (a fresh one): load the pair, align it, and read the peak RSS."""
    import resource

    import torch

    from baselines.fedmosaic import align_pair

    torch.manual_seed(0)
    pair, samples = pair_and_samples(count)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    same = pair[0].tokenizer.get_vocab() == pair[1].tokenizer.get_vocab()  # as FedMosaic.setup
    report = align_pair(pair[0], pair[1], samples, b_features=b_features,
                        pool="tokens" if same else "mean")
    return {"rss_before_mb": rss, "mse_before": report.mse_before,
            "mse_after": report.mse_after,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def feature_bytes(count: int) -> dict[str, dict[str, float]]:
    """Per model: MB of the features one layer at a time would keep, and MB kept now."""
    from baselines.fedmosaic import collect_features

    pair, samples = pair_and_samples(count)
    out = {}
    for name, bundle in zip(MODELS, pair):
        feats, tokens = collect_features(bundle, samples, outputs=True)
        separate = sum(f.inputs.nbytes + f.outputs.nbytes for f in feats.values())
        kept = {id(f.inputs): f.inputs.nbytes for f in feats.values()}
        with_outputs = sum(kept.values()) + sum(f.outputs.nbytes for f in feats.values())
        out[name] = {"rows": int(tokens.numel()), "layers": len(feats),
                     "separate_mb": separate / 2**20, "kept_mb": sum(kept.values()) / 2**20,
                     "kept_with_outputs_mb": with_outputs / 2**20}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=256,
                        help="public samples (the runtime's align_samples)")
    parser.add_argument("--b-features", choices=("adapter", "layer"), default="adapter")
    parser.add_argument("--align-only", action="store_true",
                        help="(the child process) align and print the peak as JSON")
    args = parser.parse_args()
    if args.align_only:
        print(json.dumps(align_peak(args.samples, args.b_features)))
        return
    # the child first: on Linux a child's ru_maxrss starts at its parent's RSS at fork time
    child = subprocess.run([sys.executable, __file__, "--align-only", "--samples",
                            str(args.samples), "--b-features", args.b_features],
                           capture_output=True, text=True)
    if child.returncode:
        raise SystemExit(f"the alignment process failed:\n{child.stderr}")
    result = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"align_pair (b_features={args.b_features!r}): peak RSS {result['peak_rss_mb']:.0f} MB "
          f"(models loaded: {result['rss_before_mb']:.0f} MB); held-out MSE "
          f"{result['mse_before']:.3g} -> {result['mse_after']:.3g}")

    for name, row in feature_bytes(args.samples).items():
        print(f"{name}: {row['rows']} token rows x {row['layers']} PQ-LoRA layers; features "
              f"kept per layer {row['separate_mb']:.0f} MB, kept now {row['kept_mb']:.0f} MB "
              f"({row['kept_with_outputs_mb']:.0f} MB with b_features='layer')")


if __name__ == "__main__":
    main()
