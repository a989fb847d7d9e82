"""FedMosaic's building blocks (Seo et al., "FedMosaic", §4 and A.1-A.4, A.21).

* :mod:`~baselines.fedmosaic.blocks`: block-wise placement of PQ-LoRA (Eq. 7, Alg. 2);
* :mod:`~baselines.fedmosaic.pqlora`: the PQ-LoRA layer (Eq. 6, 20), gated local/global fusion
  (Eq. 9) for PQ-LoRA and peft LoRA layers, and width-free ``P``/``Q`` states keyed by block;
* :mod:`~baselines.fedmosaic.align`: one-off A/B alignment across architectures on public data
  (Eq. 8, 21-25, Alg. 3-4), with a safetensors cache;
* :mod:`~baselines.fedmosaic.sima`: similarity-aware aggregation (Eq. 3-5): proxy gradients,
  their EMA, sanitisation and the softmax-weighted personal global modules.

The Method that runs them in the federated runtime builds on these pure pieces.
"""

from baselines.fedmosaic.align import (
    AlignmentReport,
    CCAResult,
    LayerAlignment,
    LayerFeatures,
    align_A,
    align_B,
    align_features,
    align_pair,
    aligned_pair,
    alignment_key,
    cca,
    collect_features,
    nearest_column_orthonormal,
    nearest_row_orthonormal,
    orthogonality_penalty,
)
from baselines.fedmosaic.blocks import LLM_LINEAR_MODULES, BlockMap, block_map, lora_target_regex
from baselines.fedmosaic.pqlora import (
    FusionGate,
    PQLoRALinear,
    PQPair,
    activate,
    adapters_off,
    decoder_layers,
    gate_lora_layers,
    gate_parameters,
    gate_state,
    inject_pqlora,
    load_gate_state,
    load_pq_frozen_state,
    load_pq_state,
    orthonormal_rows,
    pq_frozen_state,
    pq_modules,
    pq_state,
)
from baselines.fedmosaic.sima import (
    GradientTracker,
    Sanitizer,
    arch_mask,
    cosine_matrix,
    ema,
    mix,
    personalized,
    proxy_gradient,
    sima_weights,
)

__all__ = [
    # blocks
    "BlockMap", "block_map", "lora_target_regex", "LLM_LINEAR_MODULES",
    # pqlora
    "PQLoRALinear", "PQPair", "FusionGate", "orthonormal_rows", "decoder_layers", "inject_pqlora",
    "pq_modules", "pq_state", "load_pq_state", "pq_frozen_state", "load_pq_frozen_state",
    "gate_lora_layers", "gate_state", "load_gate_state", "gate_parameters", "activate",
    "adapters_off",
    # align
    "CCAResult", "cca", "orthogonality_penalty", "nearest_row_orthonormal",
    "nearest_column_orthonormal", "align_A", "align_B", "LayerFeatures", "collect_features",
    "LayerAlignment", "AlignmentReport", "align_features", "align_pair", "alignment_key",
    "aligned_pair",
    # sima
    "ema", "Sanitizer", "cosine_matrix", "arch_mask", "sima_weights", "mix", "personalized",
    "GradientTracker", "proxy_gradient",
]
