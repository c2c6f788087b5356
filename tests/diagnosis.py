"""Which lesson function is wrong: each one checked on its own, forwards before backwards.

test_model.py puts first_wrong()'s line first when test 1, 2 or 4 fails. Each forward is held
to what the lesson says it computes, then to its reference outputs (reference.json, recorded
from model.py by tools/record_reference.py; a relative 1e-9 allows for another platform's
exp and log); each backward to central differences of its own forward. The inputs are small,
random and seeded, with gains and biases away from 1 and 0 and attention far from uniform,
so that no mistake hides behind a 1, a 0 or an even share.
"""
import json
import math
import random
from pathlib import Path

import model
import trace_block
from test_model import REPEATED, tiny

REFERENCE = Path(__file__).with_name("reference.json")
TOLERANCE = 1e-6    # |backward - central difference|, relative to max(1, |central difference|)


################ The inputs

def matrix(rng, rows, cols, scale=1.0):
    return [[rng.gauss(0.0, scale) for _ in range(cols)] for _ in range(rows)]


def layer_norm_case():
    """x, g, b and dy for layer norm: rows of 5, variance about 4."""
    rng = random.Random(1)
    x = matrix(rng, 3, 5, scale=2.0)
    g = [rng.uniform(0.5, 1.5) for _ in range(5)]
    b = [rng.gauss(0.0, 0.5) for _ in range(5)]
    return x, g, b, matrix(rng, 3, 5)


def softmax_case():
    """Scores under a causal mask (-inf above the diagonal), and d_weights."""
    rng = random.Random(2)
    scores = matrix(rng, 4, 4, scale=2.0)
    for i, row in enumerate(scores):
        row[i + 1:] = [-math.inf] * (3 - i)
    return scores, matrix(rng, 4, 4)


def attention_case():
    """Weights Wq, Wk, Wv, Wo (d = 4), x of 5 positions, and d_out."""
    rng = random.Random(3)
    p = {name: matrix(rng, 4, 4, scale=0.8) for name in ("Wq", "Wk", "Wv", "Wo")}
    return p, matrix(rng, 5, 4), matrix(rng, 5, 4)


def loss_case():
    rng = random.Random(6)
    return matrix(rng, 3, 6, scale=2.0), [2, 5, 2]


def outputs(module, name):
    """What module's function computes on its inputs: the numbers reference.json records."""
    if name == "init_params":
        return module.init_params(96, **trace_block.TINY)
    if name == "layernorm_forward":
        x, g, b, _ = layer_norm_case()
        return {"y": module.layernorm_forward(x, g, b)[0]}
    if name == "softmax":
        return {"weights": module.softmax(softmax_case()[0])}
    if name == "attention_forward":
        p, x, _ = attention_case()
        out, cache = module.attention_forward(p, x)
        return {**{key: cache.get(key) for key in ATTENTION_STEPS}, "out": out}
    if name == "forward":
        logits, cache = module.forward(tiny(module), REPEATED[:-1])
        without, _ = module.forward(tiny(module), REPEATED[:-1], use_positions=False)
        steps = {key: cache.get(key) for key in FORWARD_STEPS if key != "without"}
        return {**steps, "logits": logits, "without": without}
    logits, targets = loss_case()
    return {"loss": module.loss_and_dlogits(logits, targets)[0]}


################ Comparing

def differs(now, then, where):
    """Where now first differs from then beyond a relative 1e-9, in words, or None."""
    if isinstance(then, list):
        if not isinstance(now, (list, tuple)) or len(now) != len(then):
            return f"{where} is {now!r:.50}, but the reference holds {len(then)} entries"
        for n, (u, v) in enumerate(zip(now, then)):
            found = differs(u, v, f"{where}[{n}]")
            if found:
                return found
        return None
    if not isinstance(now, (int, float)):
        return f"{where} is {now!r:.50}, the reference {then!r}"
    if now == then or math.isclose(now, then, rel_tol=1e-9, abs_tol=1e-12):
        return None
    return f"{where} is {now:.6g}, the reference {then:.6g}"


