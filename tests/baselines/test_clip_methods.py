"""The CLIP baselines of the pFedMMA tables (zero-shot CLIP, PromptFL, FedPGP, FedOTP, pFedMoAP,
CLIP-Adapter, CLIP-LoRA): their equations on hand-computed toys, and one federated round of each
on synth-cls in which only the shared part travels."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from baselines.clip_adapter import ClipAdapterHead
from baselines.clip_common import PromptContext, context_init
from baselines.fedotp import unbalanced_ot
from baselines.fedpgp import pgp_contrastive
from baselines.pfedmoap import ExpertGate, PFedMoAP, nearest_experts
from baselines.zeroshot import coop_template
from drake.models import load_model


@pytest.fixture(scope="module")
def bundle():
    b = load_model("tiny-clip", pretrained=True, seed=0)
    for p in b.model.parameters():
        p.requires_grad_(False)
    return b


def _samples(n=3):
    colours = [(200, 0, 0), (0, 0, 200), (0, 160, 0)]
    return [{"id": f"s{i}", "images": [Image.new("RGB", (48, 48), colours[i % 3])]}
            for i in range(n)]


CLASSES = ["red circle", "blue square", "green triangle"]


# --- the prompt context -----------------------------------------------------------------------
def test_a_context_of_the_templates_own_words_reads_as_the_plain_prompt(bundle):
    """ctx = the word embeddings of "a photo of a" in "a photo of a {}." leaves every text
    embedding as it is; another context changes them; outside `using` nothing is replaced."""
    core = bundle._core()
    ctx, template = context_init(core, bundle.tokenizer, ctx_init="a photo of a")
    assert template == "a photo of a {}." and ctx.shape == (4, core.token_embedding.embedding_dim)
    prompt = PromptContext(core, bundle.tokenizer, len(ctx), template)
    with torch.no_grad():
        plain = bundle.text_embeds(CLASSES, template)
        same = prompt.text_embeds(bundle, CLASSES, ctx)
        # (not ctx + constant: the tower's first layer norm removes a shift of every coordinate)
        other = prompt.text_embeds(bundle, CLASSES,
                                   ctx + torch.randn(ctx.shape, generator=torch.Generator()))
        after = bundle.text_embeds(CLASSES, template)
    assert torch.allclose(plain, same, atol=1e-6)
    assert not torch.allclose(plain, other, atol=1e-3)
    assert torch.equal(plain, after)
    with pytest.raises(ValueError, match="context of 3 vectors"):
        with prompt.using(ctx[:3]):
            pass
    prompt._handle.remove()


def test_random_context_is_coops_placeholder_prompt(bundle):
    core = bundle._core()
    gen = torch.Generator().manual_seed(0)
    ctx, template = context_init(core, bundle.tokenizer, n_ctx=16, generator=gen)
    assert template == " ".join(["X"] * 16) + " {}."
    assert ctx.shape == (16, core.token_embedding.embedding_dim)
    assert abs(float(ctx.std()) - 0.02) < 0.003


# --- FedPGP -------------------------------------------------------------------------------------
def test_fedpgp_contrastive_term_by_hand():
    """Row 1: cos(t0, tσ) = cos(tσ, tp) = 1/√2, so CE = log 2. Row 2: cos = 1 and −1, so
    CE = log(1 + e^{(−1 − 1)/τ}) with τ = 0.5; the term is their mean."""
    t0 = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    t_sigma = torch.tensor([[1.0, 1.0], [2.0, 0.0]])
    t_p = torch.tensor([[0.0, 3.0], [-1.0, 0.0]])
    want = (math.log(2) + math.log(1 + math.exp(-4))) / 2
    assert float(pgp_contrastive(t0, t_sigma, t_p, 0.5)) == pytest.approx(want, abs=1e-6)


# --- FedOTP -------------------------------------------------------------------------------------
def test_unbalanced_ot_by_hand_on_a_flat_kernel():
    """M = 2 patches, N = 1 prompt, K = 1, γ = 0.8: v shrinks by γ each step until u reaches its
    cap 1, then T = 0.4 everywhere: column sum γ/N = 0.8, row sums 0.4 ≤ 1/M."""
    plan = unbalanced_ot(torch.ones(2, 1), 0.8, thresh=1e-9, max_iter=200)
    assert torch.allclose(plan, torch.tensor([[0.4], [0.4]]), atol=1e-6)


def test_unbalanced_ot_marginals_on_random_kernels():
    torch.manual_seed(0)
    sim = torch.rand(4, 5, 9, 2) * 0.6
    plan = unbalanced_ot(torch.exp(-(1 - sim) / 0.1), 0.8, thresh=1e-7, max_iter=1000)
    assert torch.allclose(plan.sum(-2), torch.full((4, 5, 2), 0.8 / 2), atol=1e-5)
    assert (plan.sum(-1) <= 1 / 9 + 1e-6).all()
    assert (plan >= 0).all()


def test_fedotp_logits_are_the_transport_weighted_similarity(bundle):
    from baselines.fedotp import FedOTPHead

    core = bundle._core()
    gen = torch.Generator().manual_seed(0)
    c0, template = context_init(core, bundle.tokenizer, n_ctx=4, generator=gen)
    c1, _ = context_init(core, bundle.tokenizer, n_ctx=4, generator=gen)
    head = FedOTPHead(core, bundle.tokenizer, template, {"global": c0, "local": c1}, eps=0.1,
                      gamma=0.8, thresh=1e-3, max_iter=100)
    samples = _samples()
    with torch.no_grad():
        got = head(bundle, samples, CLASSES)
        text = torch.stack([head.text_embeds(bundle, CLASSES, c) for c in (c0, c1)])
        patches = bundle.image_tokens(samples)
    want = torch.empty(3, 3)
    for b in range(3):
        for k in range(3):
            sim = patches[b] @ text[:, k].T  # [M, N]
            plan = unbalanced_ot(torch.exp(-(1 - sim) / 0.1), 0.8)
            want[b, k] = core.logit_scale.exp() * (plan * sim).sum()
    assert torch.allclose(got, want, atol=1e-4)
    head.prompt._handle.remove()


# --- pFedMoAP -----------------------------------------------------------------------------------
def test_expert_gate_by_hand():
    """Identity maps, 2 heads of width 1: head h attends over the experts' h-th coordinate with
    scores 10·q_h·k_h, so out_h = softmax([10 q_h k_1h, 10 q_h k_2h]) · [v_1h, v_2h]."""
    gate = ExpertGate(2, heads=2, scaling=10.0)
    with torch.no_grad():
        for lin in (gate.w_q, gate.w_k, gate.w_v, gate.w_o):
            lin.weight.copy_(torch.eye(2))
            lin.bias.zero_()
    q = torch.tensor([[[0.1, 0.2]]])  # one group, one query
    kv = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # two experts
    out = gate(q, kv)
    e1, e2 = math.exp(1.0), math.exp(2.0)
    want = torch.tensor([[[e1 / (e1 + 1), e2 / (1 + e2)]]])
    assert torch.allclose(out, want, atol=1e-6)


def test_experts_are_the_nearest_other_prompts_and_none_before_a_first_upload():
    pool = {0: torch.zeros(2, 2), 1: torch.ones(2, 2), 2: torch.full((2, 2), 0.1),
            3: torch.full((2, 2), -0.5)}
    assert nearest_experts(pool, 0, 2) == [2, 3]
    assert nearest_experts(pool, 1, 3) == [2, 0, 3]
    assert nearest_experts(pool, 7, 2) == []


def test_pfedmoap_server_sends_the_weighted_average_and_the_experts():
    from baselines.base import ClientInfo, Payload

    m = PFedMoAP(num_experts=3)
    clients = {i: ClientInfo(i, "tiny-clip", n) for i, n in enumerate([1, 3, 1, 1])}
    key = "ctx.prompt"
    ups = {0: Payload({"prompt": {key: torch.zeros(2, 2)}}),
           1: Payload({"prompt": {key: torch.ones(2, 2)}}),
           2: Payload({"prompt": {key: torch.full((2, 2), 0.1)}})}
    out = m.aggregate(ups, clients, 0)
    assert torch.allclose(out[0].tensors["prompt"][key], torch.full((2, 2), (3 + 0.1) / 5))
    assert out[0].meta["experts"] == [2, 1]  # K − 1 = 2 nearest others
    assert torch.equal(out[0].tensors["experts"]["ctx"][0], torch.full((2, 2), 0.1))
    assert "experts" not in out[3].tensors and out[3].meta["experts"] == []  # never uploaded
    restored = PFedMoAP(num_experts=3)
    restored.load_server_state(m.server_state())
    assert restored.pool.keys() == m.pool.keys()
    assert torch.equal(restored._global[key], m._global[key])


# --- CLIP-Adapter -------------------------------------------------------------------------------
def test_clip_adapter_residual_by_hand_and_scale_free():
    head = ClipAdapterHead(4, ratio=0.2, reduction=2)
    with torch.no_grad():
        head.adapter[0].weight.copy_(torch.tensor([[1.0, 0, 0, 0], [0, -1.0, 0, 0]]))
        head.adapter[2].weight.copy_(torch.tensor([[1.0, 0], [0, 1.0], [1.0, 1.0], [0, 0]]))
    f = torch.tensor([[0.5, -0.5, 0.5, 0.5]])
    # A(f) = relu(W2 relu(W1 f)) = relu(W2 [0.5, 0.5]) = [0.5, 0.5, 1.0, 0]
    mixed = 0.2 * torch.tensor([[0.5, 0.5, 1.0, 0.0]]) + 0.8 * f
    assert torch.allclose(head.features(f), F.normalize(mixed, dim=-1), atol=1e-6)
    assert torch.allclose(head.features(3 * f), head.features(f), atol=1e-6)


def test_coop_templates_by_dataset():
    assert coop_template("dtd") == "{} texture."
    assert coop_template("oxford_pets") == "a photo of a {}, a type of pet."
    assert coop_template("synth-cls") == coop_template(None) == "a photo of a {}."


# --- one federated round of each method -------------------------------------------------------
@pytest.fixture(scope="module")
def cls_build(tmp_path_factory):
    from drake.build import build
    from drake.registry import get_benchmark

    out = tmp_path_factory.mktemp("cls")
    build(get_benchmark("synth-cls", size="tiny"), out, seed=0)
    return out


# method -> (the adapter every client receives the data-weighted mean of, one tensor name in
# it, the adapter that stays with the client and one tensor name in it)
SHARING = {
    "promptfl": ("global", "ctx.global", None, None),
    "promptfl-fedprox": ("global", "ctx.global", None, None),
    "fedpgp": ("global", "ctx.global", "local", "u"),
    "fedotp": ("global", "ctx.global", "local", "ctx.local"),
    "pfedmoap": ("prompt", "ctx.prompt", "gate", "gate.w_q.weight"),
    "clip-adapter": ("global", "adapter.0.weight", None, None),
    "clip-lora": ("global", None, None, None),
}


@pytest.mark.parametrize("method", sorted(SHARING))
def test_one_round_shares_only_the_shared_part(cls_build, tmp_path, method):
    from safetensors.torch import load_file

    from drake.runtime.local import LocalRuntime, RunConfig

    shared, key, kept, kept_key = SHARING[method]
    # pFedMoAP's gate first trains in round 1: in round 0 no client has experts yet
    rounds = 2 if method == "pfedmoap" else 1
    cfg = RunConfig(data=str(cls_build / "synth-cls"), scenario="base2novel", method=method,
                    out=str(tmp_path / "r"), rounds=rounds, local_steps=2, eval_per_task=2,
                    eval_every=rounds)
    runtime = LocalRuntime(cfg)
    results = runtime.run()
    assert set(results["metrics"]) == {"local", "base", "novel", "hm"}
    flat = load_file(str(next((tmp_path / "r" / "checkpoint").rglob("*.safetensors"))))
    assert not any("/optim/" in k for k in flat)  # a fresh optimiser at every turn
    if key is None:  # peft LoRA: any A of the text and of the image tower
        names = [k.split(f"client/0/adapter/{shared}/", 1)[1] for k in flat
                 if k.startswith(f"client/0/adapter/{shared}/")]
        assert any(n.startswith("text.") and "k_proj" in n for n in names)
        assert any(n.startswith("vision.") and "k_proj" in n for n in names)
        key = names[0]
    sizes = torch.tensor([float(len(runtime.data.streams[c].seen(rounds - 1)))
                          for c in range(10)])
    uploaded = torch.stack([flat[f"client/{c}/adapter/{shared}/{key}"] for c in range(10)])
    assert len({tuple(t.flatten().tolist()) for t in uploaded}) == 10  # each trained its own
    mean = (sizes.view(-1, *[1] * (uploaded.dim() - 1)) * uploaded).sum(0) / sizes.sum()
    for c in range(10):
        assert torch.allclose(flat[f"pending/{c}/{shared}/{key}"], mean, atol=1e-6)
    if kept is not None:
        assert not any(k.startswith(f"pending/0/{kept}/") for k in flat)
        mine = [flat[f"client/{c}/adapter/{kept}/{kept_key}"] for c in range(10)]
        assert len({tuple(t.flatten().tolist()) for t in mine}) == 10


def test_zero_shot_trains_nothing_and_scores_as_the_untrained_model(cls_build, tmp_path,
                                                                     capsys):
    from drake.cli import main

    out = tmp_path / "zs"
    argv = ["eval", "--method", "clip-zeroshot", "--data", str(cls_build / "synth-cls"),
            "--scenario", "base2novel", "--rounds", "1", "--eval-per-task", "2",
            "--eval-initial", "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    results = json.loads((out / "results.json").read_text())
    assert results["cost"]["comm_bytes_up_per_round"] == [0]
    curves = results["curves"]
    first, last = curves["scores"][0], curves["scores"][-1]
    assert first == last  # round 0 before training and the last round agree


# --- cost on the real backbone's shapes -------------------------------------------------------
# pFedMMA Tab. 7 / Tab. 21 on ViT-B/16: (local trainable, per-round up, per-round down)
TAB7 = {"promptfl": (8192, 8192, 8192), "fedpgp": (12416, 8192, 8192),
        "fedotp": (16384, 8192, 8192), "pfedmoap": (74240, 8192, 73728),
        "pfedmma": (248832, 3072, 3072)}
# where the counts differ, and why: pFedMoAP's client also downloads the round's average prompt
# it restarts from (16 x 512); pFedMMA's projections carry biases, which the paper's
# d·r + r·r + r·d per block leaves out (3 blocks x (32 + 768 + 32 + 512 + 32) trainable, 3 x 32
# shared)
DIFF = {"pfedmoap": (0, 0, 16 * 512), "pfedmma": (3 * 1376, 96, 96)}


@pytest.mark.parametrize("method", sorted(TAB7))
def test_parameter_counts_on_vit_b16_shapes_are_the_papers(method):
    from baselines import get_method
    from baselines.costs import parameter_counts, shape_bundle

    hp = {"blocks": 3} if method == "pfedmma" else {}  # Tab. 21's example: blocks 10-12
    got = parameter_counts(get_method(method)(**hp), shape_bundle("clip-vit-b16"),
                           "clip-vit-b16")
    want = tuple(p + d for p, d in zip(TAB7[method], DIFF.get(method, (0, 0, 0))))
    assert (got.trainable, got.up, got.down) == want


@pytest.mark.parametrize("method,scenario,metrics", [
    ("pfedmma", "base2novel", {"local", "base", "novel", "hm"}),
    ("fedpgp", "by-domain", {"accuracy", "acc_noise", "acc_plain"}),
])
def test_runs_validate_and_submit_as_reproduced_entries(cls_build, tmp_path, capsys, method,
                                                        scenario, metrics):
    """`drake eval` on synth-cls, validated and submitted (two seeds) beside the paper's rows of
    the shipped board; the by-domain run reports the spread over domains too."""
    import shutil

    from drake.cli import main

    board = tmp_path / "leaderboard.json"
    shutil.copy("leaderboard/leaderboard.json", board)
    data = str(cls_build / "synth-cls")
    runs = []
    for seed in (0, 1):
        out = tmp_path / f"seed{seed}"
        assert main(["eval", "--method", method, "--data", data, "--scenario", scenario,
                     "--rounds", "1", "--local-steps", "1", "--eval-per-task", "2", "--seed",
                     str(seed), "--out", str(out)]) == 0, capsys.readouterr().err
        results = json.loads((out / "results.json").read_text())
        assert set(results["metrics"]) == metrics
        assert main(["leaderboard", "validate", str(out / "results.json"), "--data",
                     data]) == 0, capsys.readouterr().err
        runs.append(out)
    if scenario == "by-domain":
        point = json.loads((runs[0] / "metrics.jsonl").read_text().splitlines()[-1])
        assert "accuracy_std" in json.dumps(point)
    before = len(json.loads(board.read_text())["entries"])
    assert main(["leaderboard", "submit", str(runs[0]), "--seeds", str(runs[1]),
                 "--leaderboard", str(board), "--data", data, "--submitter", "tests",
                 "--link", "https://example.org/drake"]) == 0, capsys.readouterr().err
    entries = json.loads(board.read_text())["entries"]
    assert len(entries) == before + 1
    mine = entries[-1] if entries[-1]["method"]["name"] == method else next(
        e for e in entries if e["method"]["name"] == method
        and e["benchmark"]["name"] == "synth-cls")
    assert mine["scenario"]["name"] == scenario and mine["provenance"] == "reproduced"
    assert mine["n_seeds"] == 2 and set(mine["metrics"]) >= metrics


def test_prompt_learners_are_scored_with_the_new_global_prompt(cls_build, tmp_path):
    """PromptFL scores every client after aggregation with the averaged context, as the
    repositories test: every client then answers as the same model (equal base and novel
    scores), while each keeps its own trained context for its next turn."""
    from safetensors.torch import load_file

    from drake.runtime.local import LocalRuntime, RunConfig

    cfg = RunConfig(data=str(cls_build / "synth-cls"), scenario="base2novel", method="promptfl",
                    out=str(tmp_path / "r"), rounds=1, local_steps=2, eval_per_task=4)
    LocalRuntime(cfg).run()
    point = json.loads((tmp_path / "r" / "metrics.jsonl").read_text().splitlines()[-1])
    scores = point["scores"]
    assert len({s["base"] for s in scores.values()}) == 1
    assert len({s["novel"] for s in scores.values()}) == 1
    flat = load_file(str(tmp_path / "r" / "checkpoint" / "state.safetensors"))
    own = [flat[f"client/{c}/adapter/global/ctx.global"] for c in range(10)]
    assert len({tuple(t.flatten().tolist()) for t in own}) == 10
