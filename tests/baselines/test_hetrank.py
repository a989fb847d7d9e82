"""FediLoRA, HetLoRA and FlexLoRA (baselines.hetrank): their rules against hand-computed cases,
and runs on synth-caption with a rank per client."""

from __future__ import annotations

import json
import math

import pytest
import torch

from baselines.base import ClientInfo, Payload
from baselines.hetrank import (
    FediLoRA,
    FlexLoRA,
    dimension_wise,
    edit_least_similar,
    norm_weighted,
    pad,
    svd_redistribute,
    truncate,
)

M = "layers.0.q_proj"


def lora(a: torch.Tensor, b: torch.Tensor, prefix: str = M) -> dict[str, torch.Tensor]:
    return {f"{prefix}.lora_A.weight": a, f"{prefix}.lora_B.weight": b}


def test_dimension_wise_weights_for_ranks_4_2_1_by_hand():
    """Eq. 3-5 with p = (1, 2, 3)/6: rank dimension 0 is held by all three clients (weights
    1/6, 2/6, 3/6), dimension 1 by the rank-4 and rank-2 clients (1/3, 2/3), dimensions 2-3 by
    the rank-4 client alone (1). Client k's A rows and B columns are filled with k+1 (rank-4
    client: 1, rank-2: 2, rank-1: 3), so row d of A_g is the weighted mean of those values."""
    states = [lora(torch.full((r, 3), float(k + 1)), torch.full((2, r), float(10 * (k + 1))))
              for k, r in enumerate((4, 2, 1))]
    glob = dimension_wise(states, [1.0, 2.0, 3.0])
    a, b = glob[f"{M}.lora_A.weight"], glob[f"{M}.lora_B.weight"]
    want = [1 / 6 * 1 + 2 / 6 * 2 + 3 / 6 * 3,  # 14/6
            1 / 3 * 1 + 2 / 3 * 2,              # 5/3
            1.0, 1.0]
    assert a.shape == (4, 3) and b.shape == (2, 4)
    assert torch.allclose(a[:, 0], torch.tensor(want))
    assert torch.allclose(b[0], 10 * torch.tensor(want))
    # HetLoRA's plain zero-padded FedAvg would give dimension 3 the value 1/6: diluted
    padded = sum(w * pad(s, 4)[f"{M}.lora_A.weight"] for w, s in zip((1 / 6, 2 / 6, 3 / 6),
                                                                      states))
    assert padded[3, 0].item() == pytest.approx(1 / 6)


def test_dimension_wise_keeps_the_last_global_where_no_client_of_the_round_has_the_row():
    """A partial round with ranks 2 and 1 (weights 1 and 3) after a rank-4 global G: rows 0-1
    follow Eq. 4 (row 0: 1/4 * 1 + 3/4 * 2 = 7/4; row 1: the rank-2 client alone, 1), rows 2-3
    have no client and keep G's (5 and 6 in A, 50 and 60 in B); the result has rank 4."""
    states = [lora(torch.full((r, 3), float(k + 1)), torch.full((2, r), float(10 * (k + 1))))
              for k, r in enumerate((2, 1))]
    prev = lora(torch.arange(1.0, 5.0)[:, None].expand(4, 3) + 2,
                10 * (torch.arange(1.0, 5.0)[None, :].expand(2, 4) + 2))
    glob = dimension_wise(states, [1.0, 3.0], prev)
    a, b = glob[f"{M}.lora_A.weight"], glob[f"{M}.lora_B.weight"]
    want = torch.tensor([7 / 4, 1.0, 5.0, 6.0])
    assert a.shape == (4, 3) and b.shape == (2, 4)
    assert torch.allclose(a, want[:, None].expand(4, 3))
    assert torch.allclose(b, 10 * want[None, :].expand(2, 4))
    # a round that has the top rank ignores the previous global (Eq. 3-5 alone)
    full = dimension_wise([lora(torch.ones(4, 3), torch.ones(2, 4))], [1.0], prev)
    assert torch.equal(full[f"{M}.lora_A.weight"], torch.ones(4, 3))


