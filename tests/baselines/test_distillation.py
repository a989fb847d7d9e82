"""The server-side distillation baselines against hand-computed cases: PerAda's client step, its
ensemble KD step and revert; TAKFL's task vectors and merge; the shared pieces
(baselines.distill) and the cross-tokenizer map (baselines.token_align).

The toy model: an adapter is a vector of logits over a 2- (or 5-) token vocabulary, the same
for every sample; a sample's label is its one labelled token. SGD at lr 0.1 throughout, so
each step is ``θ ← θ − 0.1·∇``."""

import math
from types import SimpleNamespace

import pytest
import torch

from baselines import ClientInfo, Payload, get_method
from baselines.distill import (
    kd_loss,
    kd_probs,
    label_rows,
    public_batches,
    sample_ce,
    soft_ce,
    split_validation,
    validation_accuracy,
)
from baselines.takfl import candidate_weights
from baselines.token_align import align, transfer, vocab_map
from drake.errors import DrakeError

LN3 = math.log(3)
VOCAB = {"a": 0, "b": 1}


class Toy:
    """A handle whose logits are the weighted sum of its adapters, one row per sample."""

    def __init__(self, adapters, public=(), lr=0.1, steps=1, vocab=VOCAB):
        self.id, self.arch, self.round, self.steps, self.num_samples = 0, "toy", 0, steps, 4
        self.batch_size = 2
        self.public = list(public)
        self.p = {k: torch.nn.Parameter(torch.tensor(v, dtype=torch.float64))
                  for k, v in adapters.items()}
        self.opt = {k: torch.optim.SGD([p], lr=lr) for k, p in self.p.items()}
        self.bundle = SimpleNamespace(tokenizer=SimpleNamespace(get_vocab=lambda: dict(vocab)))
        self.labels = [0]

    def get(self, adapter):
        return {"w": self.p[adapter].detach().clone()}

    def set(self, adapter, state):
        with torch.no_grad():
            self.p[adapter].copy_(state["w"])

    def params(self, adapter):
        return [self.p[adapter]]

    def batch(self, samples):
        return {"labels": torch.tensor([s["label"] for s in samples])}

    def next_batch(self):
        return self.batch([{"label": y} for y in self.labels])

    def logits(self, batch, adapters, weights=None, trainable=None):
        weights = weights or [1.0] * len(adapters)
        trainable = adapters if trainable is None else trainable
        z = sum(w * (self.p[a] if a in trainable else self.p[a].detach())
                for a, w in zip(adapters, weights))
        n = len(batch["labels"])
        return z[None].expand(n, -1), batch["labels"]

    def loss(self, batch, adapters, weights=None, trainable=None):
        z, y = self.logits(batch, adapters, weights, trainable)
        return torch.nn.functional.cross_entropy(z, y)

    def step(self, adapter, loss, reset_to=None):
        for p in self.p.values():
            p.grad = None
        loss.backward()
        self.opt[adapter].step()


class ToyServer:
    """The server of toy handles; ``fresh`` is every adapter's state before loading."""

    def __init__(self, public, fresh, archs=("a", "b")):
        self.public, self.fresh, self.archs = public, fresh, list(archs)

    def model(self, arch, adapters, *, round, lr=None, optimizer=None):
        states = {k: v["w"].tolist() for k, v in {**self.fresh, **adapters}.items()}
        return Toy(states, self.public)


def w(*v):
    return {"w": torch.tensor(v, dtype=torch.float64)}


# --- the shared pieces ---------------------------------------------------------------------

