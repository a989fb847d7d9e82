"""Block-wise placement of PQ-LoRA: which decoder layers carry it, and which pair across models.

FedMosaic (§4.2.1) cuts every language model into ``N_B`` blocks of equal relative depth and puts
a PQ-LoRA on the *last* layer of each block; the other layers keep conventional LoRA. Block ``k``
of any model pairs with block ``k`` of any other, whatever their depths, so the width-free
``P`` and ``Q`` of paired layers can be averaged. The attachment layer of block ``k`` in a model
of ``|W|`` layers is (Eq. 7, 1-based)::

    I_k = k * floor(|W| / N_B)   for k = 1 .. N_B - 1
    I_k = |W|                    for k = N_B

so the last block absorbs the remainder. The public code (``get_target_layers``) computes the same
indices. Alg. 2 of the paper's appendix writes ``l == n * B_k + B_r`` instead, which shifts every
block end by the remainder ``|W| mod N_B``; the two agree whenever ``N_B`` divides ``|W|`` (as for
the paper's 16- and 28-layer Llamas). We follow Eq. 7 and the code.

Indices here are 0-based decoder-layer indices (``I_k - 1``), as in ``model.layers[i]``.

Example
-------
>>> block_map(28).layers
(6, 13, 20, 27)
>>> block_map(6, 2).conventional_layers
(0, 1, 3, 4)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BlockMap", "block_map", "lora_target_regex", "LLM_LINEAR_MODULES"]

#: The linear layers of a Llama/Qwen decoder layer, as ``<sub-module>.<linear>`` suffixes. PQ-LoRA
#: goes on all of them in a block-end layer (as the public code does).
LLM_LINEAR_MODULES: tuple[str, ...] = (
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
)


@dataclass(frozen=True)
class BlockMap:
    """Where the PQ-LoRA layers of one model sit.

    Attributes
    ----------
    num_layers : int
        Decoder layers of the language model, ``|W|``.
    num_blocks : int
        ``N_B``.
    layers : tuple of int
        0-based index of the block-end layer of block ``k`` at position ``k`` (Eq. 7).
    """

    num_layers: int
    num_blocks: int
    layers: tuple[int, ...]

    def block_of(self, layer: int) -> int | None:
        """Block whose end is decoder layer ``layer``, or None for a conventional-LoRA layer."""
        try:
            return self.layers.index(layer)
        except ValueError:
            return None

    @property
    def conventional_layers(self) -> tuple[int, ...]:
        """Decoder layers that keep conventional LoRA (every layer that is not a block end)."""
        ends = set(self.layers)
        return tuple(i for i in range(self.num_layers) if i not in ends)

    def pairs(self, other: BlockMap) -> list[tuple[int, int]]:
        """``(layer here, layer there)`` for each block ``k``: the layers whose P, Q are shared.

        Raises
        ------
        ValueError
            When the two maps have different numbers of blocks.
        """
        if other.num_blocks != self.num_blocks:
            raise ValueError(
                f"block maps have {self.num_blocks} and {other.num_blocks} blocks; "
                "every model of a federation must use the same N_B"
            )
        return list(zip(self.layers, other.layers))


def block_map(num_layers: int, num_blocks: int = 4) -> BlockMap:
    """The block-end layers of a ``num_layers``-layer model cut into ``num_blocks`` blocks (Eq. 7).

    Parameters
    ----------
    num_layers : int
        Decoder layers of the language model (16 for Llama-3.2-1B, 28 for Llama-3.2-3B).
    num_blocks : int
        ``N_B``; the paper uses 4.

    Returns
    -------
    BlockMap
        With ``layers[k] = (k + 1) * (num_layers // num_blocks) - 1`` for ``k < num_blocks - 1``
        and ``layers[-1] = num_layers - 1``.

    Raises
    ------
    ValueError
        When ``num_blocks < 1`` or ``num_blocks > num_layers`` (Eq. 7 would put several blocks on
        layer 0); pick ``num_blocks <= `` the smallest depth of the federation.
    """
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    if not 1 <= num_blocks <= num_layers:
        raise ValueError(
            f"num_blocks={num_blocks} does not fit a {num_layers}-layer model (Eq. 7 needs "
            f"1 <= N_B <= |W|); lower num_blocks to at most {num_layers}"
        )
    step = num_layers // num_blocks
    layers = tuple(k * step - 1 for k in range(1, num_blocks)) + (num_layers - 1,)
    return BlockMap(num_layers, num_blocks, layers)


def lora_target_regex(bmap: BlockMap, modules: tuple[str, ...] = LLM_LINEAR_MODULES,
                      *, prefix: str = r".*language_model.*") -> str | None:
    """A peft ``target_modules`` regex for conventional LoRA on every non-block-end layer.

    Pass it to :func:`drake.models.add_lora` so that peft leaves the PQ-LoRA layers alone.

    Returns
    -------
    str or None
        None when every decoder layer is a block end (e.g. a 2-layer model with ``N_B = 2``):
        the model then carries no conventional LoRA at all.
    """
    layers = bmap.conventional_layers
    if not layers:
        return None
    subs = sorted({m.split(".")[0] for m in modules})
    leaves = [m.split(".")[-1] for m in modules]
    return (prefix + r"\.layers\.(" + "|".join(str(i) for i in layers) + r")\.("
            + "|".join(subs) + r")\.(" + "|".join(leaves) + ")")