class _Handle:
    """The part of a client handle that receive and a zero-step local_train touch."""

    def __init__(self, cid: int, state: dict[str, torch.Tensor]) -> None:
        self.id, self.arch, self.steps, self.state, self._lora = cid, "m", 0, {}, state

    def get(self, adapter):
        return {k: v.clone() for k, v in self._lora.items()}

    def set(self, adapter, state):
        self._lora = {k: v.clone() for k, v in state.items()}


def test_fedilora_partial_round_without_the_top_rank_keeps_its_rows_and_edits():
    """Ranks 4 and 2. Round 0: both upload (weights 1, 1): global A rows (1+2)/2 = 1.5 twice,
    then client 0's 1, 1 (B: 10x). Round 1: only the rank-2 client uploads A = 4 (B = 40):
    rows 0-1 become 4, rows 2-3 keep round 0's 1. Client 0 receives all four rows and trains
    (zero steps; editing compares its rank-4 A with the rank-4 global: γ = 1, no edit) instead
    of failing on a rank-2 message, and its rows 2-3 are not zeroed."""
    method = FediLoRA(ranks=[4, 2], alpha=8)
    infos = {0: ClientInfo(0, "m", 1), 1: ClientInfo(1, "m", 1)}
    up = {0: lora(torch.ones(4, 3), 10 * torch.ones(5, 4)),
          1: lora(2 * torch.ones(2, 3), 20 * torch.ones(5, 2))}
    method.aggregate({c: Payload({"local": s}) for c, s in up.items()}, infos, 0)
    msgs = method.aggregate({1: Payload({"local": lora(4 * torch.ones(2, 3),
                                                       40 * torch.ones(5, 2))})}, infos, 1)
    got = msgs[0].tensors["local"]
    want = torch.tensor([4.0, 4.0, 1.0, 1.0])
    assert torch.equal(got[f"{M}.lora_A.weight"], want[:, None].expand(4, 3))
    assert torch.equal(got[f"{M}.lora_B.weight"], 10 * want[None, :].expand(5, 4))
    assert msgs[1].tensors["local"][f"{M}.lora_A.weight"].shape == (2, 3)
    client = _Handle(0, pad(up[0], 4))
    method.receive(client, msgs[0])
    upload = method.local_train(client).tensors["local"]
    assert torch.equal(upload[f"{M}.lora_A.weight"], want[:, None].expand(4, 3))
    assert method.diagnostics == {}  # events are counted at the next aggregation
    (state, _), = method.global_model("m").values()
    assert torch.equal(state[f"{M}.lora_A.weight"], want[:, None].expand(4, 3))


def test_fedilora_message_below_the_clients_rank_leaves_its_own_rows():
    """Before any rank-4 upload (round 0 had only the rank-2 client), the rank-4 client takes
    the message's two rows and keeps its own rows 2-3 (A 7, B 70), at rank 4."""
    method = FediLoRA(ranks=[4, 2], alpha=8)
    infos = {0: ClientInfo(0, "m", 1), 1: ClientInfo(1, "m", 1)}
    msgs = method.aggregate({1: Payload({"local": lora(4 * torch.ones(2, 3),
                                                       40 * torch.ones(5, 2))})}, infos, 0)
    client = _Handle(0, lora(7 * torch.ones(4, 3), 70 * torch.ones(5, 4)))
    method.receive(client, msgs[0])
    upload = method.local_train(client).tensors["local"]
    want = torch.tensor([4.0, 4.0, 7.0, 7.0])
    assert torch.equal(upload[f"{M}.lora_A.weight"], want[:, None].expand(4, 3))
    assert torch.equal(upload[f"{M}.lora_B.weight"], 10 * want[None, :].expand(5, 4))


