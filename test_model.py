"""The lesson's twelve tests, in its three classes and order: Recorded (1), Mechanism (2-6),
FailureCases (7-12). Run: python3 -m unittest -v test_model.py. When figures move, tests 1 and 2
also say where the computation first departs from tests/steps.json (where_it_departs, below)."""
import json
import math
import random
import re
import unittest
from functools import lru_cache
from pathlib import Path

import model
import trace_block
from trace_block import SERIES, TINY, last_logits_gap, position_gaps

STEPS = Path(__file__).resolve().parent / "tests" / "steps.json"   # see where_it_departs
read_steps = lru_cache(lambda: json.loads(STEPS.read_text(encoding="utf-8")))   # read once
TOLERANCE = 1e-7            # the gradient check's bound on |central difference - backward()|
REPEATED = [7, 89, 46, 7, 85, 30, 89, 53, 4]   # 7 and 89 repeat; 8 inputs, one per position


################ Shared: the tokenizer, the two models, the sentences

tokenizer = lru_cache(lambda: trace_block.load_tokenizer())     # loaded once


@lru_cache(maxsize=None)
def series():
    """The series-size parameters (7,440); tests must not change them."""
    return trace_block.build(tokenizer(), SERIES)


def tiny(module=model, p=None):
    """The small copy's parameters (1,060), fresh (a test may change them) or p's, changed in place:
    gains and biases away from 1 and 0, Wq, Wk 50 times larger: attention not uniform."""
    p, rng = p or module.init_params(96, **TINY), random.Random(4)
    for name in ("ln1_g", "ln1_b", "b1", "ln2_g", "ln2_b", "b2", "lnf_g", "lnf_b", "b_out"):
        p[name] = [rng.uniform(0.5, 1.5) if name[-1] == "g" else rng.gauss(0, 0.1) for _ in p[name]]
    p["Wq"], p["Wk"] = ([[50.0 * w for w in row] for row in p[name]] for name in ("Wq", "Wk"))
    return p


def ball():    # the gradient check's sentence, "mia has a red ball.", as its token IDs
    return tokenizer().encode(trace_block.GRADIENT_SENTENCE)


################ Where the computation first departs (tests 1 and 2)

# Forward's intermediate results in the order they are made: (cache entries, what makes them).
FORWARD_STEPS = [
    ("x0", "forward step 1: the embeddings, x0 = tok_emb[ids] + pos_emb[0:T]"),
    ("ln1.std ln1.xhat", "layernorm_forward (LN1) step 2: each row's std, and xhat, of x0"),
    ("h1", "layernorm_forward (LN1) step 3: gain and bias"),
    ("att.q att.k att.v", "attention_forward step 1: the queries, keys and values of h1"),
    ("att.scores", "attention_forward step 2: the scores and the causal mask"),
    ("att.weights", "attention_forward step 3: the weights, softmax of the scores"),
    ("att.mixed", "attention_forward step 4: the mix of the values (matmul_skipping_zeros)"),
    ("a", "attention_forward step 5: the projection"),
    ("x1", "forward step 2: the skip path, x1 = x0 + a"),
    ("ln2.std ln2.xhat", "layernorm_forward (LN2) step 2: each row's std, and xhat, of x1"),
    ("h2", "layernorm_forward (LN2) step 3: gain and bias"),
    ("pre", "forward step 3: pre = linear(h2, W1, b1)"), ("act", "forward step 3: the relu"),
    ("m", "forward step 3: m = linear(act, W2, b2), act's zeros skipped (matmul_skipping_zeros)"),
    ("x2", "forward step 3: the skip path, x2 = x1 + m"),
    ("lnf.std lnf.xhat", "layernorm_forward (LNF) step 2: each row's std, and xhat, of x2"),
    ("hf", "layernorm_forward (LNF) step 3: gain and bias"),
    ("logits", "forward step 4: the output scores"),
    ("loss", "loss_and_dlogits: the mean cross-entropy")]
