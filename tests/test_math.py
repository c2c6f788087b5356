"""model.py beyond the lesson's twelve: every sum rounded once, scores too large for exp, every
gradient at full size and as a trainer needs it, matmul's skipped zeros, reference.json as
tools/record_reference.py writes it, and the refusals of bad input."""
import doctest
import json
import math
import random
import re
import unittest
from operator import eq, mul
from unittest import mock

import bpe
import model
import trace_block
from test_model import series, tokenizer
from tests.diagnosis import LESSON, REPEATED, X1, X2, apart, raised, tiny
from tests import LAB, diagnosis, run_script


def load_tests(loader, tests, pattern):
    tests.addTests(doctest.DocTestSuite(model))
    return tests


def dot(a, b):
    """a · b as the model means it: each product rounded, their sum rounded once."""
    return math.fsum(map(mul, a, b))


def product(a, b):
    return [[dot(row, col) for col in zip(*b)] for row in a]


# Terms whose exact sum lies a hair above a rounding tie, so that it rounds up: 1 + 2**-53 +
# 2**-106 becomes 1 + 2**-52. Added left to right (sum() before Python 3.12) each small term
# is lost and the sum says 1.0; the compensated sum() of 3.12 keeps them aside but rounds
# their own sum to 2**-53, lands on the tie and says 1.0 too. Rounded once: 1.0000000000000002.
TRAP = [1.0, 2.0 ** -54, 2.0 ** -54, 2.0 ** -106]
ROUNDED_ONCE = 1.0 + 2.0 ** -52
I4 = [[1.0 if r == c else 0.0 for c in range(4)] for r in range(4)]