def test_hetlora_weights_are_the_norms_of_each_clients_product():
    """Client 0: B A = 2 * (3 x 3 ones... ) etc.; weights ‖B_k A_k‖_F / Σ_j ‖B_j A_j‖_F."""
    s0 = lora(torch.ones(2, 2), torch.ones(2, 2))          # B A = 2·ones(2,2): ‖·‖ = 4
    s1 = lora(torch.ones(1, 2), 3 * torch.ones(2, 1))      # B A = 3·ones(2,2): ‖·‖ = 6
    glob = norm_weighted([s0, s1])
    w0, w1 = 4 / 10, 6 / 10
    a = glob[f"{M}.lora_A.weight"]
    assert torch.allclose(a[0], torch.full((2,), w0 * 1 + w1 * 1))
    assert torch.allclose(a[1], torch.full((2,), w0 * 1))  # client 1 padded with zeros
    assert torch.allclose(glob[f"{M}.lora_B.weight"][:, 0], torch.full((2,), w0 + w1 * 3))


def test_flexlora_truncation_is_the_best_rank_r_approximation():
    """Eckart-Young: ‖ΔW − B A‖_F equals the root of the discarded squared singular values,
    and no other rank-r factorisation (random ones tried) does better."""
    torch.manual_seed(0)
    delta = torch.randn(6, 5, dtype=torch.float64)
    s = torch.linalg.svdvals(delta)
    for r in (1, 2, 4):
        b, a = svd_redistribute(delta, r)
        assert b.shape == (6, r) and a.shape == (r, 5)
        err = torch.linalg.matrix_norm(delta - b @ a)
        assert err.item() == pytest.approx(math.sqrt(float((s[r:] ** 2).sum())), rel=1e-9)
        for _ in range(20):
            other = torch.randn(6, r, dtype=torch.float64) @ torch.randn(r, 5,
                                                                          dtype=torch.float64)
            assert torch.linalg.matrix_norm(delta - other) >= err


def test_flexlora_messages_give_each_client_the_mean_update_at_its_rank():
    """(alpha / r_k) B_k A_k of each client's message is the best rank-r_k approximation of
    Σ p_k (alpha / r_k) B_k A_k, and the global model (scale alpha / r_g) is the rank-r_g one."""
    torch.manual_seed(1)
    method = FlexLoRA(ranks=[4, 2], alpha=8)
    ups = {c: lora(torch.randn(r, 5), torch.randn(6, r)) for c, r in ((0, 4), (1, 2))}
    infos = {0: ClientInfo(0, "m", 1), 1: ClientInfo(1, "m", 3)}
    msgs = method.aggregate({c: Payload({"local": s}) for c, s in ups.items()}, infos, 0)
    mean = sum(w * (8 / r) * ups[c][f"{M}.lora_B.weight"].double()
               @ ups[c][f"{M}.lora_A.weight"].double()
               for c, r, w in ((0, 4, 0.25), (1, 2, 0.75)))
    sv = torch.linalg.svdvals(mean)
    for c, r in ((0, 4), (1, 2)):
        got = msgs[c].tensors["local"]
        prod = (8 / r) * got[f"{M}.lora_B.weight"].double() @ got[f"{M}.lora_A.weight"].double()
        err = torch.linalg.matrix_norm(mean - prod).item()
        assert err == pytest.approx(math.sqrt(float((sv[r:] ** 2).sum())), abs=1e-5)
    (state, weight), = method.global_model("m").values()
    prod = (8 / 4) * weight * state[f"{M}.lora_B.weight"].double() @ state[
        f"{M}.lora_A.weight"].double()
    err = torch.linalg.matrix_norm(mean - prod).item()  # the mean has rank 5 > r_g = 4
    assert err == pytest.approx(math.sqrt(float((sv[4:] ** 2).sum())), abs=1e-5)


