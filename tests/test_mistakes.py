"""Learner mistakes, each planted in a scratch copy of model.py (never in model.py itself), and
the failure that names it (tests/README.md says what each test proves). If model.py no longer
holds the line a mistake edits, the test fails and says which: it never passes in silence."""
import contextlib
import io
import linecache
import re
import shutil
import sys
import tempfile
import types
import unittest
from functools import reduce
from operator import add
from pathlib import Path
from unittest import mock

import model
import test_model
import trace_block
import tests.test_math as math_tests
from tests import LAB, diagnosis, run_main, tool_module

# the original model.py: tools/exercise.py's kept copy, while a learner writes a function
KEPT = diagnosis.KEPT
SOURCE = (KEPT if KEPT.exists() else LAB / "model.py").read_text(encoding="utf-8-sig")
TWELVE = test_model.TWELVE


def planted(*edits):
    """A scratch copy of model.py, as a module, with each edit (old, new) made where old stands,
    once in model.py."""
    source = SOURCE
    for old, new in edits:
        if source.count(old) != 1:
            raise AssertionError(f"cannot plant a mistake: model.py does not hold {old!r} "
                                 f"once (rewritten? these tests plant on the lab's model.py, "
                                 f"which tools/exercise.py keeps for them when it blanks a "
                                 f"function)")
        source = source.replace(old, new)
    return module_of(source)


def module_of(source):
    module = types.ModuleType("model_with_a_mistake")
    name = f"model.py (a mistake planted, {hash(source)})"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)   # for steps
    module.__file__ = name          # for diagnosis.defined_twice
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def run_with(module, tests):
    """The result of tests, (TestCase, name) pairs, run in order with module as model.py."""
    result = unittest.TestResult()
    with mock.patch.object(math_tests, "model", module), \
            mock.patch.object(test_model, "model", module), \
            mock.patch.object(trace_block, "model", module), \
            mock.patch.dict(test_model.FAILED, clear=True):
        for case, name in tests:
            case(name).run(result)
    return result


def first_line(result):
    """The first line of the message of the result's first failure."""
    failed = result.failures + result.errors
    if not failed:
        return "(no test failed)"
    text = failed[0][1]         # a traceback, then the exception's own message
    start = text.index("\n", text.rindex("Traceback (most recent call last):"))
    message = next(line for line in text[start:].splitlines()[1:] if line[:1] != " ")
    return message.partition(": ")[2]


def counted(module, tests):
    """(how many of tests fail, how many skip) with module as model.py."""
    result = run_with(module, tests)
    return len(result.failures + result.errors), len(result.skipped)