def test_losses_by_hand():
    student, teacher = torch.tensor([[0.0, 0.0]]), torch.tensor([[LN3, 0.0]])
    kl = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)  # KL([¾, ¼] ‖ [½, ½])
    assert float(kd_loss(student, teacher, 1.0, t_squared=False)) == pytest.approx(kl)
    p = math.sqrt(3) / (math.sqrt(3) + 1)  # softmax([ln 3, 0] / 2)[0]
    kl2 = p * math.log(2 * p) + (1 - p) * math.log(2 * (1 - p))
    assert float(kd_loss(student, teacher, 2.0, t_squared=False)) == pytest.approx(kl2, abs=1e-6)
    assert float(kd_loss(student, teacher, 2.0)) == pytest.approx(4 * kl2, abs=1e-6)
    target = torch.tensor([[0.75, 0.25]])
    assert float(kd_probs(student, target, 1.0)) == pytest.approx(kl)
    # soft CE: −(¾ ln ½ + ¼ ln ½) = ln 2
    assert float(soft_ce(student, target)) == pytest.approx(math.log(2))


def test_label_rows_and_per_sample_ce():
    # a LLaVA batch: labels [B, L]; position t predicts t + 1, so labels[:, 1:] are read, row
    # by row (sample 0's tokens 5 and 6, then sample 1's 7)
    labels = torch.tensor([[-100, -100, 5, 6], [-100, 7, -100, -100]])
    assert label_rows({"labels": labels}, 2).tolist() == [0, 0, 1]
    assert label_rows({"labels": torch.tensor([3, 1, 2])}, 3).tolist() == [0, 1, 2]
    logits = torch.log(torch.tensor([[0.5, 0.5], [0.25, 0.75], [0.9, 0.1]]))
    ce = sample_ce(logits, torch.tensor([0, 1, 0]), torch.tensor([0, 1, 1]), 2)
    assert ce.tolist() == pytest.approx([math.log(2), (-math.log(0.75) - math.log(0.9)) / 2])
    probs = sample_ce(logits.exp(), torch.tensor([0, 1, 0]), torch.tensor([0, 1, 1]), 2,
                      probs=True)
    torch.testing.assert_close(probs, ce)


def test_public_batches_are_evenly_spaced_and_fail_without_public_data():
    public = [{"i": i} for i in range(10)]
    batches = public_batches(public, 4, 3, method="x")
    assert [[s["i"] for s in b] for b in batches] == [[0, 2, 5], [7]]
    assert len(public_batches(public, 50, 4, method="x")) == 3  # all 10, in 4 + 4 + 2
    with pytest.raises(DrakeError, match="perada distils on the benchmark's public samples"):
        public_batches([], 80, 4, method="perada")
    fit, held = split_validation([[1], [2], [3], [4]], 0.25)
    assert (fit, held) == ([[1], [2], [3]], [[4]])
    assert split_validation([[1]], 0.5) == ([[1]], [])