def test_editing_picks_the_least_similar_layer_and_interpolates_as_eq_8():
    g = {**lora(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0]]), "l0"),
         **lora(torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0]]), "l1")}
    local = {**lora(torch.tensor([[1.0, 0.1]]), torch.tensor([[2.0]]), "l0"),   # γ ≈ 0.995
             **lora(torch.tensor([[1.0, 1.0]]), torch.tensor([[3.0]]), "l1")}   # γ = 1/√2
    edited, layer, gamma = edit_least_similar(local, g)
    assert layer == "l1" and gamma == pytest.approx(1 / math.sqrt(2))
    want = gamma * torch.tensor([1.0, 1.0]) + (1 - gamma) * torch.tensor([1.0, 0.0])
    assert torch.allclose(edited["l1.lora_A.weight"][0], want)
    assert torch.equal(edited["l1.lora_B.weight"], local["l1.lora_B.weight"])  # A only
    assert torch.equal(edited["l0.lora_A.weight"], local["l0.lora_A.weight"])  # one layer
    both, _, _ = edit_least_similar(local, g, matrices="both", mode="full")
    assert torch.equal(both["l1.lora_A.weight"], g["l1.lora_A.weight"])
    assert torch.equal(both["l1.lora_B.weight"], g["l1.lora_B.weight"])
    half, _, _ = edit_least_similar(local, g, mode="half")
    assert torch.allclose(half["l1.lora_A.weight"][0], torch.tensor([1.0, 0.5]))
    same, none, _ = edit_least_similar(g, g)  # every γ = 1 ≥ 0.95: nothing edited
    assert none is None and all(torch.equal(same[k], g[k]) for k in g)


def test_truncate_and_pad_round_trip():
    s = lora(torch.arange(8.0).reshape(4, 2), torch.arange(12.0).reshape(3, 4))
    t = truncate(s, 2)
    assert t[f"{M}.lora_A.weight"].shape == (2, 2) and t[f"{M}.lora_B.weight"].shape == (3, 2)
    back = pad(t, 4)
    assert torch.equal(back[f"{M}.lora_A.weight"][:2], s[f"{M}.lora_A.weight"][:2])
    assert back[f"{M}.lora_A.weight"][2:].abs().sum() == 0


@pytest.fixture(scope="module")
def caption(tmp_path_factory):
    from drake.build import build
    from drake.registry import get_benchmark

    out = tmp_path_factory.mktemp("cap")
    build(get_benchmark("synth-caption", size="tiny"), out, seed=0)
    return out