MASK = "if j <= i else -math.inf"
LN_TERMS = "fsum((term1, -mean_d_xhat, -xhat_j * mean_d_xhat_xhat))"
SHIFTED = "        e = [exp(z - top) for z in row]\n        total = fsum(e)\n"
MISTAKES = [   # (its verdict's first words: the function, the step; the mistake; an edit or edits)
    ("layernorm_forward step 2: row 0 of xhat has variance", "the variance over d - 1",
     ("c in centred) / d", "c in centred) / (d - 1)")),
    ("layernorm_forward step 1", "the mean over the rows", ("fsum(row) / d", "fsum(row) / len(x)")),
    ("layernorm_forward step 2 (std", "ε outside the root",
     ("sqrt(variance + EPS)", "sqrt(variance) + EPS")),
    ("layernorm_forward: xhat[", "ε added to the std, a hair", ("[c / s for c in centred]",
                                                              "[c / (s + 1e-12) for c in centred]")),
    ("layernorm_forward", "ε a tenth of EPS",
     ("sqrt(variance + EPS)", "sqrt(variance + EPS / 10)")),
    ("layernorm_forward step 3: y[0][0] is", "the bias before the gain",
     ("xh * g_j + b_j for", "(xh + b_j) * g_j for")),
    ("layernorm_forward: its cache's xhat", "y kept as xhat",
     ('return y, {"xhat": xhat, "std": std}', 'return y, {"xhat": y, "std": std}')),
    ("layernorm_forward: its cache holds no 'std'", "std left out of the cache",
     ('"xhat": xhat, "std": std}', '"xhat": xhat}')),
    ("layernorm_forward changed its input x in place", "x changed in place",
     ("centred = [x_j - mean", "centred = row\n        row[:] = [x_j - mean")),
    ("layernorm_forward: its second output is a list", "(cache, y) returned",
     ('return y, {"xhat": xhat, "std": std}', 'return {"xhat": xhat, "std": std}, y')),
    ("layernorm_backward", "the last term dropped", (LN_TERMS, "fsum((term1, -mean_d_xhat))")),
    ("layernorm_backward", "a sign flipped",
     (LN_TERMS, LN_TERMS.replace("-mean_d_xhat,", "mean_d_xhat,"))),
    ("layernorm_backward", "times the std",
     ("mean_d_xhat_xhat)) / s", "mean_d_xhat_xhat)) * s")),
    ("layernorm_backward", "dy for dy · g", ("[dy_j * g_j for dy_j, g_j", "[dy_j for dy_j, g_j")),
    ("layernorm_backward", "divided by √(std² + ε)",
     ("mean_d_xhat_xhat)) / s", "mean_d_xhat_xhat)) / sqrt(s * s + EPS)")),
    ("layernorm_backward", "d_g without xhat", ("list(map(mul, dy_t, xhat_t))", "list(dy_t)")),
    ("layernorm_backward changed its input dy in place", "dy changed in place",
     ("d_xhat = [dy_j * g_j", "d_xhat = dy_t\n        dy_t[:] = [dy_j * g_j")),
    ("layernorm_backward changed the cache in place", "the cache's xhat changed in place",
     ("    return d_x, d_g, d_b", "    xhat[0][0] *= 2.0\n    return d_x, d_g, d_b")),
    ("softmax", "shifted by the minimum", ("top = max(row)\n" + SHIFTED + "        weights",
                                           "top = min(row)\n" + SHIFTED + "        weights")),
    ("softmax: weights are at least 0 and sum to 1", "not divided by the total",
     ("weights.append([e_j / total", "weights.append([e_j")),
    ("softmax: a score of -inf must weigh exactly 0", "a masked score weighed",
     (SHIFTED + "        weights",
      SHIFTED.replace("exp(z - top)", "exp(max(z, -9.0) - top)") + "        weights")),
    ("softmax: row 1 changes when it is alone", "one maximum for all rows",
     ("top = max(row)\n", "top = max(map(max, scores))\n")),
    ("softmax changed its input scores in place", "weights written over the scores",
     ("weights.append([e_j / total for e_j in e])",
      "row[:] = [e_j / total for e_j in e]\n        weights.append(row)")),
    ("model.py defines add twice, at lines", "a helper of one's own called add",
     ("def layernorm_forward(", "def add(u, v):\n    return [a + b for a, b in zip(u, v)]\n\n\n"
                                "def layernorm_forward(")),
    ("model.py has no def sequence_loss", "sequence_loss renamed",
     ("def sequence_loss(", "def my_sequence_loss(")),
    ("softmax returned what its callers cannot use", "no return at the end",
     ("        weights.append([e_j / total for e_j in e])\n    return weights\n",
      "        weights.append([e_j / total for e_j in e])\n")),
    ("softmax_backward", "a sign flipped", ("w_j * (d_w_j - average)", "w_j * (d_w_j + average)")),
    ("softmax_backward", "the average not weighted",
     ("fsum(map(mul, w, d_w))", "fsum(d_w) / len(d_w)")),
    ("softmax_backward", "without the weight", ("[w_j * (d_w_j - average)", "[(d_w_j - average)")),
    ("softmax_backward changed its input d_weights in place", "d_w changed in place",
     ("        average = fsum(", "        d_w[:] = d_w[1:] + d_w[:1]\n        average = fsum(")),
    ("attention_forward step 2", "no 1/√d", ("s / sqrt_d if j", "s if j")),
    ("attention_forward step 2", "d ** 1/2 for √d",
     ('p["Wo"])\n    sqrt_d = sqrt(len(x[0]))', 'p["Wo"])\n    sqrt_d = len(x[0]) ** 1/2')),
    ("attention_forward: out[3] changed when only the last position's x did",
     "a mask that sees one ahead", (MASK, "if j <= i + 1 else -math.inf")),
    ("attention_forward", "a mask reversed", (MASK, "if j >= i else -math.inf")),
    ("attention_forward", "a mask that hides the diagonal too", (MASK, "if j < i else -math.inf")),
    ("attention_forward: out[0] holds inf or nan", "the diagonal hidden, softmax written out",
     [(MASK, "if j < i else -math.inf"),
      ("    weights = softmax(scores)  ",
       "    weights = [[exp(z - max(r)) / fsum(exp(y - max(r)) for y in r) for z in r]\n"
       "               for r in scores]")]),
    ("attention_forward: it returns one dict", "a default cache={}, filled in each call",
     [("def attention_forward(p, x):", "def attention_forward(p, x, cache={}):"),
      ('    return out, {"x": x,', '    cache.update({"x": x,'),
      ('\n                 "mixed": mixed}',
       '\n                 "mixed": mixed})\n    return out, cache')]),
    ("attention_forward: its cache holds no 'mixed'", "mixed left out of the cache",
     (',\n                 "mixed": mixed}', "}")),
    ("attention_forward step 1", "Wk for Wq", ('q = matmul(x, p["Wq"])', 'q = matmul(x, p["Wk"])')),
    ("attention_forward: its cache's q", "q and k swapped in the cache",
     ('"q": q, "k": k', '"q": k, "k": q')),
    ("attention_backward step 5", "d_Wo's rows run together (the gradient check sees it)",
     ('"Wo": d_Wo}', '"Wo": [v for row in d_Wo for v in row]}')),
    ("attention_backward steps 4 to 2", "1/√d in the forward pass only",
     [(f"e / sqrt_d for e in row] for row in matmul({m}", f"e for e in row] for row in matmul({m}")
      for m in ("d_scores, k", "transpose(d_sc")]),
    ("attention_backward steps 4 to 2", "d ** 1/2 for √d in the backward pass",
     ('d_out)\n    sqrt_d = sqrt(len(x[0]))', 'd_out)\n    sqrt_d = len(x[0]) ** 1/2')),
    ("attention_backward steps 5 and 4", "Wo untransposed",
     ('matmul(d_out, transpose(p["Wo"]))', 'matmul(d_out, p["Wo"])')),
    ("attention_backward step 1", "d_x without the values' part",
     (',\n              matmul(d_v, transpose(p["Wv"])))', ")")),
    ("attention_backward steps 5 and 4", "d_v from the weights untransposed",
     ("matmul(transpose(weights), d_mixed)", "matmul(weights, d_mixed)")),
    ("attention_backward step 1", "d_Wk from d_q",
     ('"Wk": matmul(x_T, d_k)', '"Wk": matmul(x_T, d_q)')),
    ("attention_backward: its gradients are named", "a gradient misnamed",
     ('"Wo": d_Wo}', '"W_o": d_Wo}')),
    ("attention_backward changed the cache in place",
     "d_scores written over the cache's weights, in place",
     ("d_weights)             # (T, T)\n", "d_weights)\n    for row, d_row in zip(weights, "
      "d_scores):\n        row[:] = d_row\n    d_scores = weights\n")),
    ("forward step 1:", "a position looked up by the token",
     ('p["pos_emb"][:len(ids)]', '[p["pos_emb"][i % len(p["pos_emb"])] for i in ids]')),
    ("forward step 2:", "a skip path dropped", ("x1 = add(x0, a)", "x1 = a")),
    ("forward step 1, with use_positions=False", "use_positions=False ignored",
     ("    if use_positions:\n", "    if True:\n")),
    ("forward step 3: LN2's", "LN2 fed x0",
     ('layernorm_forward(x1, p["ln2', 'layernorm_forward(x0, p["ln2')),
    ("forward: its cache's 'ids' is the caller's list", "the caller's ids cached",
     ('"ids": list(ids)', '"ids": ids')),
    ("forward: its cache holds no 'h1'", "h1 left out of the cache", ('"h1": h1, ', "")),
    ("forward: it returns one dict", "forward's default cache={}, filled in each call",
     [('use_positions=True):\n    """(logits', 'use_positions=True, cache={}):\n    """(logits'),
      ('    return logits, {"ids"', '    cache.update({"ids"'),
      ('"lnf": lnf, "hf": hf}', '"lnf": lnf, "hf": hf})\n    return logits, cache')]),
    ("forward: its cache's h2", "h1 kept as h2", ('"h2": h2, ', '"h2": h1, ')),
    ("forward: its cache's 'att' is a list", "attention's output kept as its cache",
     ('"h1": h1, "att": att,', '"h1": h1, "att": a,')),
    ("forward step 3: the relu", "no relu",
     ("act = [[max(z, 0.0) for z in row] for row in pre]", "act = pre")),
    ("forward changed the parameters in place", "tok_emb's rows changed in place",
     [('x0 = [list(p["tok_emb"][i]) for i in ids]', 'x0 = [p["tok_emb"][i] for i in ids]'),
      ('        x0 = add(x0, p["pos_emb"][:len(ids)])',
       '        for row, pos in zip(x0, p["pos_emb"]):\n'
       '            row[:] = [a + b for a, b in zip(row, pos)]')]),
    ("loss_and_dlogits", "the gradient without 1/T",
     [("e_j / (total * T)", "e_j / total"), ("d_row[target] -= 1.0 / T", "d_row[target] -= 1.0")]),
    ("loss_and_dlogits: loss is", "the loss summed",
     ("return fsum(losses) / T,", "return fsum(losses),")),
    ("loss_and_dlogits", "the one-hot left out", ("d_row[target] -= 1.0 / T", "pass")),
    ("loss_and_dlogits", "the one-hot found by value, at a tie too",
     ("d_row[target] -= 1.0 / T",
      "d_row = [v - (z == row[target]) / T for v, z in zip(d_row, row)]")),
    ("loss_and_dlogits changed its input logits in place", "logits shifted in place",
     ("        e = [exp(z - top) for z in row]\n        total = fsum(e)\n        # -log",
      "        row[:] = [z - top for z in row]\n        top = 0.0\n"
      "        e = [exp(z) for z in row]\n        total = fsum(e)\n        # -log")),
    ("backward step 3: the relu's gate", "the relu's gate left open",
     ("d_pre = [[d_j if z > 0.0 else", "d_pre = [[d_j if True else")),
    ("backward step 3: the relu's gate: b1[0]", "the relu's gate open at 0",
     ("d_pre = [[d_j if z > 0.0 else", "d_pre = [[d_j if z >= 0.0 else")),
    ("backward step 3's skip path", "the skip path around the MLP",
     ("d_x1 = add(d_x2, d_x1_mlp)", "d_x1 = d_x1_mlp")),
    ("backward step 3's skip path or LN2's call (d_x1 = d_x2 + LN2's d_x), or step 2's d_a",
     "attention given d_x2", ("d_a = d_x1  ", "d_a = d_x2  ")),
    ("backward step 2: attention_backward's call: no gradient 'Wq'", "attention's gradients "
     "left out", ("    grads.update(att_grads)\n", "")),
    ("backward step 2's skip path", "the skip path around attention",
     ("add(d_x1, d_x0_att)", "d_x0_att")),
    ("backward step 1: pos_emb's", "positions in the wrong rows",
     ('["pos_emb"][:len(d_x0)]', '["pos_emb"][1:len(d_x0) + 1]')),
    ("backward step 1: tok_emb's", "a repeated token's gradient overwritten",
     ("][token] = column_sums(rows)", "][token] = rows[-1]")),
    ("backward step 1: tok_emb's", "the last position's token left out",
     ('set(cache["ids"])', 'set(cache["ids"][:-1])')),
    ("backward step 3's skip path", "LN2 given LN1's gain",
     ('(d_h2, p["ln2_g"]', '(d_h2, p["ln1_g"]')),
    ("backward step 3: LN2's layernorm_backward", "LN2 given LN1's cache",
     ('p["ln2_g"], cache["ln2"])', 'p["ln2_g"], cache["ln1"])')),
    ("backward step 4's d_x2", "LNF given LN2's gain", ('(d_hf, p["lnf_g"]', '(d_hf, p["ln2_g"]')),
    ("backward: it returns one dict", "a default grads={}, filled in each call",
     [("def backward(p, cache, d_logits):", "def backward(p, cache, d_logits, grads={}):"),
      ("    grads = {}\n", ""),
      ("return {name: grads[name] for name in PARAMETERS}", "return grads")]),
    ("backward changed the parameters in place", "the gradients written into p's own lists",
     [("    grads = {}\n", "    grads = dict(p)\n"),
      ('    grads["tok_emb"] = [[0.0] * len(row) for row in p["tok_emb"]]     # (V, d)\n', "")]),
    ("backward step 1: pos_emb gets", "pos_emb's gradient without positions",
     ('if cache["use_positions"]:', "if True:")),
    ("backward step 3: the relu's gate (d_pre, where pre > 0), or the first layer: W1 has 32 "
     "numbers, not 4 rows", "W1's gradient as one flat list (the gradient check sees it)",
     ('cache["h2"], p["W1"])\n', 'cache["h2"], p["W1"])\n'
      '    grads["W1"] = [w for row in grads["W1"] for w in row]\n')),
    ("init_params draws other numbers", "drawn column by column",
     ("[[rng.gauss(0.0, 0.02) for _ in range(dims[1])] for _ in range(dims[0])]",
      "[list(c) for c in zip(*[[rng.gauss(0.0, 0.02) for _ in range(dims[0])]\n"
      "                                for _ in range(dims[1])])]"))]