class ExactSumTests(unittest.TestCase):

    def test_every_sum_is_rounded_once(self):
        """Each sum of model.py is rounded once (math.fsum): fed terms like TRAP, which come out
        otherwise when added any other way, each function gives what its steps give with each
        sum a math.fsum, checked in the order the functions build on each other: the first
        failure names the function whose sum is off. Scores far above and below 0 among them
        overflow exp, or leave a total of 0, unless each row is shifted by its own maximum."""
        try:
            self.the_list_helpers()
            self.layer_norm()
            self.softmax_and_its_backward()
            self.attention_and_its_backward()
            self.the_loss()
            self.the_embeddings_gradient()
        except Exception as error:
            frames = diagnosis.model_frames(error)
            if not frames:          # the test's own fault: its traceback
                raise
            names = [f.name for f in frames if f.name in LESSON]
            function = names[-1] if names else "model.py"
            said = raised(error)
            why = f"{function} raised {said}"
            overflow = isinstance(error, (OverflowError, ZeroDivisionError))    # exp, total 0
            if overflow or "math domain" in str(error):     # or log(0)
                why = (f"{function} fails on scores far from 0, {said}: is each row of scores "
                       f"shifted by its own maximum?")
            raise self.failureException(why) from None

    def assert_rounded_once(self, function, got, want, where="out"):
        """got as want has it: one output, or a tuple of outputs, each named in where."""
        if not isinstance(want, tuple):
            got, want = (got,), (want,)
        for name, found, rounded_once in zip(where.split(), got, want):
            moved = apart(found, rounded_once, name, eq, "its steps with math.fsum give")
            if moved:
                self.fail(f"{function}: {diagnosis.not_rounded_once(function)}: {moved}")

    def the_list_helpers(self):
        self.assert_rounded_once("matmul", model.matmul([TRAP], [[1.0]] * 4), [[ROUNDED_ONCE]])
        # a row holding zeros (skipped: b is finite), and one of zeros only
        a = [[1.0, 0.0, 2.0 ** -54, 2.0 ** -54, 0.0, 2.0 ** -106], [0.0] * 6]
        self.assert_rounded_once("matmul", model.matmul(a, [[1.0]] * 6), [[ROUNDED_ONCE], [0.0]])
        self.assert_rounded_once("add", model.add(*[[[t]] for t in TRAP]), [[ROUNDED_ONCE]])
        self.assert_rounded_once("column_sums", model.column_sums([[t, 2 * t] for t in TRAP]),
                                 [ROUNDED_ONCE, 2 * ROUNDED_ONCE])
        d_x, _, d_b = model.linear_backward([TRAP], [[1.0, 2.0, 3.0, 4.0]], [[1.0] * 4] * 4)
        self.assert_rounded_once("linear_backward", (d_x, d_b), ([[ROUNDED_ONCE] * 4], TRAP),
                                 "d_x d_b")

    def softmax_and_its_backward(self):
        e = [math.exp(-X1), 1.0, math.exp(-X2)]
        # the maximum never first: exp(800) overflows if a row is shifted by its first score,
        # exp(998) if by another row's; row 2's e_j / total are not e_j · (1 / total); row 3
        # is all far below 0, where exp without the shift gives 0.0 and a total of 0
        e3 = [math.exp(-2.0), math.exp(-1.0), 1.0]
        w3 = [v / math.fsum(e3) for v in e3]
        self.assert_rounded_once("softmax", model.softmax([[-X1, 0.0, -X2], [-800.0, 0.0, 0.0],
                                                           [998.0, 999.0, 1000.0],
                                                           [-1002.0, -1001.0, -1000.0]]),
                                 [[v / math.fsum(e) for v in e], [0.0, 0.5, 0.5], w3, w3],
                                 "weights")
        # weights of powers of 2 whose products make a trap; then weights of no power of 2
        w, d_w = [0.5, 0.25, 0.125, 0.125], [2.0, 2.0 ** -52, 2.0 ** -51, 2.0 ** -103]
        rng = random.Random(3)
        w2, d_w2 = [[rng.random() for _ in range(4)] for _ in range(2)]
        want = [[wj * (dj - dot(w, d_w)) for wj, dj in zip(w, d_w)] for w, d_w in
                ((w, d_w), (w2, d_w2))]
        self.assert_rounded_once("softmax_backward",
                                 model.softmax_backward([w, w2], [d_w, d_w2]), want, "d_scores")

    def layer_norm(self):
        # row 0 sums to a trap (the mean); row 1 has mean 0 and squares that make a trap
        roots = [2.0 ** 4, 2.0 ** -23, 2.0 ** -23, 2.0 ** -49]
        rows = [TRAP + [0.0] * 4, roots + [-v for v in roots]]
        g, b = [1.5, 0.5, 2.0, 1.0] * 2, [0.0, 0.25, -0.5, 1.0] * 2
        with mock.patch.object(model, "EPS", 1e-5):     # the squares' trap outlives √(+ 1e-5)
            y, cache = model.layernorm_forward([*map(tuple, rows)], g, b)
        want_y, want_std = [], []
        for row in rows:
            centred = [v - math.fsum(row) / 8 for v in row]
            want_std.append(math.sqrt(math.fsum(c * c for c in centred) / 8 + 1e-5))
            want_y.append([c / want_std[-1] * gj + bj for c, gj, bj in zip(centred, g, b)])
        self.assert_rounded_once("layernorm_forward", (y, cache["std"]), (want_y, want_std),
                                 "y std")
        # backward: xhat is exactly ±1, so d_g, the means and the three terms are traps
        signs = [(-1) ** j for j in range(8)]
        _, cache = model.layernorm_forward([[2.0 ** 26 * s for s in signs]] * 4, [1.0] * 8,
                                           [0.0] * 8)
        three = [1.0, -2.0 ** -51, -1.0, 2.0 ** -104, -2.0 ** -51, 0.0, -2.0 ** -104, 0.0]
        rows = [TRAP + [0.0] * 4, [t * s for t, s in zip(TRAP + [0.0] * 4, signs)]]
        for d_y in ([[t * s for s in signs] for t in TRAP], rows + rows, [three] * 4):
            got = model.layernorm_backward(d_y, [1.0] * 8, cache)
            d_g = [dot(col, x_col) for col, x_col in zip(zip(*d_y), zip(*cache["xhat"]))]
            d_b = [math.fsum(col) for col in zip(*d_y)]
            d_x = [[math.fsum((t, -math.fsum(row) / 8, -x * dot(row, xh) / 8)) / s
                    for t, x in zip(row, xh)] for row, xh, s in zip(d_y, cache["xhat"], cache["std"])]
            self.assert_rounded_once("layernorm_backward", got, (d_x, d_g, d_b), "d_x d_g d_b")

    def attention_and_its_backward(self):
        # q = 2**52 x and k = x: q_2 · k_0 is 2**52 + 2**-2 + 2**-2 + 2**-68, a trap, and
        # d_mixed_2 · v_0 too; then random inputs, where d_x's three parts added as + are off
        p = {"Wq": [[2.0 ** 52 * v for v in row] for row in I4], "Wk": I4, "Wv": I4, "Wo": I4}
        trap_row = [1.0, 2.0 ** -27, 2.0 ** -27, 2.0 ** -60]
        x = [trap_row, [1.0, 0.0, 0.0, 0.0], trap_row]
        d_out = [[1.0, 0.5, 0.25, 2.0], [0.5, 1.0, 1.0, 0.5], [2.0 ** 52 * v for v in trap_row]]
        rng = random.Random(5)
        p_random = {n: [[rng.gauss(0, 1) for _ in range(4)] for _ in range(4)] for n in p}
        x_random = [[rng.gauss(0, 1) for _ in range(4)] for _ in range(5)]
        d_random = [[rng.gauss(0, 1) for _ in range(4)] for _ in range(5)]
        for p, x, d_out in ((p, x, d_out), (p_random, x_random, d_random)):
            self.attention_exactly(p, x, d_out)

    def attention_exactly(self, p, x, d_out):
        T = len(x)
        out, cache = model.attention_forward(p, x)
        q, k, v = (product(x, p[n]) for n in ("Wq", "Wk", "Wv"))
        scores = [[dot(q[i], k[j]) / 2.0 for j in range(i + 1)] for i in range(T)]
        weights = []
        for i, row in enumerate(scores):
            e = [math.exp(z - max(row)) for z in row]
            weights.append([w / math.fsum(e) for w in e] + [0.0] * (T - 1 - i))
        self.assert_rounded_once("attention_forward", (cache["weights"], out),
                                 (weights, product(product(weights, v), p["Wo"])), "weights out")
        grads, d_x = model.attention_backward(p, cache, d_out)
        d_mixed = product(d_out, model.transpose(p["Wo"]))
        d_w = [[dot(d_m, v[j]) if j <= i else 0.0 for j in range(T)] for i, d_m in enumerate(d_mixed)]
        d_s = [[wj * (dj - dot(w, dw)) / 2.0 for wj, dj in zip(w, dw)] for w, dw in zip(weights, d_w)]
        d_q, d_k = product(d_s, k), product(model.transpose(d_s), q)
        d_v = product(model.transpose(weights), d_mixed)
        parts = [product(d, model.transpose(p[n])) for d, n in ((d_q, "Wq"), (d_k, "Wk"), (d_v, "Wv"))]
        want_d_x = [[math.fsum(t) for t in zip(*rows)] for rows in zip(*parts)]
        self.assert_rounded_once("attention_backward", (grads["Wv"], d_x),
                                 (product(model.transpose(x), d_v), want_d_x), "d_Wv d_x")

    def the_loss(self):
        cases = [  # row 0: the softmax's trap; row 1: the top score, 2**53, and the log of the
                   # total, 0.127, lose the 0.127 if they are added before the target's score
                   ([[0.0, -X1, -X2], [2.0 ** 53, 2.0 ** 53 - 2, 0.0]], [0, 1]),
                   # scores 745 or more below the top weigh exactly 0: each loss is that
                   # distance, and 2**116, 2**62, 2**62 and 2**10 make a trap for their mean
                   ([[0.0, -2.0 ** 116], [0.0, -2.0 ** 62], [0.0, -2.0 ** 62], [0.0, -2.0 ** 10]],
                    [1, 1, 1, 1]),
                   # fsum(losses) / 3 is not the mean rounded once, as statistics.mean gives it
                   ([[0.0, -2.0 ** 60], [0.0, -1145.0], [0.0, -1000.0]], [1, 1, 1]),
                   ([[-3000.0, -3001.0, -3002.0]], [0])]    # all far below 0, as for softmax
        for logits, targets in cases:
            losses, d_logits = [], []
            for row, target in zip(logits, targets):
                e = [math.exp(z - max(row)) for z in row]
                losses.append(math.fsum((max(row), math.log(math.fsum(e)), -row[target])))
                d_logits.append([v / (math.fsum(e) * len(logits)) - (j == target) / len(logits)
                                 for j, v in enumerate(e)])
            self.assert_rounded_once("loss_and_dlogits", model.loss_and_dlogits(logits, targets),
                                     (math.fsum(losses) / len(logits), d_logits), "loss d_logits")

    def the_embeddings_gradient(self):
        # a token at 4 positions; each step of backward before step 1 patched to hand rows
        # of TRAP down as they are (its own gradients: any of their shapes), so that
        # d_x0 = D + D, one D along each skip path, and tok_emb[7] is each column's sum
        D = [[t] * 4 for t in TRAP]
        p = tiny()
        logits, cache = model.forward(p, [7] * 4)
        attention = {name: p[name] for name in ("Wq", "Wk", "Wv", "Wo")}
        steps = {"linear_backward": lambda d_y, x, W: ([(r * 2)[:len(W)] for r in D], W, W[0]),
                 "layernorm_backward": lambda dy, g, cache: (dy, g, g),
                 "attention_backward": lambda p, cache, d_out: (attention, [[0.0] * 4] * 4)}
        steps = {name: mock.Mock(side_effect=step) for name, step in steps.items()}
        with mock.patch.multiple(model, **steps):
            grads = model.backward(p, cache, logits)
        calls = {name: step.call_count for name, step in steps.items()}
        if calls != diagnosis.LAYER_CALLS:
            # a backward written its own way: there is no step to hand the traps down
            self.skipTest(f"backward calls the layers' backwards otherwise than the lab's "
                          f"({calls}), so its own sums cannot be handed traps")
        self.assert_rounded_once("backward", grads["tok_emb"][7], [2 * ROUNDED_ONCE] * 4,
                                 "d_tok_emb[7]")


