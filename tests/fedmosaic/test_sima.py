"""SIMA (Eq. 3-5): golden softmax weights, EMA by hand, sanitisation, proxy gradients."""

from __future__ import annotations

import pytest
import torch

from baselines.fedmosaic import (
    GradientTracker,
    Sanitizer,
    activate,
    arch_mask,
    block_map,
    cosine_matrix,
    ema,
    inject_pqlora,
    mix,
    personalized,
    pq_modules,
    proxy_gradient,
    sima_weights,
)

# Three clients: 1 and 2 nearly parallel, 3 orthogonal to both.
GRADS = [torch.tensor(g, dtype=torch.float64)
         for g in ([1.0, 0.0, 0.0], [1.0, 0.1, 0.0], [0.0, 0.0, 1.0])]


def test_sima_weights_golden():
    S = cosine_matrix(GRADS)
    c = 0.9950371902099893  # cos(g1, g2) = 1 / sqrt(1.01)
    expected_S = torch.tensor([[1, c, 0], [c, 1, 0], [0, 0, 1]], dtype=torch.float64)
    torch.testing.assert_close(S, expected_S, atol=1e-12, rtol=0)
    W = sima_weights(S, tau=0.5)
    # row 1: [e^{1/0.5}, e^{c/0.5}, e^0] / (e^2 + e^{2c} + 1) = [7.389056, 7.316080, 1] / 15.705136
    # row 3: [e^0, e^0, e^2] / (2 + e^2)
    expected = torch.tensor([
        [0.4704866633017598, 0.4658398908612478, 0.06367344583699248],
        [0.4658398908612478, 0.4704866633017598, 0.06367344583699248],
        [0.10650697891920075, 0.10650697891920075, 0.7869860421615985],
    ], dtype=torch.float64)
    torch.testing.assert_close(W, expected, atol=1e-9, rtol=0)
    # the two similar clients weight each other far above the orthogonal one
    assert W[0, 1] > 7 * W[0, 2] and W[1, 0] > 7 * W[1, 2]


def test_public_code_variant_excludes_self():
    W = sima_weights(cosine_matrix(GRADS), tau=0.5, exclude_self=True)
    # row 1 over {2, 3}: [e^{2c}, 1] / (e^{2c} + 1)
    torch.testing.assert_close(W[0], torch.tensor([0.0, 0.879751006397637, 0.12024899360236281],
                                                  dtype=torch.float64), atol=1e-9, rtol=0)
    assert int(W[0].argmax()) == 1 and int(W[1].argmax()) == 0
    torch.testing.assert_close(W.sum(1), torch.ones(3, dtype=torch.float64))


def test_columnwise_similarity_by_hand():
    g1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    g2 = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    # column 0: cos([1,0], [1,1]) = 1/sqrt(2); column 1: cos([0,1], [0,1]) = 1; mean 0.853553...
    S = cosine_matrix([g1, g2], mode="columnwise")
    torch.testing.assert_close(S[0, 1], torch.tensor(0.8535533905932737, dtype=torch.float64))
    torch.testing.assert_close(torch.diagonal(S), torch.ones(2, dtype=torch.float64))


def test_global_modules_are_weighted_sums():
    states = {i: {"P": torch.full((2, 2), float(i + 1)), "Q": torch.tensor([i * 1.0, 1.0])}
              for i in range(3)}
    W = sima_weights(cosine_matrix(GRADS), tau=0.5)
    G = personalized(states, W, [0, 1, 2])
    w = W[0].tolist()
    torch.testing.assert_close(G[0]["P"], torch.full((2, 2), w[0] * 1 + w[1] * 2 + w[2] * 3))
    torch.testing.assert_close(G[0]["Q"], torch.tensor([w[1] + 2 * w[2], 1.0]))
    # conventional LoRA mixes within an architecture only; a lone client keeps its own module
    allowed = arch_mask(["llama", "llama", "qwen"])
    Wa = sima_weights(cosine_matrix(GRADS), tau=0.5, allowed=allowed, exclude_self=True)
    torch.testing.assert_close(Wa, torch.tensor([[0, 1, 0], [1, 0, 0], [0, 0, 0]],
                                                dtype=torch.float64))
    Ga = personalized(states, Wa, [0, 1, 2])
    assert torch.equal(Ga[0]["P"], states[1]["P"]) and torch.equal(Ga[2]["P"], states[2]["P"])
    with pytest.raises(KeyError, match="the others lack"):
        mix([{"a": torch.zeros(1)}, {"b": torch.zeros(1)}], [0.5, 0.5])


