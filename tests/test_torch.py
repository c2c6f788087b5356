"""The model against the same model written with PyTorch's own layers and autograd, in float64:
logits, loss and all 18 gradients within 1e-12 (rounding is far below; a real mistake, many
orders above). Skipped where PyTorch is not installed: tests/README.md says how to install it."""
import math
import random
import unittest
import warnings

import model
from trace_block import SERIES, TINY

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")   # no numpy: fine
try:
    import torch
except ImportError:
    torch = None

TOLERANCE = 1e-12


def torch_reference(params, ids, targets, use_positions=True):
    """(logits, loss, grads) of the model written with torch's layers, as float64 tensors."""
    F = torch.nn.functional
    P = {n: torch.tensor(params[n], dtype=torch.float64, requires_grad=True) for n in params}
    T, d = len(ids), len(params["Wq"])
    x0 = P["tok_emb"][torch.tensor(ids)] + (P["pos_emb"][:T] if use_positions else 0)
    h1 = F.layer_norm(x0, (d,), P["ln1_g"], P["ln1_b"], eps=model.EPS)
    scores = (h1 @ P["Wq"]) @ (h1 @ P["Wk"]).T / math.sqrt(d)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)    # j > i: masked
    x1 = x0 + (F.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ (h1 @ P["Wv"])) @ P["Wo"]
    h2 = F.layer_norm(x1, (d,), P["ln2_g"], P["ln2_b"], eps=model.EPS)
    x2 = x1 + F.relu(h2 @ P["W1"] + P["b1"]) @ P["W2"] + P["b2"]
    logits = F.layer_norm(x2, (d,), P["lnf_g"], P["lnf_b"], eps=model.EPS) @ P["W_out"] + P["b_out"]
    loss = F.cross_entropy(logits, torch.tensor(targets))
    loss.backward()
    return logits.detach(), loss.item(), {n: t.grad if t.grad is not None else torch.zeros_like(t)
                                          for n, t in P.items()}


@unittest.skipIf(torch is None, "PyTorch is not installed: see tests/README.md (its CPU build)")
class TorchTests(unittest.TestCase):

    def assert_matches_torch(self, cfg, T, use_positions=True):
        p = model.init_params(96, cfg["d"], cfg["hidden"], cfg["max_len"], cfg["seed"])
        rng = random.Random(0)
        tokens = [rng.randrange(96) for _ in range(T + 1)]
        logits, cache = model.forward(p, tokens[:-1], use_positions)
        loss, d_logits = model.loss_and_dlogits(logits, tokens[1:])
        grads = model.backward(p, cache, d_logits)
        t_logits, t_loss, t_grads = torch_reference(p, tokens[:-1], tokens[1:], use_positions)
        gaps = {"logits": (torch.tensor(logits, dtype=torch.float64) - t_logits).abs().max().item(),
                "loss": abs(loss - t_loss)}
        for name in model.PARAMETERS:
            lab = torch.tensor(grads[name], dtype=torch.float64)
            self.assertEqual(lab.shape, t_grads[name].shape, name)
            gaps[name] = (lab - t_grads[name]).abs().max().item()
        for name, gap in gaps.items():
            with self.subTest(tensor=name, T=T, d=cfg["d"], use_positions=use_positions):
                self.assertLessEqual(gap, TOLERANCE, f"{name}: largest |lab - torch| = {gap:.3e}")

    def test_the_series_model_and_the_small_copy_with_and_without_positions(self):
        for cfg, T, use_positions in ((SERIES, 64, True), (SERIES, 1, True), (TINY, 8, True),
                                      (SERIES, 64, False)):
            self.assert_matches_torch(cfg, T, use_positions)