def off_slope(analytic, numeric, where, of):
    """Where a gradient first disagrees with central differences of `of`, in words, or None."""
    if isinstance(numeric, list):
        if not isinstance(analytic, (list, tuple)) or len(analytic) != len(numeric):
            return f"{where} is {analytic!r:.50}, not {len(numeric)} entries"
        for n, (a, s) in enumerate(zip(analytic, numeric)):
            found = off_slope(a, s, f"{where}[{n}]", of)
            if found:
                return found
        return None
    if abs(analytic - numeric) <= TOLERANCE * max(1.0, abs(numeric)):
        return None
    return f"{where} is {analytic:.6g}, central differences of {of} give {numeric:.6g}"


def total(y, weights):
    """Σ y · weights over every entry: a number whose slopes a backward gives."""
    return math.fsum(u * w for y_row, w_row in zip(y, weights) for u, w in zip(y_row, w_row))


def first_off(who, f, of, pairs):
    """"who: ..." where the first of pairs (where, gradient, tensor) is off the central
    differences of f(), a number computed from the tensors (of: what computes it), or None."""
    for where, gradient, tensor in pairs:
        found = off_slope(gradient, trace_block.central_differences(f, tensor), where, of)
        if found:
            return f"{who}: {found}"
    return None


################ The forwards, against the lesson and the reference

FORWARD_STEPS = {   # forward's cache entries in the order it makes them, and the step
    "x0": "forward step 1: the embeddings, x0 = tok_emb[ids] + pos_emb[0:T]",
    "h1": "forward step 2: LN1's input or parameters (h1 = LN1(x0))",
    "x1": "forward step 2: attention's call or the skip path (x1 = x0 + a)",
    "h2": "forward step 3: LN2's input or parameters (h2 = LN2(x1))",
    "pre": "forward step 3: pre = linear(h2, W1, b1)",
    "act": "forward step 3: the relu, act = max(0, pre)",
    "x2": "forward step 3: the MLP's second layer or the skip path (x2 = x1 + m)",
    "hf": "forward step 4: LNF's input or parameters (hf = LNF(x2))",
    "logits": "forward step 4: the output scores, linear(hf, W_out, b_out)",
    "without": "forward step 1, with use_positions=False: no position embeddings"}
ATTENTION_STEPS = {"q": "step 1", "k": "step 1", "v": "step 1", "scores": "step 2",
                   "weights": "step 3", "mixed": "step 4", "out": "step 5"}


def against_reference(module, name):
    """The first output of name that moved from reference.json, with the step that made it."""
    recorded = json.loads(REFERENCE.read_text(encoding="utf-8"))[name]
    found = outputs(module, name)
    for key, then in recorded.items():
        moved = differs(found.get(key), then, key)
        if not moved:
            continue
        if name == "forward":
            return f"{FORWARD_STEPS[key]}: {moved}"
        if name == "attention_forward":
            return f"attention_forward {ATTENTION_STEPS[key]}: {moved}"
        if name == "init_params":
            return (f"init_params draws other numbers ({moved}): one random.Random(seed) "
                    f"draws gauss(0.0, 0.02) for each matrix in turn, row by row")
        return f"{name}: {moved}"
    return None


def check_layernorm_forward(module):
    x, g, b, _ = layer_norm_case()
    y, _ = module.layernorm_forward(x, g, b)
    if x != layer_norm_case()[0]:
        return "layernorm_forward changed its input x in place: make new lists"
    for t, row in enumerate(y):
        z = [(y_j - b_j) / g_j for y_j, g_j, b_j in zip(row, g, b)]
        mean = math.fsum(z) / len(z)
        variance = math.fsum((v - mean) ** 2 for v in z) / len(z)
        if abs(mean) > 1e-9 or abs(variance - 1) > 1e-4:
            return (f"layernorm_forward: row {t} of (y - b) / g has mean {mean:.4g} and "
                    f"variance {variance:.4g}, not 0 and about 1: centre, divide by "
                    f"√(variance over d + EPS), then the gain, then the bias")
    return against_reference(module, "layernorm_forward")


def check_softmax(module):
    scores, _ = softmax_case()
    for i, row in enumerate(module.softmax(scores)):
        if abs(math.fsum(row) - 1) > 1e-12 or min(row) < 0:
            return f"softmax: row {i} is {row}: weights are at least 0 and sum to 1"
        if any(w != 0.0 for w, z in zip(row, scores[i]) if z == -math.inf):
            return f"softmax: row {i} is {row}: a score of -inf must weigh exactly 0"
    return against_reference(module, "softmax")