def test_ema_by_hand():
    g1, g2 = torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0])
    h1 = ema(None, g1, 0.3)  # ĝ(1) = 0.7 · 0 + 0.3 g1 = [0.3, 0.6]
    h2 = ema(h1, g2, 0.3)    # ĝ(2) = 0.7 [0.3, 0.6] + 0.3 [3, -1] = [1.11, 0.12]
    torch.testing.assert_close(h1, torch.tensor([0.3, 0.6]))
    torch.testing.assert_close(h2, torch.tensor([1.11, 0.12]))
    with pytest.raises(ValueError, match="alpha"):
        ema(None, g1, 0.0)


def test_tracker_samples_every_f_steps_and_decays_per_round():
    tracker = GradientTracker(alpha=0.3, every=10)
    assert [s for s in range(25) if tracker.due(s)] == [0, 10, 20]
    tracker.add(7, torch.tensor([1.0, 2.0]), round=0)
    tracker.add(7, torch.tensor([3.0, 4.0]), round=0)
    # round mean [2, 3]; ĝ = 0.3 · [2, 3]
    torch.testing.assert_close(tracker.end_round(7), torch.tensor([0.6, 0.9]))
    tracker.add(7, torch.tensor([1.0, 0.0]), round=1)
    # ĝ = 0.7 · [0.6, 0.9] + 0.3 · [1, 0] = [0.72, 0.63]
    torch.testing.assert_close(tracker.end_round(7), torch.tensor([0.72, 0.63]))
    assert tracker.end_round(8) is None  # never fed
    restored = GradientTracker(alpha=0.3)
    restored.load_state_dict(tracker.state_dict())
    torch.testing.assert_close(restored.decayed(7), tracker.decayed(7))
    # a client's entries travel out to its record and back in (mid-round sums included)
    tracker.add(7, torch.tensor([2.0, 2.0]), round=2)
    held = tracker.pop_client(7)
    assert set(held) == {"ghat", "sum", "count"} and tracker.decayed(7) is None
    tracker.put_client(7, held)
    torch.testing.assert_close(tracker.end_round(7), 0.7 * torch.tensor([0.72, 0.63])
                               + 0.3 * torch.tensor([2.0, 2.0]))
    copy = GradientTracker(alpha=0.5, first="copy")  # public code: first ĝ is the gradient itself
    copy.add(0, torch.tensor([2.0, 2.0]), round=0)
    torch.testing.assert_close(copy.end_round(0), torch.tensor([2.0, 2.0]))


def test_sanitizer_is_seeded_shared_across_clients_and_noisy_as_configured():
    g = torch.linspace(-1, 1, 10000)
    clean = Sanitizer(noise_std=0.0, keep_fraction=0.25, seed=3)
    kept = clean(g, key=(0, 0, 0))
    assert kept.shape == (2500,)
    idx = clean.indices(10000)
    torch.testing.assert_close(kept, g[idx])  # a subset of the coordinates, unchanged
    assert torch.equal(clean(g, key=(5, 1, 2)), kept)  # same coordinates for every client
    assert not torch.equal(Sanitizer(noise_std=0.0, keep_fraction=0.25, seed=4).indices(10000),
                           idx)
    noisy = Sanitizer(noise_std=0.1, keep_fraction=0.25, seed=3)
    a, b = noisy(g, key=(1, 0, 0)), noisy(g, key=(1, 0, 0))
    assert torch.equal(a, b)  # deterministic under the seed and key
    assert not torch.equal(a, noisy(g, key=(2, 0, 0)))  # fresh noise per client
    assert abs(float((a - kept).std()) - 0.1) < 0.005
    everything = Sanitizer(noise_std=0.0, keep_fraction=1.0)
    assert torch.equal(everything(g, key=(0,)), g)
    rows = Sanitizer(noise_std=0.0, keep_fraction=0.4, subsample="prefix_rows")
    assert torch.equal(rows(torch.arange(20.0).reshape(10, 2), key=(0,)),
                       torch.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match="keep_fraction"):
        Sanitizer(keep_fraction=0.0)