# The gradients in the order backward() makes them: (names, where they are made, from what).
BACKWARD_STEPS = [
    ("d_logits", "loss_and_dlogits: (softmax - one-hot) / T"),
    ("W_out b_out", "backward step 4: linear_backward of the output scores, from hf and d_logits"),
    ("lnf_g lnf_b", "backward step 4: layernorm_backward (LNF), from its xhat and d_hf"),
    ("W2 b2", "backward step 3: the MLP's layer 2, from act and layernorm_backward's d_x (LNF)"),
    ("W1 b1", "backward step 3: the MLP's layer 1, from h2 and d_pre (the relu's gate)"),
    ("ln2_g ln2_b", "backward step 3: layernorm_backward (LN2), from its xhat and d_h2"),
    ("Wo", "attention_backward step 5, from mixed and d_x1 (step 3's skip path: d_x2 + LN2's d_x)"),
    ("Wv", "attention_backward steps 4 and 1, from h1, the weights and d_mixed"),
    ("Wq Wk", "attention_backward steps 4 to 1: d_weights, softmax_backward, the scores, q, k"),
    ("ln1_g ln1_b", "backward step 2: layernorm_backward (LN1), from attention_backward's d_x"),
    ("pos_emb", "backward step 1: per position, from d_x0 (step 2's skip path: d_x1 + LN1's d_x)"),
    ("tok_emb", "backward step 1: a row per token, the sum over its positions, from d_x0")]
MADE_IN = {name: where for names, where in FORWARD_STEPS + BACKWARD_STEPS for name in names.split()}
GRADIENTS = [name for names, _ in BACKWARD_STEPS for name in names.split()]   # backward order


def forward_steps(module, p, ids):
    """Forward's intermediate results on ids[:-1] (FORWARD_STEPS's names; an entry a cache
    does not hold is left out), the logits as forward returns them, and the loss of ids[1:]."""
    logits, cache = module.forward(p, ids[:-1])
    found = {"logits": [*map(list, logits)], "loss": module.loss_and_dlogits(logits, ids[1:])[0]}
    for name in list(MADE_IN)[:list(MADE_IN).index("logits")]:
        value = cache
        for key in name.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            found[name] = value
    return found


def moved(now, then, where=""):
    """Where a number, a vector or a matrix first differs from its recorded value beyond what
    another platform's exp and log could move it, as '[i][j]: then -> now', or None."""
    if isinstance(then, list):
        if not isinstance(now, (list, tuple)) or len(now) != len(then):
            return f"{where} had {len(then)} entries, has {len(now) if now else now!r}"
        return None if now == then else next(filter(None, (     # equal: no entry to look at
            moved(u, v, f"{where}[{n}]") for n, (u, v) in enumerate(zip(now, then)))), None)
    if then is None or now is None or math.isclose(now, then, rel_tol=1e-9, abs_tol=1e-12):
        return None if (then is None) == (now is None) else f"{where} was {then}, is {now}"
    return f"{where} was {then!r}, is now {now!r}"


def gradient_steps(module, p, ids):
    """d_logits and backward()'s gradients, reading ids[:-1] and predicting ids[1:]."""
    logits, cache = module.forward(p, ids[:-1])
    d_logits = module.loss_and_dlogits(logits, ids[1:])[1]
    return {"d_logits": d_logits, **module.backward(p, cache, d_logits)}


def slope_errors(module, p, ids):
    """For each gradient of BACKWARD_STEPS, in order (a generator): (name, how far backward()'s
    slope along a random unit direction through that tensor, the logits for d_logits, is from
    the loss's, (L(+h) - L(-h)) / 2h), reading ids[:-1] and predicting ids[1:]."""
    x, y, h = ids[:-1], ids[1:], trace_block.STEP
    logits, grads = module.forward(p, x)[0], gradient_steps(module, p, ids)
    rng = random.Random(1)
    for name in GRADIENTS:
        point = logits if name == "d_logits" else p[name]
        rows = point if isinstance(point[0], list) else [point]
        u = [[rng.gauss(0, 1) for _ in row] for row in rows]
        norm = math.sqrt(math.fsum(v * v for u_row in u for v in u_row))
        u = [[v / norm for v in u_row] for u_row in u]                   # a unit direction
        g_rows = grads[name] if isinstance(point[0], list) else [grads[name]]
        along = math.fsum(g * v for g_row, u_row in zip(g_rows, u) for g, v in zip(g_row, u_row))

        def loss(sign):
            nudged = [[a + sign * h * v for a, v in zip(row, u_row)] for row, u_row in zip(rows, u)]
            if name == "d_logits":
                return module.loss_and_dlogits(nudged, y)[0]
            value = nudged if isinstance(point[0], list) else nudged[0]
            return module.loss_and_dlogits(module.forward({**p, name: value}, x)[0], y)[0]
        yield name, abs((loss(1) - loss(-1)) / (2 * h) - along)