def check_attention_forward(module):
    p, x, _ = attention_case()
    moved = [x[:-1] + [[v + 1.0 for v in x[-1]]]]          # only the last position changes
    out, later = module.attention_forward(p, x)[0], module.attention_forward(p, moved[0])[0]
    seen = [t for t in range(len(x) - 1) if out[t] != later[t]]
    if seen:
        return (f"attention_forward step 2: out[{seen[0]}] changed when only the last "
                f"position's x did: the causal mask lets a position see a later one")
    return against_reference(module, "attention_forward")


def check_loss_and_dlogits(module):
    logits, targets = loss_case()
    moved = against_reference(module, "loss_and_dlogits")
    if moved:
        return moved
    _, d_logits = module.loss_and_dlogits(logits, targets)

    def loss():
        return module.loss_and_dlogits(logits, targets)[0]
    return first_off("loss_and_dlogits", loss, "its loss", [("d_logits", d_logits, logits)])


################ The backwards, against central differences of their forwards

def check_layernorm_backward(module):
    x, g, b, dy = layer_norm_case()
    d_x, d_g, d_b = module.layernorm_backward(dy, g, module.layernorm_forward(x, g, b)[1])
    if dy != layer_norm_case()[3]:
        return "layernorm_backward changed its input dy in place: make new lists"

    def f():
        return total(module.layernorm_forward(x, g, b)[0], dy)
    return first_off("layernorm_backward", f, "layernorm_forward",
                     [("d_x", d_x, x), ("d_g", d_g, g), ("d_b", d_b, b)])


def check_softmax_backward(module):
    scores, d_weights = softmax_case()
    d_scores = module.softmax_backward(module.softmax(scores), d_weights)

    def f():
        return total(module.softmax(scores), d_weights)
    return first_off("softmax_backward", f, "softmax", [("d_scores", d_scores, scores)])


def check_attention_backward(module):
    p, x, d_out = attention_case()
    grads, d_x = module.attention_backward(p, module.attention_forward(p, x)[1], d_out)

    def f():
        return total(module.attention_forward(p, x)[0], d_out)
    steps = [("step 5", "Wo", p["Wo"]), ("step 4", "Wv", p["Wv"]), ("steps 3 and 2", "Wq", p["Wq"]),
             ("steps 3 and 2", "Wk", p["Wk"]), ("step 1", "x", x)]
    for step, name, tensor in steps:
        gradient = d_x if name == "x" else grads.get(name)
        off = first_off(f"attention_backward {step}", f, "attention_forward",
                        [(f"d_{name}", gradient, tensor)])
        if off:
            return off
    return None


def check_linear_backward(module):
    rng = random.Random(7)
    x, W, d_y = matrix(rng, 3, 4), matrix(rng, 4, 2), matrix(rng, 3, 2)
    b = [0.5, -0.25]
    d_x, d_W, d_b = module.linear_backward(d_y, x, W)

    def f():
        return total(module.linear(x, W, b), d_y)
    return first_off("linear_backward", f, "linear",
                     [("d_x", d_x, x), ("d_W", d_W, W), ("d_b", d_b, b)])


BACKWARD_STEPS = {   # each gradient in the order backward makes it, and the step
    "W_out": "backward step 4: the output scores' linear_backward",
    "b_out": "backward step 4: the output scores' linear_backward",
    "lnf_g": "backward step 4: LNF's layernorm_backward (its gain or cache)",
    "lnf_b": "backward step 4: LNF's layernorm_backward (its gain or cache)",
    "W2": "backward step 3: the MLP's second layer, from d_m = d_x2",
    "b2": "backward step 3: the MLP's second layer, from d_m = d_x2",
    "W1": "backward step 3: the relu's gate (d_pre, where pre > 0), or the first layer",
    "b1": "backward step 3: the relu's gate (d_pre, where pre > 0), or the first layer",
    "ln2_g": "backward step 3: LN2's layernorm_backward (its gain or cache)",
    "ln2_b": "backward step 3: LN2's layernorm_backward (its gain or cache)",
    "Wo": "backward step 3's skip path, d_x1 = d_x2 + LN2's d_x (attention gets d_x1)",
    "Wv": "backward step 2: attention_backward's call",
    "Wq": "backward step 2: attention_backward's call",
    "Wk": "backward step 2: attention_backward's call",
    "ln1_g": "backward step 2: LN1's layernorm_backward (its gain or cache)",
    "ln1_b": "backward step 2: LN1's layernorm_backward (its gain or cache)",
    "pos_emb": "backward step 1: pos_emb's gradient, a row per position of d_x0",
    "tok_emb": "backward step 1: tok_emb's gradient, a token's rows of d_x0 summed"}