# hetlora and flexlora share this path and run end to end in tests/runtime/test_participation
@pytest.mark.parametrize("method", ["fedilora", "flora"])
def test_rank_per_client_runs_under_the_generation_protocol(caption, tmp_path, capsys, method):
    """Two rounds on synth-caption with ranks 8, 4, 2 cycled over the clients: each client's
    checkpointed adapter is zero beyond its rank, uploads are the client's own rank (the bytes
    say so), and both the personalised and the global results validate."""
    from safetensors.torch import load_file

    from drake.cli import main

    out = tmp_path / method
    argv = ["eval", "--method", method, "--data", str(caption), "--benchmark", "synth-caption",
            "--scenario", "quantity-skew-local", "--rounds", "2", "--local-steps", "1",
            "--eval-per-task", "2", "--hp", "ranks=[8,4,2]", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    for name in ("results.json", "results-global.json"):
        assert main(["leaderboard", "validate", str(out / name), "--data", str(caption)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["method"]["hyperparameters"]["ranks"] == [8, 4, 2]
    flat = load_file(str(next((out / "checkpoint").rglob("*.safetensors"))))
    for cid, rank in ((1, 4), (2, 2)):
        a = [v for k, v in flat.items() if k.startswith(f"client/{cid}/adapter/local/")
             and ".lora_A." in k]
        assert a and all(t.shape[0] == 8 and t[rank:].abs().sum() == 0 for t in a)
        assert any(t[:rank].abs().sum() > 0 for t in a)
    # uploads carry each client's own rank: Σ_k r_k rank units of (in + out) float32 values
    # per LoRA module, with ranks 8,4,2,8,4,2,8,4,2,8 over the 10 clients (Σ = 50, not 10 x 8)
    unit = sum(4 * (v.shape[1] + flat[k.replace(".lora_A.", ".lora_B.")].shape[0])
               for k, v in flat.items()
               if k.startswith("client/0/adapter/local/") and ".lora_A." in k)
    assert results["cost"]["comm_bytes_up_per_round"] == [50 * unit, 50 * unit]
    # FediLoRA's targets by default: the language model's query and value maps only
    adapted = {k.split("/adapter/local/")[1].rsplit(".lora_", 1)[0]
               for k in flat if k.startswith("client/0/adapter/local/")}
    assert adapted and all(m.rsplit(".", 1)[1] in ("q_proj", "v_proj") for m in adapted)
    assert all("language_model" in m for m in adapted)
    assert results["method"]["hyperparameters"]["targets"] == "qv"
    if method == "fedilora":  # round 1: every client checked its A against the global one
        diag = results["diagnostics"]
        assert diag["edit_checks"] == 10 and 0 <= diag["edits"] <= 10
        assert -1 <= diag["edit_similarity_min"] <= 1
        assert (diag["edits"] > 0) == (diag["edit_similarity_min"] < 0.95)
    else:
        assert "diagnostics" not in results


def test_targets_restrict_the_zoo_s_lora_targets_to_the_named_maps():
    from baselines import get_method
    from drake.models import add_lora, load_model, lora_module_names
    from drake.models.lora import restrict_targets
    from drake.models.zoo import CLIP_LORA_REGEX, LLM_LINEAR_REGEX

    bundle = load_model("tiny-llava-qwen", pretrained=False)
    # (an adapter name inside peft's "lora_" prefix, such as "a", draws a peft warning)
    qv = lora_module_names(add_lora(bundle.model, "qv", r=2, alpha=4, target_regex=restrict_targets(
        LLM_LINEAR_REGEX, ("v_proj", "q_proj"))), "qv")
    every = lora_module_names(add_lora(load_model("tiny-llava-qwen", pretrained=False).model,
                                       "every", r=2, alpha=4), "every")
    assert set(qv) == {m for m in every if m.endswith((".q_proj", ".v_proj"))}
    assert len(qv) == 2 * bundle.model.config.text_config.num_hidden_layers < len(every)
    # a CLIP's zoo targets are its text tower's q and v already: restricting keeps them all
    assert restrict_targets(CLIP_LORA_REGEX, ("q_proj", "v_proj")).endswith(f"(?:{CLIP_LORA_REGEX})")
    fedilora = get_method("fedilora")
    assert fedilora().adapters()["local"].modules == ("q_proj", "v_proj")
    assert fedilora(targets="all").adapters()["local"].modules is None
    assert get_method("flora")().adapters()["local"].modules == ("q_proj", "v_proj")
    with pytest.raises(ValueError, match="targets must be one of qv, all, got 'qkv'"):
        fedilora(targets="qkv")
    with pytest.raises(ValueError, match="module names such as q_proj"):
        restrict_targets(None, ("q_proj|.*",))


def test_flora_stack_product_is_the_weighted_sum_exactly():
    from baselines.hetrank import stack

    torch.manual_seed(2)
    states = [lora(torch.randn(r, 5, dtype=torch.float64), torch.randn(4, r,
                                                                      dtype=torch.float64))
              for r in (3, 2, 1)]
    weights = [2.0, 1.0, 1.0]
    s = stack(states, weights)
    assert s[f"{M}.lora_A.weight"].shape == (6, 5) and s[f"{M}.lora_B.weight"].shape == (4, 6)
    want = sum(w / 4 * st[f"{M}.lora_B.weight"] @ st[f"{M}.lora_A.weight"]
               for w, st in zip(weights, states))
    got = s[f"{M}.lora_B.weight"] @ s[f"{M}.lora_A.weight"]
    assert torch.allclose(got, want, rtol=0, atol=1e-12)


def test_flora_merges_each_round_into_the_base_once_and_again_after_a_resume():
    """The merged sum s Σ p_k B_k A_k is added to the shared base weight once per round (not
    once per client), kept as server state, and re-applied to a fresh base on resume."""
    from baselines.hetrank import FLoRA
    from drake.models import add_lora, load_model

    def fresh():
        method = FLoRA(ranks=[2, 1])
        bundle = load_model("tiny-llava-llama", pretrained=False, seed=0)
        method.install(bundle.model, arch="m", lora={}, seed=0)
        model = add_lora(bundle.model, "local", r=2, alpha=4, seed=0,
                         target_regex=r".*language_model.*\.q_proj")
        return method, model

    method, model = fresh()
    name = "model.language_model.layers.0.self_attn.q_proj"
    base = model.base_model.model.get_submodule(name).base_layer.weight
    w0 = base.detach().clone()
    torch.manual_seed(3)
    ups = {c: {f"{name}.lora_A.weight": torch.randn(r, w0.shape[1]),
               f"{name}.lora_B.weight": torch.randn(w0.shape[0], r)} for c, r in ((0, 2), (1, 1))}
    infos = {0: ClientInfo(0, "m", 3), 1: ClientInfo(1, "m", 1)}
    msgs = method.aggregate({c: Payload({"local": u}) for c, u in ups.items()}, infos, 0)
    delta = 2.0 * sum(w * ups[c][f"{name}.lora_B.weight"].double()
                      @ ups[c][f"{name}.lora_A.weight"].double()
                      for c, w in ((0, 0.75), (1, 0.25)))
    assert torch.allclose(base.double() - w0.double(), delta, atol=1e-5)
    assert msgs[0].tensors["local"][f"{name}.lora_A.weight"].shape[0] == 3  # the stack: 2 + 1
    saved = method.server_state()
    method.aggregate({}, {}, 1)  # nothing uploaded: no second merge
    assert torch.allclose(base.double() - w0.double(), delta, atol=1e-5)
    again, model2 = fresh()
    again.load_server_state(saved)
    base2 = model2.base_model.model.get_submodule(name).base_layer.weight
    assert torch.allclose(base2, base, atol=1e-6)


def test_hetlora_tail_penalty_by_hand_and_its_gradient_reaches_the_tail_only():
    from baselines.hetrank import pruned_rank, tail_norms, tail_penalty

    assert [pruned_rank(r, 0.99) for r in (32, 8, 4, 1)] == [31, 7, 3, 1]
    assert pruned_rank(4, 0.5) == 2
    # rank 4, gamma 0.5: the tail is components 2 and 3
    a = torch.zeros(4, 3, requires_grad=False)
    a.data[2, 0], a.data[3, 1] = 1.0, 2.0  # ‖A[2:4]‖ = √5
    b = torch.zeros(2, 4)
    b.data[0, 2], b.data[1, 3] = 3.0, 4.0  # ‖B[:, 2:4]‖ = 5
    a.data[0, 0], b.data[0, 0] = 7.0, 9.0  # outside the tail: ignored
    a.requires_grad_(True)
    b.requires_grad_(True)
    a2, b2 = torch.ones(4, 1), torch.ones(1, 4)  # second module: √2 · √2
    assert float(tail_norms([(a, b), (a2, b2)], 4, 0.5).detach()) == pytest.approx(
        5 * math.sqrt(5) + 2)
    penalty = tail_penalty([(a, b)], 4, 0.5, lam=0.1)
    assert float(penalty.detach()) == pytest.approx(0.5 * math.sqrt(5))
    penalty.backward()
    # d/dA (λ ‖B_t‖ ‖A_t‖) = λ ‖B_t‖ A_t / ‖A_t‖ on the tail rows, zero elsewhere
    expect = torch.zeros(4, 3)
    expect[2:] = 0.1 * 5 * a.detach()[2:] / math.sqrt(5)
    assert torch.allclose(a.grad, expect)
    assert float(b.grad[:, :2].abs().sum()) == 0.0 and float(b.grad[:, 2:].abs().sum()) > 0


class _PruneClient:
    """The parts of a client HetLoRA's pruning touches: one module's live (A, B), its state."""

    def __init__(self, a: torch.Tensor, b: torch.Tensor) -> None:
        self.id, self.state = 0, {}
        self.a, self.b = torch.nn.Parameter(a.clone()), torch.nn.Parameter(b.clone())

    def params(self, name):
        return [self.a, self.b]

    def get(self, name):
        return lora(self.a.detach().clone(), self.b.detach().clone())

    def set(self, name, state):
        with torch.no_grad():
            self.a.copy_(state[f"{M}.lora_A.weight"])
            self.b.copy_(state[f"{M}.lora_B.weight"])


@pytest.mark.parametrize("shrinks", [True, False])
def test_hetlora_prunes_its_tail_only_when_the_tail_shrank(shrinks):
    from baselines.hetrank import HetLoRA

    method = HetLoRA(ranks=[4], gamma=0.5)
    client = _PruneClient(torch.ones(4, 3), torch.ones(2, 4))
    # the rule is _after_training's, given the tail norm local_train records first
    client.state["tail_before"] = torch.tensor(10.0 if shrinks else 0.1)
    own, events = method._after_training(client, truncate(client.get("local"), 4))
    assert events == {"prunes": (float(shrinks), "sum"), "rank_min": (2.0 if shrinks else 4.0,
                                                                       "min")}
    if shrinks:  # ‖B_t‖ ‖A_t‖ = 2 · √6 < 10: rank 4 -> 2, the tail zeroed on the client
        assert method.client_rank(client) == 2 and int(client.state["rank"]) == 2
        assert own[f"{M}.lora_A.weight"].shape == (2, 3)
        assert float(client.a.detach()[2:].abs().sum()) == 0
        assert float(client.b.detach()[:, 2:].abs().sum()) == 0
    else:
        assert method.client_rank(client) == 4 and "rank" not in client.state
        assert own[f"{M}.lora_A.weight"].shape == (4, 3)
    assert "tail_before" not in client.state
    # a later message is cut at the client's current rank
    method.receive(client, Payload({"local": lora(torch.full((4, 3), 5.0),
                                                  torch.full((2, 4), 5.0))}))
    kept = 2 if shrinks else 4
    a = client.a.detach()
    assert float(a[:kept].min()) == 5.0 and float(a[kept:].abs().sum()) == 0


def test_hetlora_self_pruning_runs_and_lowers_ranks(caption, tmp_path, capsys):
    """Three rounds with a strong tail penalty: clients prune (the checkpoint holds their
    smaller ranks and adapters zero beyond them); with prune=false nobody does."""
    from safetensors.torch import load_file

    from drake.cli import main

    ranks = {}
    for prune in ("true", "false"):
        out = tmp_path / prune
        argv = ["eval", "--method", "hetlora", "--data", str(caption), "--benchmark",
                "synth-caption", "--scenario", "quantity-skew-local", "--rounds", "3",
                "--local-steps", "2", "--eval-per-task", "2", "--hp", "ranks=[8,4]",
                "--hp", "gamma=0.5", "--hp", "lam=10", "--hp", f"prune={prune}",
                "--out", str(out)]
        assert main(argv) == 0, capsys.readouterr().err
        flat = load_file(str(next((out / "checkpoint").rglob("*.safetensors"))))
        ranks[prune] = {int(k.split("/")[1]): int(v) for k, v in flat.items()
                        if k.startswith("client/") and k.endswith("/state/rank")}
        for cid, r in ranks[prune].items():
            a = [v for k, v in flat.items() if k.startswith(f"client/{cid}/adapter/local/")
                 and ".lora_A." in k]
            assert a and all(t[r:].abs().sum() == 0 for t in a)
        diagnostics = json.loads((out / "results.json").read_text()).get("diagnostics")
        if prune == "false":
            assert diagnostics is None
        else:  # every pruned client pruned at least once, at most once per round (3 x 10)
            assert len(ranks[prune]) <= diagnostics["prunes"] <= 30
            final = [ranks[prune].get(cid, (8, 4)[cid % 2]) for cid in range(10)]
            assert diagnostics["rank_min"] == min(final)
    assert ranks["false"] == {}
    assert ranks["true"] and all(r < (8, 4)[cid % 2] for cid, r in ranks["true"].items())