def first_wrong_gradient(errors, bound):
    """The first gradient in backward order whose error (errors: a dict, or (name, error)
    pairs in backward order) is not below bound, in words, or None."""
    if isinstance(errors, dict):
        errors = [(name, errors[name]) for name in GRADIENTS if name in errors]
    return next((f"{name}, made in {MADE_IN[name]}: error {error:.2g}"
                 for name, error in errors if not error < bound), None)


def where_it_departs(module=model):
    """The first that moved of init_params' numbers, forward's steps, the gradients, in words."""
    recorded, drawn = read_steps(), module.init_params(96, **TINY)
    for name, values in recorded["init"].items():
        if change := moved(drawn.get(name), values, name):
            return (f"init_params draws other numbers ({change}): one random.Random(seed) draws "
                    f"gauss(0.0, 0.02) for each matrix, in turn, row by row; gains 1.0, biases 0.0")
    found = forward_steps(module, p := tiny(module, drawn), recorded["ids"])  # p: as it comes back
    for name in list(MADE_IN)[:list(MADE_IN).index("d_logits")]:
        if name in found and (change := moved(found[name], recorded["forward"][name], name)):
            return f"Forward departs first at {MADE_IN[name]}. {change}"
    grads = gradient_steps(module, p, recorded["ids"])
    for name in GRADIENTS:
        if change := moved(grads[name], recorded["gradients"][name], name):
            return (f"Forward is unchanged; the first gradient, in backward order, that moved: "
                    f"{name}, made in {MADE_IN[name]}. {change}")
    if changed := [name for name, fresh in tiny(module).items() if p[name] != fresh]:
        return f"p's own {changed[0]} was changed in place (by backward or forward): make new lists"
    return ("Forward and backward are unchanged on the small copy, with positions: look at what "
            "trace_block.py works out, or whether --write wrote block-trace.json from broken code.")


################ 1. The recorded trace

class Recorded(unittest.TestCase):
    """1. The recorded trace is up to date."""

    def test_recorded_trace(self):
        """block-trace.json holds what the code computes (trace_block.py --check)."""
        ok, message = trace_block.check()
        if not ok:
            self.fail(f"{where_it_departs()}\n\n{message}")


################ 2 to 6. The mechanism