EACH_FAILS = {    # each of the twelve, by number: a mistake it must fail on (2, 4: a subtle one)
    1: "ε a tenth of EPS", 2: "a masked score weighed", 3: "the variance over d - 1",
    4: "ε outside the root", 5: "a mask that sees one ahead",
    6: "pos_emb's gradient without positions", 7: "one maximum for all rows",
    8: "use_positions=False ignored", 9: ('if len(ids) > sizes["P"]:', 'if len(ids) > 65:'),
    10: ("not 0 <= i < vocab", "not 0 <= i <= vocab"),
    11: ('raise ValueError("empty sequence")', 'raise ValueError("no tokens")'),
    12: ("if len(targets) != len(logits):", "if len(targets) > len(logits):")}
LENGTHS = [(math_tests.GradientTests, "test_every_gradient_at_full_size_along_random_directions")]
EXACT_SUMS = [(math_tests.ExactSumTests, "test_every_sum_is_rounded_once")]
OWN = [(math_tests.GradientTests, "test_the_gradients_belong_to_the_caller")]
OWN_CHECK = [(math_tests.GradientTests, "test_each_lesson_function_passes_its_own_check")]
CAUGHT_BY_THE_LAB = [   # (the mistake, its edit, the lab's tests that catch it, their first words)
    ("softmax without the shift",
     (SHIFTED + "        weights", SHIFTED.replace(" - top", "") + "        weights"),
     EXACT_SUMS, "softmax fails on scores far from 0, OverflowError"),
    ("softmax shifted by each row's first score",
     ("top = max(row)\n" + SHIFTED + "        weights",
      "top = row[0]\n" + SHIFTED + "        weights"),
     EXACT_SUMS, "softmax fails on scores far from 0, OverflowError"),
    ("softmax shifted by row 0's maximum", ("top = max(row)\n", "top = max(scores[0])\n"),
     EXACT_SUMS, "softmax fails on scores far from 0, OverflowError"),
    ("layer norm's variance as mean(x²) - mean², which loses digits far from 0",
     ("fsum(c * c for c in centred) / d", "fsum(x_j * x_j for x_j in row) / d - mean * mean"),
     OWN_CHECK, "layernorm_forward: std[5] is"),
    ("softmax multiplying by 1 / total",
     ("weights.append([e_j / total for e_j in e])",
      "weights.append([e_j * (1.0 / total) for e_j in e])"), EXACT_SUMS,
     "softmax: a sum is not rounded once (use math.fsum), as sum() and math.sumprod are not, "
     "or a step is done otherwise than the lesson's formula (or with an ε other than "
     "model.EPS), which the lab holds to the last bit (exp(z) for exp(z - max), "
     "e * (1 / total) for e / total"),
    ("softmax's maximum started at 0", ("top = max(row)\n" + SHIFTED + "        weights",
                                        "top = max(0.0, *row)\n" + SHIFTED + "        weights"),
     EXACT_SUMS, "softmax fails on scores far from 0, ZeroDivisionError"),
    ("the loss's maximum started at 0", ("top = max(row)  ", "top = max(0.0, *row)  "),
     EXACT_SUMS, "loss_and_dlogits fails on scores far from 0, ValueError"),
    ("the loss without the shift",
     (SHIFTED + "        # -log", SHIFTED.replace(" - top", "") + "        # -log"),
     EXACT_SUMS, "loss_and_dlogits fails on scores far from 0, OverflowError"),
    ("the loss as -log of the target's weight",
     ("fsum((top, log(total), -row[target]))", "-log(e[target] / total)"),
     EXACT_SUMS, "loss_and_dlogits: a sum is not rounded once"),
    ("forward refusing all its positions",
     ('if len(ids) > sizes["P"]:', 'if len(ids) >= sizes["P"]:'), LENGTHS,
     "sequence of 64 tokens is longer than the 64 positions"),
    ("forward refusing a single token",
     ('check("forward(ids: T)", ids)', 'check("forward(ids: T)", ids[1:])'), LENGTHS,
     "empty sequence"),
    ("backward adding a token's rows one by one",
     ('grads["tok_emb"][token] = column_sums(rows)',
      'grads["tok_emb"][token] = [0.0] * len(rows[0])\n'
      '        for row in rows:\n'
      '            grads["tok_emb"][token] = add([grads["tok_emb"][token]], [row])[0]'),
     EXACT_SUMS, "backward: a sum is not rounded once (use math.fsum)"),
    ("softmax_backward multiplied out, w_j · d_w_j - w_j · average",
     ("[w_j * (d_w_j - average) for", "[w_j * d_w_j - w_j * average for"), EXACT_SUMS,
     "softmax_backward: a sum is not rounded once (use math.fsum), as sum() and math.sumprod "
     "are not, or a step is done otherwise than the lesson's formula (or with an ε other "
     "than model.EPS), which the lab holds to the last bit (w · d_w - "
     "w · average, or the full Jacobian's"),
    ("attention_backward adding d_x's three parts with +",
     ('d_x = add(matmul(d_q, transpose(p["Wq"])), matmul(d_k, transpose(p["Wk"])),\n'
      '              matmul(d_v, transpose(p["Wv"])))',
      'd_x = [[a + b + c for a, b, c in zip(*rows)] for rows in zip(\n'
      '        matmul(d_q, transpose(p["Wq"])), matmul(d_k, transpose(p["Wk"])),\n'
      '        matmul(d_v, transpose(p["Wv"])))]'),
     EXACT_SUMS, "attention_backward: a sum is not rounded once (use math.fsum)"),
    ("backward gating the cache's pre in place",
     ("    d_pre = [[d_j if z > 0.0", "    for row in cache['pre']:\n"
      "        row[:] = [max(0.0, z) for z in row]\n    d_pre = [[d_j if z > 0.0"), OWN,
     "backward changed the cache's pre in place"),
    ("backward's tok_emb gradient one list V times",
     ('grads["tok_emb"] = [[0.0] * len(row) for row in p["tok_emb"]]',
      'grads["tok_emb"] = [[0.0] * len(p["tok_emb"][0])] * len(p["tok_emb"])'), OWN,
     "backward: a gradient row is a tuple, another's list")]