def test_proxy_gradient_on_tiny_llama(make_bundle, public_samples):
    proxy = make_bundle("tiny-llava-llama")
    batch = proxy.collate(public_samples[:2], train=True)
    g = proxy_gradient(proxy, batch)
    assert g.shape == (128, 384)  # last layer's down_proj: hidden x intermediate
    assert g.abs().sum() > 0 and torch.equal(proxy_gradient(proxy, batch), g)
    assert not any(p.requires_grad for p in proxy.model.parameters())  # flags restored
    other = proxy_gradient(proxy, proxy.collate(public_samples[2:4], train=True))
    assert not torch.equal(other, g)
    # adapters are off on the proxy: a non-zero PQ-LoRA does not change the gradient
    inject_pqlora(proxy.model, block_map(proxy.num_layers, 1), r=4)
    activate(proxy.model, ["local"], trainable=["local"])
    with torch.no_grad():
        for m in pq_modules(proxy.model).values():
            m.P["local"].fill_(0.5)
    torch.testing.assert_close(proxy_gradient(proxy, batch), g)
    assert pq_modules(proxy.model)["block0.mlp.down_proj"].P["local"].requires_grad


def test_proxy_gradient_by_hand():
    """Eq. 3's g = dL/dW on a one-weight model: L = mean_i ½ (W x_i − y_i)², so
    g = mean_i (W x_i − y_i) x_iᵀ. W = [1, 2]; x = (1, 1), (2, 0); y = 1, 0: residuals 2 and 2,
    g = ((2, 2) + (4, 0)) / 2 = (3, 1)."""

    class Toy:
        def __init__(self):
            self.model = torch.nn.Sequential(torch.nn.Linear(2, 1, bias=False))
            with torch.no_grad():
                self.model[0].weight.copy_(torch.tensor([[1.0, 2.0]]))
            self.model[0].weight.requires_grad_(False)  # a frozen proxy

        def loss(self, batch):
            pred = self.model(batch["x"]).squeeze(-1)
            return 0.5 * ((pred - batch["y"]) ** 2).mean()

    toy = Toy()
    batch = {"x": torch.tensor([[1.0, 1.0], [2.0, 0.0]]), "y": torch.tensor([1.0, 0.0])}
    g = proxy_gradient(toy, batch, layer=toy.model[0])
    torch.testing.assert_close(g, torch.tensor([[3.0, 1.0]]))
    assert not toy.model[0].weight.requires_grad  # its flag restored: the proxy stays frozen


def test_noise_is_added_once_to_the_upload_at_its_configured_std():
    """Zero gradients, four samples a round: the uploaded ĝ carries noise of std exactly
    noise_std (not noise_std / 2 from averaging four noisy samples, nor α times that), and the
    client's own ĝ stays clean."""
    sigma = 0.5
    tracker = GradientTracker(alpha=0.5, every=1,
                              sanitizer=Sanitizer(noise_std=sigma, keep_fraction=1.0, seed=1))
    for _ in range(4):
        kept = tracker.add(3, torch.zeros(20000), round=0)
        assert float(kept.abs().sum()) == 0.0  # nothing noisy is kept on the client
    upload = tracker.end_round(3, round=0)
    assert float(tracker.decayed(3).abs().sum()) == 0.0
    assert float(upload.std()) == pytest.approx(sigma, rel=0.03)
    assert float(upload.mean()) == pytest.approx(0.0, abs=0.02)
    # the noise depends on (client, round): another round draws other noise
    tracker.add(3, torch.zeros(20000), round=1)
    assert not torch.equal(tracker.end_round(3, round=1), upload)