class Mechanism(unittest.TestCase):
    """2-6. Gradients, layer norm, causality and the position embeddings' gradient."""

    def test_gradients_match_finite_differences(self):
        """Every gradient of the small copy (1,060 parameters) matches central differences on
        "mia has a red ball." (error below 1e-7), and on IDs where tokens repeat along a
        random direction through each tensor, with tiny()'s parameters (attention not uniform)."""
        report = trace_block.small_copy_check(96, tuple(ball()))
        self.assertEqual(report["parameters_checked"], 1060)
        if wrong := first_wrong_gradient(report["errors_by_tensor"], TOLERANCE):
            self.fail(f"on {trace_block.GRADIENT_SENTENCE!r}, the first gradient in backward "
                      f"order off its finite differences: {wrong}; worst of all: {report['worst']}"
                      f".\n{where_it_departs()}")
        self.assertLess(report["max_rel_error"], 1e-5, "the relative error (of entries >= 1e-4)")
        if wrong := first_wrong_gradient(slope_errors(model, tiny(), REPEATED), TOLERANCE):
            self.fail(f"with tiny()'s gains and biases, on the IDs {REPEATED} (7 and 89 repeat), "
                      f"the first gradient in backward order off its finite differences: {wrong}"
                      f".\n{where_it_departs()}")

    def test_layernorm_centers_and_scales_each_row(self):
        """With gain 2 and bias 1, every row comes out with mean 1 and variance about 4."""
        rng = random.Random(1)
        x = [[rng.gauss(3.0, 5.0) for _ in range(16)] for _ in range(4)]
        y, _ = model.layernorm_forward(x, [2.0] * 16, [1.0] * 16)
        for t, row in enumerate(y):
            mean = math.fsum(row) / 16
            variance = math.fsum((v - mean) ** 2 for v in row) / 16
            self.assertAlmostEqual(mean, 1.0, places=12, msg=f"layernorm_forward: row {t}'s "
                                   f"mean is {mean!r}, not 1 = the bias: is the mean taken "
                                   f"away, and the bias added after the gain?")
            # the biased variance of the normalized row, 1 less a hair for EPS, times 2²
            self.assertAlmostEqual(variance, 4.0, delta=1e-4, msg=f"layernorm_forward: row {t}'s "
                                   f"variance is {variance!r}, not 4 = gain²: is the row divided "
                                   f"by its std, the square root of the variance over d?")

    def test_layernorm_backward_with_nonunit_gains(self):
        """d_x, d_g and d_b, gains other than 1, by central differences; x and dy left unchanged."""
        rng, h = random.Random(2), 1e-6
        x, weights = ([[rng.gauss(0, 1) for _ in range(5)] for _ in range(3)] for _ in "xw")
        g, b = [rng.uniform(0.5, 2.0) for _ in range(5)], [rng.uniform(-1, 1) for _ in range(5)]

        def loss(row, c, value):   # row[c] = value, then a scalar of every output: Σ y · weights
            row[c] = value
            y, _ = model.layernorm_forward(x, g, b)
            return math.fsum(o * w for ro, rw in zip(y, weights) for o, w in zip(ro, rw))

        given = repr((x, weights))
        d_x, d_g, d_b = model.layernorm_backward(weights, g, model.layernorm_forward(x, g, b)[1])
        if repr((x, weights)) != given:      # the differences below would measure another x
            self.fail("layernorm_forward or layernorm_backward changed x or dy in place: write "
                      "the results into new lists")
        wrong = []
        for name, values, analytic in (("d_x", x, d_x), ("d_g", [g], [d_g]), ("d_b", [b], [d_b])):
            for r, (row, a_row) in enumerate(zip(values, analytic)):
                for c, kept in enumerate(row):
                    slope = (loss(row, c, kept + h) - loss(row, c, kept - h)) / (2 * h)
                    row[c] = kept
                    if not abs(slope - a_row[c]) < 1e-8 and name not in "".join(wrong):
                        wrong.append(f"{name}[{r}][{c}]: backward {a_row[c]:.6g}, finite "
                                     f"difference {slope:.6g}")
        if wrong:
            self.fail("layernorm_backward disagrees with finite differences of "
                      "layernorm_forward, first at " + "; ".join(wrong))

    def test_later_token_does_not_change_earlier_logits(self):
        """"mia has a red ball." and "mia has a red hat." share four tokens: the first four
        positions get bit-identical scores, the fifth does not."""
        tok, p = tokenizer(), series()
        hat = model.forward(p, tok.encode("mia has a red hat."))[0]
        ball_logits = model.forward(p, tok.encode("mia has a red ball."))[0]
        seen = [t for t in range(4) if hat[t] != ball_logits[t]]
        if seen:
            self.fail(f"position {seen[0]}'s scores changed when only position 4's token did: a "
                      f"position sees a later one (attention_forward step 2, the causal mask)")
        self.assertNotEqual(hat[4], ball_logits[4], "position 4 holds another token but gets "
                                                    "the same scores")

    def test_unused_positions_get_zero_gradient(self):
        """pos_emb rows past the sequence get an all-zero gradient; row 0 does not; without
        positions, no row gets one."""
        p, ids = series(), ball()
        for use_positions in (False, True):
            logits, cache = model.forward(p, ids[:-1], use_positions)
            grads = model.backward(p, cache, model.loss_and_dlogits(logits, ids[1:])[1])
            used = [t for t, row in enumerate(grads["pos_emb"]) if any(row)]
            if used and not use_positions:
                self.fail(f"without positions, pos_emb rows {used[:3]}... got a gradient (step 1)")
        self.assertEqual(used[:1], [0], "pos_emb row 0 was used: it needs a gradient (step 1)")
        self.assertLess(used[-1], len(ids) - 1, f"pos_emb row {used[-1]} got a gradient, but "
                        f"{len(ids) - 1} tokens use rows 0 to {len(ids) - 2} (backward step 1)")