def off_along(f, gradient, tensor, rng):
    """Whether gradient is off f's slope along a random direction through tensor (nudged in
    place and put back): a quick look, before a check entry by entry names the entry."""
    rows = tensor if isinstance(tensor[0], list) else [tensor]
    base = [list(row) for row in rows]
    u = [[rng.gauss(0.0, 1.0) for _ in row] for row in rows]
    s = [0.0]

    def along():
        for row, base_row, u_row in zip(rows, base, u):
            row[:] = [b + s[0] * e for b, e in zip(base_row, u_row)]
        return f()
    slope = trace_block.central_differences(along, s)[0]
    for row, base_row in zip(rows, base):
        row[:] = base_row
    try:
        pairs = zip(trace_block.flatten(gradient), trace_block.flatten(u), strict=True)
        analytic = math.fsum(g * e for g, e in pairs)
    except (TypeError, ValueError):         # no gradient, or one of another size
        return True
    return abs(analytic - slope) > TOLERANCE * max(1.0, abs(slope))


def check_backward(module):
    """The small copy's gradients in backward order, each against the loss's slope along a
    random direction, the first off then entry by entry; where both embeddings' are off,
    step 2's skip path is."""
    p, x, y = tiny(module), REPEATED[:-1], REPEATED[1:]
    logits, cache = module.forward(p, x, use_positions=False)
    without = module.backward(p, cache, module.loss_and_dlogits(logits, y)[1])
    if any(map(any, without["pos_emb"])):
        return "backward step 1: pos_emb gets a gradient, but use_positions=False left it out"
    logits, cache = module.forward(p, x)
    grads = module.backward(p, cache, module.loss_and_dlogits(logits, y)[1])

    def loss():
        return module.sequence_loss(p, x, y)
    rng = random.Random(1)
    for name, step in BACKWARD_STEPS.items():
        if not off_along(loss, grads.get(name), p[name], rng):
            continue
        if name == "pos_emb" and off_along(loss, grads["tok_emb"], p["tok_emb"], rng):
            step = "backward step 2's skip path, d_x0 = d_x1 + LN1's d_x"
        return first_off(step, loss, "the loss", [(name, grads.get(name), p[name])])
    return None


################ The verdict

CHECKS = {"init_params": lambda module: against_reference(module, "init_params"),
          "layernorm_forward": check_layernorm_forward, "softmax": check_softmax,
          "attention_forward": check_attention_forward,
          "forward": lambda module: against_reference(module, "forward"),
          "loss_and_dlogits": check_loss_and_dlogits,
          "layernorm_backward": check_layernorm_backward,
          "softmax_backward": check_softmax_backward,
          "attention_backward": check_attention_backward,
          "linear_backward": check_linear_backward, "backward": check_backward}


def first_wrong(module=model, names=tuple(CHECKS)):
    """The first of names whose check fails, in one line that starts with the function's
    name, or None. A function that raises on its good inputs fails, with its message."""
    for name in names:
        try:
            found = CHECKS[name](module)
        except Exception as error:          # the learner's code raised: that is the finding
            found = f"{name} raised {type(error).__name__}: {error}"
        if found:
            return found
    return None


def recorded(module=model):
    """reference.json's text: every forward's outputs, one per line."""
    names = ("init_params", "layernorm_forward", "softmax", "attention_forward", "forward",
             "loss_and_dlogits")
    lines = []
    for name in names:
        body = ",\n".join(f"  {json.dumps(key)}: {json.dumps(value)}"
                          for key, value in outputs(module, name).items())
        lines.append(f" {json.dumps(name)}: {{\n{body}\n }}")
    return "{\n" + ",\n".join(lines) + "\n}\n"