def test_validation_accuracy_is_per_sample_exact_match():
    toy = Toy({"g": [1.0, 0.0]})
    batches = [toy.batch([{"label": 0}, {"label": 1}]), toy.batch([{"label": 0}])]
    assert validation_accuracy(toy, "g", batches) == pytest.approx(2 / 3)
    # a LLaVA-shaped batch: a sample is right only when all its labelled tokens are
    z = torch.tensor([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
    labels = torch.tensor([[-100, 0, 1], [-100, 1, -100]])  # sample 0: tokens 0, 1; sample 1: 1
    lm = SimpleNamespace(logits=lambda b, a, trainable=None: (z, labels[:, 1:][labels[:, 1:]
                                                                            != -100]))
    assert validation_accuracy(lm, "g", [{"labels": labels}]) == 0.5


# --- PerAda ----------------------------------------------------------------------------------

def test_perada_client_step_by_hand():
    """v = [0, 0], w⁰ = [1, 0], label 0, λ = 1: v's gradient is softmax(v) − e₀ + 2λ(v − w⁰) =
    [−½, ½] + [−2, 0]; then w steps on CE alone: softmax([1, 0]) − e₀."""
    client = Toy({"personal": [0.0, 0.0], "global": [1.0, 0.0]})
    method = get_method("perada")(lr=0.1, lam=1.0)
    upload = method.local_train(client)
    torch.testing.assert_close(client.p["personal"].detach(),
                               torch.tensor([0.25, -0.05], dtype=torch.float64))
    s = math.e / (math.e + 1)
    torch.testing.assert_close(client.p["global"].detach(),
                               torch.tensor([1 + 0.1 * (1 - s), -0.1 * (1 - s)],
                                            dtype=torch.float64))
    assert set(upload.tensors) == {"global"}
    assert method.eval_adapters() == {"personal": 1.0}


def test_perada_ensemble_kd_step_keeps_the_better_student():
    """Uploads [0, 4 ln 3], [0, 2 ln 3], [0, −3 ln 3] from clients of 1, 1 and 2 samples: the
    data-size-weighted average (the student) is [0, 0]; the ensemble, the plain mean of their
    logits, is [0, ln 3] (softmax [¼, ¾]). Public batches of 2: three to distil on, the last
    (two samples of label 1) held out."""
    method = get_method("perada")(kd_steps=1, kd_samples=8, val_fraction=0.25, val_every=1)
    public = [{"label": 0}] * 6 + [{"label": 1}] * 2
    method.server = ToyServer(public, {"global": w(0.0, 0.0), "personal": w(0.0, 0.0)})
    ups = {0: Payload({"global": w(0.0, 4 * LN3)}), 1: Payload({"global": w(0.0, 2 * LN3)}),
           2: Payload({"global": w(0.0, -3 * LN3)})}
    infos = {0: ClientInfo(0, "a", 1), 1: ClientInfo(1, "a", 1), 2: ClientInfo(2, "a", 2)}
    msgs = method.aggregate(ups, infos, 0)
    # student [0, 0]: ∇KL = softmax(z) − p = [¼, −¼] (batch-mean of equal rows); one step
    want = torch.tensor([-0.025, 0.025], dtype=torch.float64)
    for c in infos:
        torch.testing.assert_close(msgs[c].tensors["global"]["w"], want)
    # the held-out batch (label 1) went from 0 right (argmax of [0, 0] is token 0) to 1 of 1
    assert method.diagnostics == {"perada_kd_rounds": 1.0}
    torch.testing.assert_close(method.global_model("a")["global"][0]["w"], want)


def test_perada_reverts_to_the_average_when_validation_does_not_improve():
    method = get_method("perada")(kd_steps=1, kd_samples=8, val_fraction=0.25, val_every=1)
    public = [{"label": 0}] * 8  # held-out label 0: [0, 0] already scores 1 of 1
    method.server = ToyServer(public, {"global": w(0.0, 0.0), "personal": w(0.0, 0.0)})
    ups = {0: Payload({"global": w(0.0, 4 * LN3)}), 1: Payload({"global": w(0.0, 2 * LN3)}),
           2: Payload({"global": w(0.0, -3 * LN3)})}
    infos = {0: ClientInfo(0, "a", 1), 1: ClientInfo(1, "a", 1), 2: ClientInfo(2, "a", 2)}
    msgs = method.aggregate(ups, infos, 0)
    torch.testing.assert_close(msgs[0].tensors["global"]["w"],
                               torch.zeros(2, dtype=torch.float64))
    assert method.diagnostics == {"perada_kd_rounds": 1.0, "perada_kd_reverted": 1.0}
    # after kd_rounds the server is plain FedAvg
    method.kd_rounds = 1
    method.aggregate(ups, infos, 1)
    assert method.diagnostics["perada_kd_rounds"] == 1.0


# --- TAKFL -----------------------------------------------------------------------------------

def takfl(**hp):
    method = get_method("takfl")(kd_steps=1, kd_samples=4, temperature=1.0, **hp)
    method.server = ToyServer([{"label": 0}] * 4, {"local": w(0.0, 0.0)})
    ups = {0: Payload({"local": w(2 * LN3, 0.0)}), 1: Payload({"local": w(0.0, 0.0)}),
           2: Payload({"local": w(0.0, 2 * LN3)}), 3: Payload({"local": w(0.0, 0.0)})}
    infos = {0: ClientInfo(0, "a", 1), 1: ClientInfo(1, "a", 1), 2: ClientInfo(2, "b", 1),
             3: ClientInfo(3, "b", 1)}
    return method, method.aggregate(ups, infos, 0)


def test_takfl_task_vectors_and_fixed_merge_by_hand():
    """θ_a = [ln 3, 0] (its ensemble too: τ_aa = 0), θ_b = [0, ln 3]. Student a from b's
    softmax [¼, ¾]: ∇ = [¾ − ¼, ¼ − ¾], τ_ab = −0.1·[½, −½]; the self term's gradient is zero
    at θ_avg. Uniform λ: θ_a = θ_a + ½τ_ab; symmetrically for b."""
    method, msgs = takfl()
    torch.testing.assert_close(msgs[0].tensors["local"]["w"],
                               torch.tensor([LN3 - 0.025, 0.025], dtype=torch.float64))
    torch.testing.assert_close(msgs[2].tensors["local"]["w"],
                               torch.tensor([0.025, LN3 - 0.025], dtype=torch.float64))
    assert method.diagnostics == {"takfl_distillations": 4.0}  # 2 students × 2 teachers


def test_takfl_weights_rows_and_the_released_zero_task_vectors():
    _, msgs = takfl(weights=[[0.0, 1.0], [1.0, 0.0]])
    torch.testing.assert_close(msgs[0].tensors["local"]["w"],
                               torch.tensor([LN3 - 0.05, 0.05], dtype=torch.float64))
    _, msgs = takfl(task_vectors="released")  # the FedMosaic port: τ = 0, i.e. FedAvg
    torch.testing.assert_close(msgs[0].tensors["local"]["w"],
                               torch.tensor([LN3, 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="one weight per group"):
        takfl(weights=[[1.0], [1.0]])


def test_takfl_validated_merge_picks_the_best_candidate():
    assert candidate_weights(1) == [[1.0]]
    assert candidate_weights(3)[0] == pytest.approx([1 / 3] * 3)
    assert candidate_weights(3)[3] == pytest.approx([0.1, 0.1, 0.8])
    method = get_method("takfl")(merge="validated")
    method.server = ToyServer([], {"local": w(0.0, 0.0)})
    held = [[{"label": 0}]]
    taus = [w(0.0, 0.0), w(-0.03, 0.03)]
    # uniform: [0.005, 0.015] (wrong); 0.8 on group a: [0.014, 0.006] (right)
    assert method.lambdas("a", ["a", "b"], w(0.02, 0.0), taus, held, 0) == [0.8, 0.2]
    # every candidate wrong: the uniform one (the first)
    assert method.lambdas("a", ["a", "b"], w(0.0, 0.0), taus, held, 0) == [0.5, 0.5]


# --- the cross-tokenizer map -----------------------------------------------------------------

STUDENT = {"<unk>": 0, "\u2581hello": 1, "\u2581wor": 2, "ld": 3, "\u2581the": 4}
TEACHER = {"<unk>": 0, "\u0120hello": 1, "\u0120world": 2, "\u0120the": 3, "\u0120wo": 4}


def test_vocab_map_swaps_markers_then_takes_the_nearest_token():
    # Ġhello → ▁hello and Ġthe → ▁the exactly; ▁world is 2 edits from ▁wor; ▁wo 1 from ▁wor
    assert vocab_map(TEACHER, STUDENT).tolist() == [0, 1, 2, 4, 2]


def test_a_known_sequence_aligns_and_moves_its_distributions():
    student = ["\u2581hello", "\u2581wor", "ld"]
    teacher = ["\u0120hello", "\u0120world"]
    # edit costs (markers stripped): hello–hello 0, wor–world 2, ld–world 3
    assert align(student, teacher) == [(0, 0), (1, 1), (2, 1)]
    probs = torch.tensor([[0.0, 0.7, 0.1, 0.2, 0.0], [0.0, 0.1, 0.5, 0.1, 0.3]],
                         dtype=torch.float64)
    vmap = vocab_map(TEACHER, STUDENT)
    out = transfer(student, [1, 2, 3], teacher, [1, 2], probs, vmap, 5)
    # hello: teacher ids 1, 2, 3 → student 1, 2, 4; wor ↔ world (the map sends world to wor):
    # world and wo both land on wor (0.5 + 0.3); ld shares world with wor → one-hot on ld
    torch.testing.assert_close(out, torch.tensor([[0, 0.7, 0.1, 0, 0.2], [0, 0.1, 0.8, 0, 0.1],
                                                  [0, 0, 0, 1, 0]], dtype=torch.float64))
    top2 = transfer(student, [1, 2, 3], teacher, [1, 2], probs, vmap, 5, top_k=2)
    torch.testing.assert_close(top2[1], torch.tensor([0, 0, 1.0, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(top2[0], torch.tensor([0, 7 / 9, 0, 0, 2 / 9],
                                                     dtype=torch.float64))
    # the released code's re-softmax over the kept entries flattens the target
    flat = transfer(student, [1, 2, 3], teacher, [1, 2], probs, vmap, 5, resoftmax=True)
    e = [math.exp(0.7), math.exp(0.1), math.exp(0.2)]
    torch.testing.assert_close(flat[0], torch.tensor([0, e[0], e[1], 0, e[2]],
                                                     dtype=torch.float64) / sum(e))


# --- FedMKT ----------------------------------------------------------------------------------

def test_fedmkt_selection_and_loss_by_hand():
    from baselines.fedmkt import mkt_loss, select

    # least cross-entropy wins; a tie goes to the learner's own (candidate 0)
    own, a, b = torch.tensor([0.5, 0.2, 0.3]), torch.tensor([0.4, 0.2, 0.9]), \
        torch.tensor([0.1, 0.7, 0.3])
    assert select(own, [a, b]).tolist() == [2, 0, 0]
    # z = [ln 3, 0] (softmax ¾, ¼) at two tokens of label 0; token 0's sample keeps its own
    # target [1, 0], token 1's takes the other's [0, 1]
    z, y = torch.tensor([[LN3, 0.0], [LN3, 0.0]]), torch.tensor([0, 0])
    cands = [torch.tensor([[1.0, 0.0], [1.0, 0.0]]), torch.tensor([[0.0, 1.0], [0.0, 1.0]])]
    loss = mkt_loss(z, y, torch.tensor([0, 1]), torch.tensor([0, 1]), cands, ce_weight=0.9,
                    drop_own=False)
    ce = -math.log(0.75)
    assert float(loss) == pytest.approx(0.9 * ce + 0.1 * (ce + math.log(4)) / 2, abs=1e-6)
    # the FedMosaic port: a sample whose own target won is left out of the soft term
    loss = mkt_loss(z, y, torch.tensor([0, 1]), torch.tensor([0, 1]), cands, ce_weight=0.9,
                    drop_own=True)
    assert float(loss) == pytest.approx(0.9 * ce + 0.1 * math.log(4), abs=1e-6)


def test_fedmkt_server_distils_the_least_ce_client_and_sends_its_logits():
    """Server model [0, 0] (own CE ln 2) on two public samples of label 0; client 0 sends
    logits [ln 3, 0] (CE −ln ¾), client 1 [0, ln 3] (CE ln 4): both samples take client 0's
    [¾, ¼]. The gradient, ½ per token summed over two equal tokens:
    0.9·(softmax − e₀) + 0.1·(softmax − [¾, ¼]) = [−0.475, 0.475]; one SGD step at 0.1."""
    from baselines.fedmkt import LOGITS, FedMKT

    method = get_method("fedmkt")()
    method.server = ToyServer([{"label": 0}] * 2, {"local": w(0.0, 0.0)}, archs=["a"])
    sender = Toy({"local": [0.0, 0.0]}, [{"label": 0}] * 2)
    batches = [sender.batch([{"label": 0}] * 2)]
    ups = {}
    for c, state in enumerate((w(LN3, 0.0), w(0.0, LN3))):
        sender.set("local", state)
        ups[c] = Payload({LOGITS: method.public_logits(sender, batches)})
    probs, ce = FedMKT.unpack(ups[0].tensors[LOGITS])
    torch.testing.assert_close(probs[0], torch.tensor([[0.75, 0.25]] * 2))
    assert ce[0].tolist() == pytest.approx([-math.log(0.75)] * 2, abs=1e-6)
    msgs = method.aggregate(ups, {0: ClientInfo(0, "a", 1), 1: ClientInfo(1, "a", 1)}, 0)
    want = torch.tensor([0.0475, -0.0475], dtype=torch.float64)
    torch.testing.assert_close(method.global_model("a")["local"][0]["w"], want)
    assert method.diagnostics == {"fedmkt_server_target_own": 0.0,
                                  "fedmkt_server_target_client": 2.0}
    sent = msgs[1].tensors[LOGITS]
    assert sent["indices"].tolist() == [[0, 1], [0, 1]]
    torch.testing.assert_close(sent["values"], want[None].repeat(2, 1))


def test_fedmkt_client_distils_the_server_logits_before_training():
    from baselines.fedmkt import LOGITS

    method = get_method("fedmkt")()
    client = Toy({"local": [0.0, 0.0]}, [{"label": 0}] * 2, steps=0)
    client.state = {}
    server = Toy({"local": [LN3, 0.0]})
    batches = [server.batch([{"label": 0}] * 2)]
    method.receive(client, Payload({LOGITS: method.public_logits(server, batches)}))
    upload = method.local_train(client)
    # own CE ln 2 > the server's −ln ¾: both samples distil the server's [¾, ¼]
    torch.testing.assert_close(client.p["local"].detach(),
                               torch.tensor([0.0475, -0.0475], dtype=torch.float64))
    assert client.state == {}  # the logits are used once
    assert set(upload.tensors) == {LOGITS}  # logits, never parameters
    assert upload.meta["kd_loss"] > 0


def test_teacher_targets_move_a_teacher_onto_a_student_with_another_tokenizer():
    """The server-side path: one public answer, tokenized "▁hello ▁wor ld" by the student's
    family and "Ġhello Ġworld" by the teacher's (labels[:, 1:] hold the answer tokens)."""
    from baselines.distill import TeacherTargets

    vocab = {"s": STUDENT, "t": TEACHER}
    answer = {"s": [1, 2, 3], "t": [1, 2]}

    def tokenizer(v):
        inverse = {i: t for t, i in v.items()}
        return SimpleNamespace(get_vocab=lambda: dict(v),
                               convert_ids_to_tokens=lambda ids: [inverse[i] for i in ids])

    def model(arch, adapters, *, round, lr=None, optimizer=None):
        return SimpleNamespace(
            batch=lambda samples: {"labels": torch.tensor([[-100, *answer[arch]]])},
            bundle=SimpleNamespace(tokenizer=tokenizer(vocab[arch])))

    targets = TeacherTargets(SimpleNamespace(model=model), "local", [[{"id": "x"}]], 0)
    probs = torch.tensor([[0.0, 0.7, 0.1, 0.2, 0.0], [0.0, 0.1, 0.5, 0.1, 0.3]])
    moved = targets.move([probs], "t", "s")
    torch.testing.assert_close(moved[0], torch.tensor([[0, 0.7, 0.1, 0, 0.2],
                                                       [0, 0.1, 0.8, 0, 0.1],
                                                       [0, 0, 0, 1.0, 0]]))
    assert targets.move([probs], "t", "t")[0] is probs  # one family: unchanged