################ 7 to 12. Failure cases

def foundation_broken():
    """Why the word-order tests cannot say anything, or None: they rest on tests 3 and 5."""
    for name in ("test_layernorm_centers_and_scales_each_row",
                 "test_later_token_does_not_change_earlier_logits"):
        try:
            Mechanism(name).debug()
        except Exception as error:      # a failure, or forward itself raising
            return f"{name} fails ({type(error).__name__}), and this test rests on it"


class FailureCases(unittest.TestCase):
    """7-12. Without positions the order is invisible at the end; bad input is refused."""

    def test_without_positions_the_last_position_cannot_see_word_order(self):
        """The order sentences hold the same tokens: without position embeddings the last
        position's scores are bit-identical (gap 0.0); with them they differ."""
        if reason := foundation_broken():
            self.skipTest(reason)
        self.assertEqual(last_logits_gap(series(), tokenizer(), False), 0.0,
                         "without positions the last position saw the order: is pos_emb left "
                         "out (step 1), and every sum correctly rounded (math.fsum)?")
        self.assertGreater(last_logits_gap(series(), tokenizer(), True), 0.0,
                           "with positions the last position should tell the two apart: does "
                           "forward step 1 add the position embeddings?")

    def test_earlier_positions_still_differ_without_positions(self):
        """Without positions: gap 0 at positions 0, 1 and the last; > 0 at 2 to 7 (new prefixes)."""
        if reason := foundation_broken():
            self.skipTest(reason)
        gaps = position_gaps(series(), tokenizer(), False)
        self.assertEqual(len(gaps), 9)
        self.assertEqual(gaps[:2] + gaps[-1:], [0.0] * 3, "positions 0 and 1 saw the same "
                                                          "'n', 'ow'; the last, the same tokens")
        same = [t for t in range(2, 8) if not gaps[t] > 0.0]
        self.assertEqual(same, [], f"positions {same} have seen different prefixes ('now mia' "
                                   f"against 'now leo') but got the same scores")

    def test_sequence_longer_than_positions(self):
        with self.assertRaisesRegex(ValueError, "^sequence of 65 tokens is longer than the "
                                                "64 positions the model has$"):
            model.forward(series(), [1] * 65)

    def test_token_id_outside_vocabulary(self):
        for bad in (96, -1):
            with self.assertRaisesRegex(ValueError, re.escape(
                    f"token IDs outside the vocabulary of size 96: [{bad}]")):
                model.forward(series(), [1, bad, 2])

    def test_empty_sequence(self):
        with self.assertRaisesRegex(ValueError, "^empty sequence$"):
            model.forward(series(), [])

    def test_targets_must_match_positions(self):
        logits, _ = model.forward(series(), [1, 2, 3])
        with self.assertRaisesRegex(ValueError, "^3 positions but 2 targets$"):
            model.loss_and_dlogits(logits, [2, 3])


def load_tests(loader, tests, pattern):
    """The twelve in the lesson's order (unittest alone would sort classes and tests by name)."""
    return unittest.TestSuite(case(name) for case in (Recorded, Mechanism, FailureCases)
                              for name in vars(case) if name.startswith("test_"))


if __name__ == "__main__":
    unittest.main()