def edits_of(edit):
    return edit if isinstance(edit, list) else [edit]


class LearnerMistakes(unittest.TestCase):

    @classmethod
    def setUpClass(cls):    # a mistake planted on top of one already in model.py says nothing
        if diagnosis.first_wrong(model):
            raise unittest.SkipTest("model.py fails a lesson function's check (test_math "
                                    "says which), so no mistake is planted on it")
        for verdict, what, edit in MISTAKES:    # a function rewritten: said once, by its name
            function = verdict.split()[0].rstrip(":")
            if any(SOURCE.count(old) != 1 for old, _ in edits_of(edit)):
                raise AssertionError(f"{function} is not the lab's own, so its mistakes cannot "
                                     f"be planted on it ({what}): tools/exercise.py keeps the "
                                     f"lab's model.py for these tests when it blanks a function "
                                     f"(a maintainer who changed it updates its MISTAKES rows)")

    def test_the_diagnosis_names_each_mistake_s_function_and_step(self):
        for verdict, what, edit in MISTAKES:
            with self.subTest(verdict=verdict, mistake=what):
                found = diagnosis.first_wrong(planted(*edits_of(edit)))
                self.assertTrue(found and found.startswith(verdict), found)

    def test_the_twelve_s_first_failure_names_the_function(self):
        """The first mistake of each lesson function, the twelve run in order: the first line
        of the first failure starts with the function and step, and at most four fail."""
        first = {}
        for verdict, what, edit in MISTAKES:
            first.setdefault(verdict.split()[0], (verdict, what, edit))
        for verdict, what, edit in [first[function] for function in diagnosis.LESSON]:
            with self.subTest(verdict=verdict, mistake=what):
                result = run_with(planted(*edits_of(edit)), TWELVE)
                self.assertTrue(first_line(result).startswith(verdict), first_line(result))
                self.assertLessEqual(len(result.failures + result.errors), 4)

    def test_each_of_the_twelve_fails_on_a_mistake_in_what_it_names(self):
        """Each run alone (so that nothing it rests on skips it); 2 and 4 on subtle ones: a
        masked score weighed puts a gradient 4e-7 off, ε outside the root 4e-5."""
        edits = {what: edit for _, what, edit in MISTAKES}
        for number, mistake in EACH_FAILS.items():
            with self.subTest(test=number):
                edit = edits_of(edits[mistake]) if isinstance(mistake, str) else [mistake]
                result = run_with(planted(*edit), [TWELVE[number - 1]])
                self.assertEqual(len(result.failures + result.errors), 1, mistake)

    def test_one_slip_met_by_three_tests_fails_one_however_its_message_is_worded(self):
        one_row = planted(("        d_logits.append(d_row)\n", "        d_logits = d_row\n"))
        self.assertEqual(counted(one_row, TWELVE), (1, 2))      # the shapes in it differ

    def test_a_sum_not_rounded_once_that_moves_the_trace_is_named_with_math_fsum(self):
        """The mix added left to right: test 1's figures move (by 4e-17, the order gap), though
        no function is off its checks beyond the last bit: its first line names the function."""
        left_to_right = ("    mixed = []\n    for w_row in weights:\n"
                         "        acc = [0.0] * len(v[0])\n        for w, v_row in zip(w_row, v):\n"
                         "            acc = [a + w * v_c for a, v_c in zip(acc, v_row)]\n"
                         "        mixed.append(acc)\n")
        result = run_with(planted(("    mixed = matmul(weights, v)", left_to_right)), TWELVE)
        message = first_line(result)
        self.assertTrue(message.startswith("attention_forward: mixed["), message)
        self.assertIn("math.fsum", message)

    def test_an_error_is_given_with_the_line_of_model_py_that_raised_it(self):
        """The lesson function's line that called a helper which raised (not the helper's), or
        a line of a def within the function, and the step of the function's own line ("# 2."
        or "# 2 and 1."): for a def, the step that called it, wherever it stands."""
        step_1 = "        # 1. centre\n        mean = fsum(row) / d\n        centred = "
        old = step_1 + "[x_j - mean for x_j in row]"
        shifted = ("        def shifted():     # above step 1's comment, called under it\n"
                   "            return [row[j] - mean for j in range(d + 1)]\n")
        for new, raising in ((step_1 + "matmul([row], [[1.0]])", "centred = matmul"),
                             (shifted + step_1 + "shifted()", "return [row[j]")):
            with self.subTest(raising=raising):
                source = SOURCE.replace(old, new)
                line = source[:source.index(raising)].count("\n") + 1
                try:
                    planted((old, new)).layernorm_forward(*diagnosis.case("layer norm")[:3])
                except (ValueError, IndexError) as error:
                    said = diagnosis.raised(error)
                self.assertIn(f"(model.py line {line}, in layernorm_forward step 1)", said)
        found = diagnosis.first_wrong(planted(("fsum(d_xhat) / d", "fsum(d_xhat) / d_xhat[99]")))
        self.assertIn("in layernorm_backward step 2)", found)      # under "# 2 and 1."

    def test_caches_without_the_entries_only_the_diagnosis_reads_pass(self):
        module = planted(('"x1": x1, ', ""), ('"x2": x2, ', ""), ('"scores": scores, ', ""))
        self.assertIsNone(diagnosis.first_wrong(module))
        self.assertEqual(counted(module, TWELVE), (0, 0))

    def test_correct_variants_pass_the_diagnosis(self):
        """A mask of -1e9 (the cache's scores, which only the diagnosis reads, hold it for -inf);
        a relu of max(0, z), which gives int zeros, or z * (z > 0), which gives -0.0;
        softmax rows as tuples; d_logits as (softmax - one-hot) / T, with an attention_backward
        that uses linear_backward; backward's first linear step written out, which the
        exact-sum test cannot hand its traps, so it skips that part: there the diagnosis sees
        a token's rows added with += by their last bits, and a sum() in that step before
        Python 3.12 (from 3.12, sum() rounds these right); beside it a layernorm_backward that
        rounds otherwise, which the lab's backward on the same layers, from tools/exercise.py's
        kept model.py, tells from backward's own steps."""
        self.assertIsNone(diagnosis.first_wrong(planted((MASK, "if j <= i else -1e9"))))
        for relu in ("max(0, z)", "z * (z > 0)"):
            module = planted(("max(z, 0.0) for z in row] for row in pre]",
                              f"{relu} for z in row] for row in pre]"),
                             ("weights.append([e_j / total for e_j in e])",
                              "weights.append(tuple(e_j / total for e_j in e))"))
            self.assertIsNone(diagnosis.first_wrong(module))
        one_hot = ("d_row = [e_j / (total * T) for e_j in e]            # softmax / T\n"
                   "        d_row[target] -= 1.0 / T  ")
        d_mixed = ("d_Wo = matmul(transpose(mixed), d_out)                      # (d, d)\n"
                   "    d_mixed = matmul(d_out, transpose(p[\"Wo\"]))")
        self.assertIsNone(diagnosis.first_wrong(planted(
            (one_hot, "d_row = [(e_j / total - (j == target)) / T for j, e_j in enumerate(e)]"),
            (d_mixed, 'd_mixed, d_Wo, _ = linear_backward(d_out, mixed, p["Wo"])'))))
        step_4 = 'd_hf, grads["W_out"], grads["b_out"] = linear_backward(d_logits, '
        written_out = ('d_hf, grads["W_out"], grads["b_out"] = (lambda d_y, x, W: ('
                       'matmul(d_y, transpose(W)), matmul(transpose(x), d_y), '
                       'column_sums(d_y)))(d_logits, ')
        self.assertEqual(counted(planted((step_4, written_out)), EXACT_SUMS), (0, 1))
        one_by_one = ("rows = [d_row for i, d_row in zip(cache[\"ids\"], d_x0) if i == token]\n"
                      "        grads[\"tok_emb\"][token] = column_sums(rows)")
        found = diagnosis.first_wrong(planted((step_4, written_out), (one_by_one, (
            "for t in [t for t, i in enumerate(cache['ids']) if i == token]:\n"
            "            for j, d in enumerate(d_x0[t]):\n"
            "                grads['tok_emb'][token][j] += d"))))
        self.assertTrue(found.startswith("backward: tok_emb[") and "math.fsum" in found, found)
        ln_times_inverse = (LN_TERMS + " / s", LN_TERMS + " * (1 / s)")      # passes its own
        with tempfile.TemporaryDirectory() as tmp, \
                mock.patch.object(diagnosis, "KEPT", Path(tmp, "model.py")):
            diagnosis.KEPT.write_text(SOURCE, "utf-8")      # its bits, the lab's backward's
            module = planted(ln_times_inverse, (step_4, written_out))
            self.assertIsNone(diagnosis.first_wrong(module))    # without it, backward blamed
        plain_sum = "[[sum(map(mul, r, c)) for c in zip(*d_y)] for r in transpose(x)]"
        if sys.version_info < (3, 12):      # from 3.12, sum() rounds these as fsum does
            found = diagnosis.first_wrong(planted(
                (step_4, written_out.replace("matmul(transpose(x), d_y)", plain_sum))))
            named = found and found.startswith("backward: W_out[") and "math.fsum" in found
            self.assertTrue(named, found)

    def test_each_function_blanked_and_put_back_with_tools_exercise_py(self):
        """In a scratch folder, tools/exercise.py blanks each lesson function in turn: the
        twelve's first failure names it and it alone fails, trace_block.py says in one line
        that it is to write; --restore NAME puts it back; a second --keep, a break-it not put
        back, is refused, and so is blanking a function written since, keeping a stub as the
        original, or a def renamed; the listing tells blank from written; --restore asks before
        it puts an original over a function written since, or over an edit elsewhere (but NAME
        in a model.py that does not parse is refused unasked), then model.py is back byte for
        byte; after --restore NAME, a def written beside the function is said to differ still."""
        exercise = tool_module("exercise")
        with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
            model_py = Path(tmp, "model.py")
            kept = {"MODEL": str(model_py), "KEPT": f"{tmp}/.exercise/model.py",
                    "BLANKED": f"{tmp}/.exercise/blanked.txt"}
            with mock.patch.multiple(exercise, **kept):
                for name in exercise.FORMULAS:
                    with self.subTest(function=name):
                        model_py.write_text(SOURCE, "utf-8")    # whatever a failure left
                        self.assertEqual(exercise.blank(name), 0)
                        module = module_of(model_py.read_text("utf-8"))
                        result = run_with(module, TWELVE)
                        self.assertTrue(first_line(result).startswith(name), first_line(result))
                        self.assertEqual(len(result.failures + result.errors), 1)  # the rest skip
                        with mock.patch.object(trace_block, "model", module):
                            code, _, err = run_main(trace_block.main)   # one line, no traceback
                        self.assertTrue(code == 1 and err.startswith(f"{name} is yours"), err)
                        self.assertEqual(exercise.restore(name), 0)
                        self.assertEqual(model_py.read_text("utf-8"), SOURCE)
                        self.assertFalse(Path(tmp, ".exercise").exists())   # nothing stale
                exercise.keep()         # before a break-it; then a second --keep, not restored
                model_py.write_text(SOURCE.replace("if use_positions:", "if False:"), "utf-8")
                self.assertEqual(run_main(exercise.main, "--keep")[0], 1)
                self.assertEqual(Path(kept["KEPT"]).read_text("utf-8"), SOURCE)
                exercise.restore(None)
                exercise.blank("softmax")
                exercise.blank("forward")
                written = model_py.read_text("utf-8").replace(
                    'raise NotImplementedError(\n        "softmax is',
                    'return scores or (\n        "softmax is')
                model_py.write_text(written, "utf-8")
                listing = run_main(exercise.main)[1].splitlines()[1:]
                states = {line.split()[0]: " ".join(line.split()[1:]) for line in listing}
                self.assertEqual((states["forward"], states["softmax"], states["backward"]),
                                 ("blank", "written since it was blanked", ""))
                self.assertEqual(run_main(exercise.main, "softmax")[0], 1)   # not over it
                self.assertEqual(model_py.read_text("utf-8"), written)
                for answer in ("n", "", EOFError()):      # no, Enter, no one to answer
                    self.assertEqual(exercise.restore(None, ask=answering(answer)), 1)
                    self.assertEqual(model_py.read_text("utf-8"), written)
                model_py.write_text(written + "def (\n", "utf-8")   # no parse: no question
                with self.assertRaises(SyntaxError):
                    exercise.restore("softmax", ask=answering(AssertionError("asked")))
                self.assertEqual(exercise.restore(None, ask=lambda question: "y"), 0)
                self.assertEqual(model_py.read_text("utf-8"), SOURCE)
                exercise.blank("softmax")           # then a change elsewhere: asked about too
                edited = "# a note of mine\n" + model_py.read_text("utf-8")
                model_py.write_text(edited, "utf-8")
                self.assertEqual(exercise.restore(None, ask=answering("n")), 1)
                self.assertEqual(model_py.read_text("utf-8"), edited)
                self.assertEqual(exercise.restore(None, ask=answering("y")), 0)
                exercise.blank("softmax")           # written again, with a def beside it
                beside = SOURCE.replace("def softmax(", "def top(row):\n    return max(row)"
                                                        "\n\n\ndef softmax(")
                model_py.write_text(beside, "utf-8")
                self.assertIn("still differs", run_main(exercise.main, "--restore", "softmax")[1])
                self.assertEqual(exercise.restore(None), 0)
                exercise.blank("softmax")
                model_py.unlink()                   # deleted: put back, unasked
                self.assertEqual(exercise.restore(None, ask=answering(AssertionError())), 0)
                self.assertEqual(model_py.read_text("utf-8"), SOURCE)
                exercise.blank("softmax")
                shutil.rmtree(Path(tmp, ".exercise"))       # lost: a stub is no original
                self.assertEqual(run_main(exercise.main, "forward")[0], 1)
                self.assertFalse(Path(tmp, ".exercise").exists())
                model_py.write_text(SOURCE.replace("def softmax(", "def my_softmax("), "utf-8")
                code, _, err = run_main(exercise.main, "softmax")    # its def renamed
                self.assertTrue(code == 1 and err.startswith("model.py has no def softmax"), err)
                self.assertFalse(Path(tmp, ".exercise").exists())   # nothing kept of it
                self.assertIn("nothing to put back", run_main(exercise.main, "--restore")[2])

    def test_with_several_blank_a_mistake_comes_first_then_the_first_blank(self):
        """Blanks in the lesson's order, however the checks run (forwards first); but a
        mistake in a function written meanwhile is named before any blank."""
        exercise, source = tool_module("exercise"), SOURCE
        for name in ("softmax", "layernorm_backward", "backward"):
            blank = exercise.stub(*exercise.functions(source)[name])
            source = exercise.replaced(source, name, blank)
        found = diagnosis.first_wrong(module_of(source))
        self.assertTrue(found.startswith("layernorm_backward raised NotImplementedError"), found)
        found = diagnosis.first_wrong(module_of(source.replace("/ (total * T)", "/ total")))
        self.assertTrue(found.startswith("loss_and_dlogits: d_logits"), found)

    def test_tools_exercise_py_lists_the_functions_and_refuses_another_name_in_one_line(self):
        exercise = tool_module("exercise")
        self.assertEqual(list(exercise.FORMULAS), diagnosis.LESSON)
        code, out, _ = run_main(exercise.main)
        self.assertEqual(code, 0)
        self.assertEqual([line.split()[0] for line in out.splitlines()[1:]],
                         list(exercise.FORMULAS))
        for args in (["layernorm"], ["--restore", "layernorm"]):
            code, out, err = run_main(exercise.main, *args)
            self.assertEqual((code, out, len(err.splitlines())), (1, "", 1))
            self.assertIn("'layernorm' is not a lesson function; these are: layernorm_forward", err)
        for args in (["--keep", "softmax"], ["--keep", "--restore"]):     # which is meant?
            self.assertEqual(run_main(exercise.main, *args)[0], 2)

    def test_the_lab_s_own_tests_catch_what_the_lesson_does_not_claim(self):
        for what, edit, tests, said in CAUGHT_BY_THE_LAB:
            with self.subTest(mistake=what):
                message = first_line(run_with(planted(edit), tests))
                self.assertTrue(message.startswith(said), message)

    def test_every_sum_not_rounded_once_is_named_with_its_function_and_math_fsum(self):
        """Each math.fsum of model.py replaced, one at a time, by a sum added left to right
        and, from Python 3.12, by the built-in sum() (compensated): the exact-sum test fails,
        its first line naming the function that holds the sum, and math.fsum; the diagnosis
        names that lesson function or none (its reference inputs hold traps). One sum, the
        loss's top + log(total) - target, rounds as fsum does under 3.12's sum() on every input
        we could build, so there sum() is not planted."""
        loss_terms = SOURCE.find("fsum((top, log(total), -row[target]))")
        calls = fsum_calls()
        self.assertGreaterEqual(len(calls), 12)
        for at, function in calls:
            for summing in (sum_left_to_right, sum):
                if summing is sum and (at == loss_terms or sys.version_info < (3, 12)):
                    continue
                with self.subTest(function=function, sum=summing.__name__):
                    module = module_of(SOURCE[:at] + "planted_sum" + SOURCE[at + len("fsum"):])
                    module.planted_sum = summing     # a name the copy's edited function reads
                    message = first_line(run_with(module, EXACT_SUMS))
                    self.assertTrue(message.startswith(f"{function}: a sum is not rounded "
                                                       f"once (use math.fsum)"), message)
                    if function in diagnosis.LESSON:    # the diagnosis: it, or none
                        found = diagnosis.first_wrong(module)
                        self.assertTrue(found is None or found.startswith(function), found)


def answering(answer):
    """An input() that gives answer, or raises it (EOFError: no one to answer)."""
    def ask(question):
        if isinstance(answer, BaseException):
            raise answer
        return answer
    return ask


def fsum_calls():
    """(offset, function) of each call of math.fsum in model.py, before its input checks."""
    end = SOURCE.index("################ Input checks")
    calls = []      # model.py's comments write "fsum" with no "(" after it
    for match in re.finditer(r"\bfsum\(", SOURCE[:end]):
        function = re.findall(r"^def (\w+)", SOURCE[:match.start()], re.M)[-1]   # the def above
        calls.append((match.start(), function))
    return calls


def sum_left_to_right(terms):
    """The sum of terms, each added to the running total in turn (sum() before Python 3.12)."""
    return reduce(add, terms, 0.0)