class GradientTests(unittest.TestCase):

    def test_each_lesson_function_passes_its_own_check(self):
        """tests/diagnosis.py's checks, which also see what the twelve do not: an input or a
        cache changed in place, a cache without an entry backward reads."""
        found = diagnosis.first_wrong(model)
        if found:
            self.fail(found)

    def test_every_gradient_at_full_size_along_random_directions(self):
        """Each gradient against the loss's slope along a random direction through its tensor
        (diagnosis.off_along): the series model on the ball sentence, and a model as narrow as
        the small copy with the series' 64 positions, at 1 token and at all 64 (both ends)."""
        rng = random.Random(64)
        series_model = trace_block.build(tokenizer(), trace_block.SERIES)  # off_along nudges it
        narrow = trace_block.build(tokenizer(), {**trace_block.TINY, "max_len": 64})
        ball = tokenizer().encode(trace_block.GRADIENT_SENTENCE)
        for case, p, ids in (("the series model", series_model, ball),
                             ("1 token", narrow, [rng.randrange(96) for _ in range(2)]),
                             ("64 tokens", narrow, [rng.randrange(96) for _ in range(65)])):
            x, y = ids[:-1], ids[1:]
            grads = trace_block.backward_gradients(p, x, y)
            off = [name for name in p if diagnosis.off_along(
                lambda: model.sequence_loss(p, x, y), grads[name], p[name], rng)]
            if off:
                found = diagnosis.first_wrong(model) or "Every lesson function passes its checks."
                self.fail(f"{found}\n\nOn {case}, backward's gradients of {', '.join(off)} are "
                          f"off the loss's slope along a random direction")

    def test_the_gradients_belong_to_the_caller(self):
        """Every parameter gets a gradient of its shape, in lists, none shared with another
        gradient or a parameter (a trainer may change them in place); backward leaves its
        cache as it was."""
        p, ids = series(), tokenizer().encode("mia has a red hat. mia has a hat.")
        for use_positions in (True, False):
            logits, cache = model.forward(p, ids[:-1], use_positions)
            was = {key: repr(value) for key, value in cache.items()}
            grads = model.backward(p, cache, model.loss_and_dlogits(logits, ids[1:])[1])
            changed = [k for k in was if repr(cache[k]) != was[k]]
            if changed:
                self.fail(f"backward changed the cache's {changed[0]} in place: make new lists")
            shapes = {n: model.shape(g) for n, g in grads.items()}
            if shapes != {n: model.shape(t) for n, t in p.items()}:
                self.fail(f"backward: its gradients' shapes are {shapes}, not p's")
            tensors = list(grads.values()) + list(p.values())
            rows = [row for t in tensors if type(t[0]) is not float for row in t] + tensors
            if {type(row) for row in rows} != {list} or len(rows) != len(set(map(id, rows))):
                self.fail("backward: a gradient row is a tuple, another's list or a parameter's "
                          "([[0.0] * d] * V repeats one list): a trainer changes them in place")

    def test_sequence_loss_is_forward_then_the_loss(self):
        for use_positions in (True, False):
            logits, _ = model.forward(tiny(), REPEATED[:-1], use_positions)
            loss = model.sequence_loss(tiny(), REPEATED[:-1], REPEATED[1:], use_positions)
            self.assertEqual(loss, model.loss_and_dlogits(logits, REPEATED[1:])[0])

    def test_matmul_skips_zeros_as_the_plain_line_would_add_them(self):
        """Bit for bit against the plain line, fsum(map(mul, row, col)): zeros first, last or
        amid a row, -0.0, a row of zeros only, inf and nan in b (met by a zero: nan)."""
        rng = random.Random(17)
        a = [[0.0] * i + [rng.choice([0.0, -0.0, rng.random()]) for _ in range(6 - i)]
             for i in range(7)]
        b = [[rng.gauss(0, 1) for _ in range(3)] for _ in range(6)]
        for right in (b, [[math.inf, math.nan, 1.0]] + b[1:], [r[:2] + [-math.inf] for r in b],
                      [[1.0, math.nan, 1.0]] + b[1:]):
            plain = [[math.fsum(map(mul, row, col)) for col in zip(*right)] for row in a]
            self.assertEqual(repr(model.matmul(a, right)), repr(plain))

    def test_reference_json_holds_what_model_py_computes_to_the_bit(self):
        """Every forward's outputs on the diagnosis's inputs, and backward's gradients, as
        tools/record_reference.py writes them on every Python: each output recorded, its
        numbers by value (a learner's 0 or -0.0 for 0.0 is no change, nor a cache entry the
        diagnosis does not need left out). While tools/exercise.py keeps the original model.py,
        that one."""
        from tests.test_mistakes import SOURCE, module_of
        original = module_of(SOURCE)        # a learner's rewrite: test_model.py's to judge
        try:
            text = diagnosis.recorded(original)
        except Exception as error:      # a function raises on the diagnosis's inputs: which
            raise self.failureException(diagnosis.first_wrong(original) or raised(error)) from None
        stored = diagnosis.reference()      # a file that cannot be used: one line, what to do
        if text != diagnosis.REFERENCE.read_text(encoding="utf-8"):
            unrecorded = [f"{name}'s {key}" for name, found in json.loads(text).items()
                          for key in found if key not in stored.get(name, {})]
            if unrecorded:      # an output the diagnosis reads since: it would go unchecked
                self.fail(f"tests/reference.json records no {unrecorded[0]}: python3 "
                          f"tools/record_reference.py")
            moved = diagnosis.first_wrong(original)     # a moved bit: rounded_otherwise()
            found = json.loads(text)["backward"]        # which it reads only in some cases
            keys = [key for key in found if found[key] != stored["backward"].get(key)]
            if not moved and keys:
                moved = (f"the gradients backward() returns differ from reference.json's in "
                         f"the last bit, {keys[0]} first")
            if moved:
                self.fail(f"{moved} (a function rewritten, its original not kept by "
                          f"tools/exercise.py? Or model.py's math changed on purpose, by a "
                          f"maintainer: then python3 tools/record_reference.py)")

    def test_record_reference_writes_it_only_for_a_model_py_that_keeps_its_trace(self):
        """tools/record_reference.py writes diagnosis.recorded() to reference.json; with a
        mistake that moves the trace (layer norm's EPS a hundred times larger), nothing (a
        learner's mistake is no reference)."""
        text = "reference.json's text"      # what recorded() returns: the test above
        wrote = {str(diagnosis.REFERENCE): text}
        for eps, code, written in ((model.EPS, 0, [wrote]), (100 * model.EPS, 1, [])):
            with mock.patch.object(model, "EPS", eps), \
                    mock.patch.object(diagnosis, "recorded", return_value=text), \
                    mock.patch.object(bpe, "write_texts") as write:
                found, _, said = run_script(LAB / "tools" / "record_reference.py")
            self.assertEqual(found, code, said)     # said: why it wrote nothing
            self.assertEqual([call.args[0] for call in write.call_args_list], written)


class Refusals(unittest.TestCase):
    """Bad input gets a ValueError or TypeError saying what is wrong, one row per kind a learner
    can meet (tests 9 to 12 hold the spec's four): (case, call, type, words)."""

    def assert_refused(self, table):
        for case, call, exception, message in table:
            with self.subTest(case=case), self.assertRaisesRegex(exception, message):
                call()

    def test_forward_and_backward(self):
        p = series()
        logits, cache = model.forward(p, [1, 2, 3])
        self.assert_refused([
            ("five offenders named", lambda: model.forward(p, list(range(96, 103))), ValueError,
             re.escape("outside the vocabulary of size 96: [96, 97, 98, 99, 100]") + "$"),
            ("text for IDs", lambda: model.forward(p, "mia"), TypeError,
             "forward: ids must be a list, not 'mia'"),
            ("an ID of True", lambda: model.forward(p, [1, True]), TypeError,
             "list of ints, not one holding True"),
            ("use_positions 'False'", lambda: model.forward(p, [1], "False"), TypeError,
             "use_positions must be True or False, not 'False'"),
            ("tok_emb missing", lambda: model.forward({n: t for n, t in p.items()
                                                       if n != "tok_emb"}, [1]), ValueError,
             "the parameters lack tok_emb"),
            ("Wq of the small copy", lambda: model.forward({**p, "Wq": tiny()["Wq"]}, [1]),
             ValueError, r"Wq has shape \(4, 4\), but it must be \(d, d\) with d = 16"),
            ("d_logits of 2 rows", lambda: model.backward(p, cache, logits[:2]), ValueError,
             r"d_logits has shape \(2, 96\), but it must be \(T, V\) with T = 3")])

    def test_the_loss_refusals(self):
        from tests.test_mistakes import SOURCE, module_of
        lab = module_of(SOURCE)         # its relu passes a nan on; a learner's may stop it
        logits, _ = model.forward(series(), [1, 2])
        self.assert_refused([
            ("target 96", lambda: model.loss_and_dlogits(logits, [1, 96]), ValueError,
             re.escape("target IDs outside the vocabulary of size 96: [96]")),
            ("a score of nan", lambda: model.loss_and_dlogits([[0.0, math.nan]], [1]),
             ValueError, "logits row 0 holds inf or nan"),
            ("a nan in W1, past the lab's relu", lambda: lab.loss_and_dlogits(lab.forward(
                {**series(), "W1": [[math.nan] * 64] + series()["W1"][1:]}, [1, 2])[0], [2, 3]),
             ValueError, "logits row 0 holds inf or nan"),
            ("a row for logits", lambda: model.loss_and_dlogits(logits[0], [1]), ValueError,
             r"logits has shape \(96,\), but it must be \(T, V\)$"),
            ("forward's (logits, cache)", lambda: model.loss_and_dlogits(
                model.forward(series(), [1, 2]), [2, 3]), TypeError, "logits holds a dict")])

    def test_the_lesson_functions_and_the_helpers(self):
        p, x = series(), [[1.0, 2.0, 4.0]]
        _, cache = model.layernorm_forward(x, [1.0] * 3, [0.0] * 3)
        self.assert_refused([
            ("layer norm: a bias of 2", lambda: model.layernorm_forward(x, [1.0] * 3, [0.0] * 2),
             ValueError, r"b has shape \(2,\), but it must be \(d,\) with d = 3, as in x"),
            ("layer norm's dy of 2 rows", lambda: model.layernorm_backward(
                [[1.0] * 3] * 2, [1.0] * 3, cache), ValueError, r"dy has shape \(2, 3\)"),
            ("attention: rows of 4 for weights of 16", lambda: model.attention_forward(
                p, [[0.5] * 4]), ValueError, r"Wq has shape \(16, 16\), but it must be \(d, d\)"),
            ("softmax_backward: rows of 2 and 1", lambda: model.softmax_backward(
                [[0.5, 0.5]], [[1.0]]), ValueError, "d_weights has shape"),
            ("softmax: a score of +inf", lambda: model.softmax([[math.inf, 1.0]]), ValueError,
             r"row 0 holds nan or \+inf"),
            ("softmax: a row of -inf only", lambda: model.softmax([[0.0, 1.0], [-math.inf] * 2]),
             ValueError, "row 1 is all -inf: every score masked, or overflowed"),
            ("matmul: 3 against 2 rows", lambda: model.matmul([[1.0] * 3], [[1.0, 0.0]] * 2),
             ValueError, r"b has shape \(2, 2\), but it must be \(k, m\) with k = 3, as in a"),
            ("transpose: ragged", lambda: model.transpose([[1.0, 2.0], [3.0]]), ValueError,
             r"rows of lengths \[1, 2\]"),
            ("init_params: a seed read as text", lambda: model.init_params(**model.SIZES,
             seed="3"), TypeError, "init_params: seed must be an int, not '3'")])
