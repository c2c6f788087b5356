"""Which lesson function is wrong: each one checked on its own, forwards before backwards.

test_model.py puts first_wrong()'s line first when a test fails on the model's math, or the
model raises. Each forward is held to what the lesson says it computes, then to its outputs in
reference.json (written from model.py by tools/record_reference.py; a relative 1e-9 allows
for another platform's exp and log); each backward to central differences of its own forward
(reference.json's last bits name a sum not rounded once, once every check passes).
The inputs are small, random and seeded, gains and biases away from 1 and 0 and attention far
from even, so that no mistake hides behind a 1, a 0 or an even share.
"""
import json
import linecache
import math
import operator
import random
import re
import sys
import traceback
from pathlib import Path
from unittest import mock

import bpe
import model
import trace_block
from tests import LAB

REFERENCE = Path(__file__).with_name("reference.json")
KEPT = LAB / ".exercise" / "model.py"      # the lab's model.py, kept by tools/exercise.py
TOLERANCE = 1e-7    # |backward - central difference|, relative to max(1, |central difference|)
REPEATED = [7, 89, 46, 7, 85, 30, 89, 53, 4]    # token IDs; 7 and 89 repeat
BACKWARD_IDS = [46, 7, 89, 7, 85, 7, 30, 53]    # x, y for backward: 7 thrice, not at an end
# exp(-X1) lies just below 2**-53 and exp(-X2) just above what it lacks: [1, exp(-X1),
# exp(-X2)], a softmax's terms before dividing, make a trap like [1, 2**-53, 2**-106].
X1 = 53 * math.log(2) + 1e-10
X2 = -math.log((2.0 ** -53 - math.exp(-X1)) * (1 + 5e-7))


################ The inputs and the outputs

def tiny(module=None):
    """The small copy (1,060 numbers) of module (model.py by default), fresh, its gains and
    biases away from 1 and 0, and Wq and Wk 50 times larger: attention far from even."""
    p = (module or model).init_params(96, **trace_block.TINY)
    rng = random.Random(4)
    for name in ("ln1_g", "ln1_b", "b1", "ln2_g", "ln2_b", "b2", "lnf_g", "lnf_b", "b_out"):
        if name.endswith("_g"):
            p[name] = [rng.uniform(0.5, 1.5) for _ in p[name]]
        else:
            p[name] = [rng.gauss(0.0, 0.1) for _ in p[name]]
    for name in ("Wq", "Wk"):
        p[name] = [[50.0 * w for w in row] for row in p[name]]
    return p


def case(name):
    """The seeded inputs a function is checked on: x and its partners, and random weights
    (dy, d_weights, d_out) for a number Σ output · weights whose slopes a backward gives."""
    rng = random.Random(name)

    def matrix(rows, cols, scale=1.0):
        return [[rng.gauss(0.0, scale) for _ in range(cols)] for _ in range(rows)]
    if name == "layer norm":
        g = [rng.uniform(0.5, 1.5) for _ in range(5)]
        x, b, dy = matrix(3, 5, scale=2.0), matrix(1, 5, scale=0.5)[0], matrix(6, 5)
        # and two rows whose mean, or variance, comes out otherwise unless rounded once, and
        # one far from 0 whose variance taken as mean(x²) - mean² loses its last digits
        x += [[1.0, 2.0 ** -54, 2.0 ** -54, 2.0 ** -106, 0.0], [0.1, 0.2, 0.3, 0.7, 1.1],
              [10.1, 10.2, 10.3, 10.7, 11.1]]
        return x, g, b, dy
    if name == "softmax":
        scores = [row[:i + 1] + [-math.inf] * (3 - i) for i, row in enumerate(matrix(4, 4, 2.0))]
        return scores + [[-X1, 0.0, -X2, -math.inf]], matrix(5, 4)    # its total: a trap
    if name == "attention":     # d = 6: at d = 4 (the small copy's), d ** 1/2 is √d
        p = {w: matrix(6, 6, scale=0.7) for w in ("Wq", "Wk", "Wv", "Wo")}
        return p, matrix(5, 6), matrix(5, 6)
    if name == "linear":
        return matrix(3, 4), matrix(4, 2), matrix(1, 2)[0], matrix(3, 2)
    logits = matrix(3, 6, scale=2.0)                        # the loss's logits and targets,
    logits[0][4] = logits[0][2]                             # one of them tied with row 0's
    return logits, [2, 5, 2]


def outputs(module, name):
    """What module's function computes on its inputs: the numbers reference.json records."""
    if name == "init_params":
        return module.init_params(96, **trace_block.TINY)
    if name == "layernorm_forward":
        x, g, b, _ = case("layer norm")
        y, cache = module.layernorm_forward(x, g, b)
        return {**kept(cache, STEPS[name]), "y": y}
    if name == "softmax":
        return {"weights": module.softmax(case("softmax")[0])}
    if name == "attention_forward":
        p, x, _ = case("attention")
        out, cache = module.attention_forward(p, x)
        return {**kept(cache, STEPS[name]), "out": out}
    if name == "forward":
        logits, cache = module.forward(tiny(module), REPEATED[:-1])
        without, _ = module.forward(tiny(module), REPEATED[:-1], use_positions=False)
        return {**kept(cache, FORWARD_STEPS), "logits": logits, "without": without}
    if name == "loss_and_dlogits":
        logits, targets = case("loss")
        return {"loss": module.loss_and_dlogits(logits, targets)[0]}
    return gradients(module)


def gradients(module, d_logits=None):
    """backward's gradients of the small copy, in the order made, and the d_logits it was
    given (by default the loss's). Central differences judge them; rounded_otherwise() reads
    their last bits."""
    p, x, y = tiny(module), BACKWARD_IDS[:-1], BACKWARD_IDS[1:]
    logits, cache = module.forward(p, x)
    if d_logits is None:
        d_logits = module.loss_and_dlogits(logits, y)[1]
    grads = module.backward(p, cache, d_logits)
    return {"d_logits": d_logits, **{n: grads[n] for names, _ in BACKWARD_STEPS
                                     for n in names.split()}}


# how often model.py's backward calls each layer's backward
LAYER_CALLS = {"linear_backward": 3, "layernorm_backward": 3, "attention_backward": 1}


def lab_backward(module):
    """The lab's own backward, from the model.py that tools/exercise.py keeps, calling module's
    layers: where module's backward makes its own steps, what they should give to the bit, its
    layers' last bits aside. None where nothing is kept."""
    if not KEPT.exists():
        return None
    lab = {}
    exec(compile(KEPT.read_text(encoding="utf-8"), str(KEPT), "exec"), lab)
    lab.update({name: getattr(module, name) for name in LAYER_CALLS})
    return lab["backward"]


def own_steps(module):
    """Whether module's backward itself calls the layers' backwards otherwise than LAYER_CALLS
    (calls made within them, by an attention_backward that uses linear_backward, not counted)."""
    calls = dict.fromkeys(LAYER_CALLS, 0)

    def counting(name, layer):
        def counted(*args, **kwargs):
            if sys._getframe(1).f_code is module.backward.__code__:
                calls[name] += 1
            return layer(*args, **kwargs)
        return counted
    with mock.patch.multiple(module, **{n: counting(n, getattr(module, n)) for n in calls}):
        gradients(module)
    return calls != LAYER_CALLS


def reference():
    """reference.json's outputs; a file that cannot be used is one line saying what to do."""
    try:
        return bpe.read_json(REFERENCE)
    except (OSError, bpe.FileProblem) as problem:
        raise bpe.FileProblem(f"tests/reference.json cannot be used ({problem}): take it from "
                              f"the lab's archive (or git checkout tests/reference.json)") from None


def kept(cache, keys):
    """The entries of cache named in keys that it holds (CACHES says which it must)."""
    return {key: cache[key] for key in keys if key in cache}


def recorded(module=model):
    """reference.json's text: every forward's outputs and backward's gradients, one per line."""
    parts = []
    for name in ("init_params", "layernorm_forward", "softmax", "attention_forward", "forward",
                 "loss_and_dlogits", "backward"):
        body = ",\n".join(f"  {json.dumps(key)}: {json.dumps(value)}"
                          for key, value in outputs(module, name).items())
        parts.append(f" {json.dumps(name)}: {{\n{body}\n }}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


################ Comparing

def apart(found, expected, where, close, said):
    """Where found first differs from expected (numbers, or lists of them) as close(found,
    expected) judges, in words: "{where} is {found}, {said} {expected}", or what found is
    instead of a number or a list of that length; or None."""
    if isinstance(expected, list):
        if not isinstance(found, (list, tuple)):
            said = repr(found) if len(repr(found)) <= 40 else f"a {type(found).__name__}"
            return f"{where} is {said}, not a list of {len(expected)}"
        if len(found) != len(expected):
            return f"{where} has {sized(found)}, not {sized(expected)}"
        for n, pair in enumerate(zip(found, expected)):
            message = apart(*pair, f"{where}[{n}]", close, said)
            if message:
                return message
        return None
    if not isinstance(found, (int, float)):
        return f"{where} is a {type(found).__name__}, not a number"
    if close(found, expected):
        return None
    found, expected = float(found), float(expected)     # 1.0 reads "1.0", not "1"
    if f"{found:.6}" == f"{expected:.6}":       # all the digits, to show them apart
        return f"{where} is {found!r}, {said} {expected!r}"
    return f"{where} is {found:.6}, {said} {expected:.6}"


def sized(items):
    """What a list holds, counted: "1 number", "4 rows"."""
    kind = "row" if items and isinstance(items[0], (list, tuple)) else "number"
    if len(items) != 1:
        kind += "s"
    return f"{len(items)} {kind}"


def near_reference(found, expected):
    return math.isclose(found, expected, rel_tol=1e-9, abs_tol=1e-12)


def near_slope(found, slope):
    return abs(found - slope) <= TOLERANCE * max(1.0, abs(slope))


def total(y, weights):
    """Σ y · weights over every entry."""
    return math.fsum(u * w for y_row, w_row in zip(y, weights) for u, w in zip(y_row, w_row))


def off_slopes(who, f, of, pairs):
    """"who: ..." where the first of pairs (where, gradient, tensor) is off the central
    differences of f() (a number computed from the tensors by `of`), or None."""
    for where, gradient, tensor in pairs:
        slopes = trace_block.central_differences(f, tensor)
        message = apart(gradient, slopes, where, near_slope, f"central differences of {of} give")
        if message:
            return f"{who}: {message}"
    return None


################ The forwards, against the lesson and the reference

FORWARD_STEPS = {   # what reference.json records of forward, in the order made, and the step
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
STEPS = {   # what reference.json records of layer norm and attention, and the step
    "layernorm_forward": {"std": "2 (std = √(variance + EPS))",
                          "xhat": "2 (xhat = (x - mean) / std)", "y": "3 (y = xhat · g + b)"},
    "attention_forward": {"q": "1 (q = x · Wq)", "k": "1 (k = x · Wk)", "v": "1 (v = x · Wv)",
                          "scores": "2 (scores = q · kᵀ / √d, -inf where j > i)",
                          "weights": "3 (weights = softmax(scores))",
                          "mixed": "4 (mixed = weights · v)", "out": "5 (out = mixed · Wo)"}}
OUTPUTS = ("y", "out", "logits", "without")     # what a forward returns; the rest: cached


def against_reference(module, name):
    """The first output of name that moved from reference.json, with the step that made it."""
    expected = reference()[name]
    found = outputs(module, name)
    returned = [key for key in OUTPUTS if key in expected]
    right = name in CACHES and not any(apart(found[k], expected[k], k, near_reference, "")
                                       for k in returned)
    for key in [key for key in expected if key in found]:   # a cache may lack what only this reads
        where = key
        if name in CACHES and key not in OUTPUTS:
            where = f"its cache's {key}"      # its step may be right and its cache wrong
        moved = apart(found[key], expected[key], where, near_reference, "the reference")
        if not moved:
            continue
        if right and not needed(name, key):
            continue        # a value only the diagnosis reads (-1e9 for -inf): no harm done
        if right and key not in OUTPUTS:        # every step right, but not kept so
            return f"{name}: {moved}; its outputs are right: does the cache keep another value?"
        if name == "forward":
            return f"{FORWARD_STEPS[key]}: {moved}"
        if name in STEPS:
            return f"{name} step {STEPS[name][key]}: {moved}"
        if name == "init_params":
            return (f"init_params draws other numbers ({moved}): one random.Random(seed) "
                    f"draws gauss(0.0, 0.02) for each matrix in turn, row by row")
        return f"{name}: {moved}"
    return None


SAME_DICT = ("it returns one dict on every call, kept from the last (a default argument such "
             "as cache={}?): make a new one in each call")
CACHES = {  # what each forward's cache must hold: what backward and the trace read
    "layernorm_forward": "xhat std",
    "attention_forward": "x q k v weights mixed",
    "forward": "ids use_positions x0 ln1 h1 att ln2 h2 pre act lnf hf"}


def needed(name, key):
    """Whether name's output key is one that a caller, backward or the trace reads."""
    return name not in CACHES or key in OUTPUTS or key in CACHES[name].split()


def lacking(name, cache):
    """"name: its cache holds no 'key' ..." for the first entry CACHES asks of it, or None."""
    if not isinstance(cache, dict):
        return f"{name}: its second output is a {type(cache).__name__}, not the cache (a dict)"
    missing = [key for key in CACHES[name].split() if key not in cache]
    if missing:
        return f"{name}: its cache holds no {missing[0]!r}, and backward or the trace reads it"
    return None


def check_layernorm_forward(module):
    x, g, b, _ = case("layer norm")
    y, cache = module.layernorm_forward(x, g, b)
    if x != case("layer norm")[0]:
        return "layernorm_forward changed its input x in place: make new lists"
    missing = lacking("layernorm_forward", cache)
    if missing:
        return missing
    if not apart(y, reference()["layernorm_forward"]["y"], "y", near_reference, ""):
        return against_reference(module, "layernorm_forward")     # y right: the cache?
    for t, (row, xhat_t) in enumerate(zip(y, cache["xhat"])):     # each step, in turn
        mean = math.fsum(xhat_t) / len(xhat_t)
        variance = math.fsum((v - mean) ** 2 for v in xhat_t) / len(xhat_t)
        if abs(mean) > 1e-9:
            return (f"layernorm_forward step 1: row {t} of xhat has mean {mean:.4g}, not 0: "
                    f"subtract the row's own mean, over its d values")
        if abs(variance - 1) > 1e-4:
            return (f"layernorm_forward step 2: row {t} of xhat has variance {variance:.4g}, "
                    f"not about 1: divide by √(variance + EPS), the variance of x - mean over d")
        moved = apart(row, [xh * g_j + b_j for xh, g_j, b_j in zip(xhat_t, g, b)], f"y[{t}]",
                      near_reference, "xhat · g + b gives")
        if moved:
            return f"layernorm_forward step 3: {moved}"
    return against_reference(module, "layernorm_forward")


def check_softmax(module):
    scores, _ = case("softmax")
    weights = module.softmax(scores)
    if scores != case("softmax")[0]:
        return "softmax changed its input scores in place: make new lists"
    for i, row in enumerate(weights):
        if abs(math.fsum(row) - 1) > 1e-12 or min(row) < 0:
            return f"softmax: weights are at least 0 and sum to 1, but row {i} is {row}"
        if any(w != 0.0 for w, z in zip(row, scores[i]) if z == -math.inf):
            return f"softmax: a score of -inf must weigh exactly 0, but row {i} is {row}"
        if module.softmax([scores[i]])[0] != row:
            return f"softmax: row {i} changes when it is alone: use its own maximum and total"
    return against_reference(module, "softmax")


def check_attention_forward(module):
    p, x, _ = case("attention")
    out, cache = module.attention_forward(p, x)
    missing = lacking("attention_forward", cache)
    if missing:
        return missing
    broken = [t for t, row in enumerate(out) if not all(map(math.isfinite, row))]
    if broken:      # nan is unequal to itself: it would read as a position seeing a later one
        return (f"attention_forward: out[{broken[0]}] holds inf or nan: a row of scores all "
                f"-inf weighs nothing (does the mask hide position i from itself?)")
    later, again = module.attention_forward(p, x[:-1] + [[v + 1.0 for v in x[-1]]])
    if again is cache:
        return f"attention_forward: {SAME_DICT}"
    seen = [t for t in range(len(x) - 1) if out[t] != later[t]]
    if seen:
        return (f"attention_forward: out[{seen[0]}] changed when only the last position's x "
                f"did: a position sees a later one (step 2, the mask, or step 4, the mix)")
    return against_reference(module, "attention_forward")


def check_forward(module):
    p, ids = tiny(module), REPEATED[:-1]
    _, cache = module.forward(p, ids)
    if module.forward(p, ids)[1] is cache:
        return f"forward: {SAME_DICT}"
    if p != tiny(module):
        return "forward changed the parameters in place (x0's rows are tok_emb's?): new lists"
    missing = lacking("forward", cache)
    if missing:
        return missing
    if cache["ids"] is ids:
        return ("forward: its cache's 'ids' is the caller's list, which the caller may change "
                "before backward reads it: keep a copy, list(ids)")
    for key in ("ln1", "att", "ln2", "lnf"):
        if not isinstance(cache[key], dict):
            return (f"forward: its cache's {key!r} is a {type(cache[key]).__name__}, not the "
                    f"cache of that layer norm or attention (a dict), which backward reads")
    return against_reference(module, "forward")


def check_loss_and_dlogits(module):
    logits, targets = case("loss")
    moved = against_reference(module, "loss_and_dlogits")
    if moved:
        return moved
    _, d_logits = module.loss_and_dlogits(logits, targets)
    if logits != case("loss")[0]:
        return "loss_and_dlogits changed its input logits in place: make new lists"
    return off_slopes("loss_and_dlogits", lambda: module.loss_and_dlogits(logits, targets)[0],
                      "its loss", [("d_logits", d_logits, logits)])


################ The backwards, against central differences of their forwards

def check_layernorm_backward(module):
    x, g, b, dy = case("layer norm")
    _, cache = module.layernorm_forward(x, g, b)
    d_x, d_g, d_b = module.layernorm_backward(dy, g, cache)
    if dy != case("layer norm")[3]:
        return "layernorm_backward changed its input dy in place: make new lists"
    if cache != module.layernorm_forward(x, g, b)[1]:
        return "layernorm_backward changed the cache in place: make new lists"
    return off_slopes("layernorm_backward",
                      lambda: total(module.layernorm_forward(x, g, b)[0], dy),
                      "layernorm_forward", [("d_x", d_x, x), ("d_g", d_g, g), ("d_b", d_b, b)])


def check_softmax_backward(module):
    scores, d_weights = case("softmax")
    d_scores = module.softmax_backward(module.softmax(scores), d_weights)
    if d_weights != case("softmax")[1]:
        return "softmax_backward changed its input d_weights in place: make new lists"
    return off_slopes("softmax_backward", lambda: total(module.softmax(scores), d_weights),
                      "softmax", [("d_scores", d_scores, scores)])


def check_attention_backward(module):
    p, x, d_out = case("attention")
    _, cache = module.attention_forward(p, x)
    grads, d_x = module.attention_backward(p, cache, d_out)
    if cache != module.attention_forward(p, x)[1]:
        return "attention_backward changed the cache in place: make new lists"
    if not isinstance(grads, dict):
        return f"attention_backward: its first output is a {type(grads).__name__}, not a dict"
    if sorted(grads) != sorted(p):
        return f"attention_backward: its gradients are named {sorted(grads)}, not {sorted(p)}"

    def f():
        return total(module.attention_forward(p, x)[0], d_out)
    d_x_off = off_slopes("attention_backward step 1", f, "attention_forward", [("d_x", d_x, x)])
    for step, name in (("step 5", "Wo"), ("steps 5 and 4", "Wv"), ("steps 4 to 2", "Wq"),
                       ("steps 4 to 2", "Wk")):
        if not d_x_off and name != "Wo":
            step = "step 1"     # d_x is right, so d_q, d_k and d_v are: x_T · d_... is off
        off = off_slopes(f"attention_backward {step}", f, "attention_forward",
                         [(f"d_{name}", grads.get(name), p[name])])
        if off:
            return off
    return d_x_off


def check_linear_backward(module):
    x, W, b, d_y = case("linear")
    d_x, d_W, d_b = module.linear_backward(d_y, x, W)
    return off_slopes("linear_backward", lambda: total(module.linear(x, W, b), d_y), "linear",
                      [("d_x", d_x, x), ("d_W", d_W, W), ("d_b", d_b, b)])


BACKWARD_STEPS = [   # the gradients in the order backward makes them, and the step
    ("W_out b_out", "backward step 4: the output scores' linear_backward"),
    ("lnf_g lnf_b", "backward step 4: LNF's layernorm_backward (its inputs or outputs)"),
    ("b2", "backward step 4's d_x2 (LNF's layernorm_backward: its gain) or step 3's d_m = d_x2"),
    ("W2", "backward step 3: the MLP's second layer, linear_backward(d_m, act, W2)"),
    ("W1 b1", "backward step 3: the relu's gate (d_pre, where pre > 0), or the first layer"),
    ("ln2_g ln2_b", "backward step 3: LN2's layernorm_backward (its inputs or outputs)"),
    ("Wo", "backward step 3's skip path or LN2's call (d_x1 = d_x2 + LN2's d_x), or step 2's "
           "d_a = d_x1: the gradient that reaches attention"),
    ("Wv Wq Wk", "backward step 2: attention_backward's call"),
    ("ln1_g ln1_b", "backward step 2: LN1's layernorm_backward (its inputs or outputs)"),
    ("pos_emb", "backward step 1: pos_emb's gradient, a row per position of d_x0"),
    ("tok_emb", "backward step 1: tok_emb's gradient, a token's rows of d_x0 summed")]


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
        if model.shape(gradient) != model.shape(tensor):      # rows run together, say
            return True
        pairs = zip(trace_block.flatten(gradient), trace_block.flatten(u), strict=True)
        return not near_slope(math.fsum(g * e for g, e in pairs), slope)
    except (TypeError, ValueError):         # no gradient, or a ragged one
        return True


def check_backward(module):
    """The small copy's gradients in backward order, each along a random direction, the
    first off then entry by entry; where both embeddings' are off, step 2's skip path is.
    Then the relu's gradient where pre is exactly 0, which central differences cannot judge."""
    p, x, y = tiny(module), BACKWARD_IDS[:-1], BACKWARD_IDS[1:]    # 7 of the 8 positions
    logits, cache = module.forward(p, x, use_positions=False)
    try:
        without = module.backward(p, cache, module.loss_and_dlogits(logits, y)[1])
    except KeyError as error:       # grads[name] for a gradient no step made
        steps = [step for names, step in BACKWARD_STEPS if error.args[0] in names.split()]
        if not steps:
            raise
        return (f"{steps[0]}: no gradient {error.args[0]!r} was made (backward raised "
                f"KeyError where it reads it)")
    if any(map(any, without["pos_emb"])):
        return "backward step 1: pos_emb gets a gradient, but use_positions=False left it out"
    logits, cache = module.forward(p, x)
    grads = module.backward(p, cache, module.loss_and_dlogits(logits, y)[1])
    if grads is without:
        return f"backward: {SAME_DICT}"
    if p != tiny(module):
        return "backward changed the parameters in place (grads = dict(p)?): make new lists"

    def loss():
        return module.sequence_loss(p, x, y)
    rng = random.Random(1)
    for names, step in BACKWARD_STEPS:
        for name in names.split():
            if not off_along(loss, grads.get(name), p[name], rng):
                continue
            if name == "pos_emb" and off_along(loss, grads["tok_emb"], p["tok_emb"], rng):
                step = "backward step 2's skip path or LN1's call: d_x0 = d_x1 + LN1's d_x"
            off = off_slopes(step, loss, "the loss", [(name, grads.get(name), p[name])])
            if off:         # else off only along the direction, by many entries a hair off each
                return off
    for row in p["W1"]:     # pre exactly 0 in column 0, where no central difference can judge
        row[0] = 0.0
    p["b1"][0] = 0.0
    logits, cache = module.forward(p, x)
    d_b1 = module.backward(p, cache, module.loss_and_dlogits(logits, y)[1])["b1"][0]
    if d_b1 != 0.0:
        return (f"backward step 3: the relu's gate: b1[0] is {d_b1:.6}, where pre is 0 at every "
                f"position; the relu's gradient at 0 is 0 (d_pre where pre > 0, not >= 0)")
    return None


################ The verdict

LESSON = ["layernorm_forward", "layernorm_backward", "softmax", "softmax_backward",
          "attention_forward", "attention_backward", "forward", "loss_and_dlogits", "backward"]

CHECKS = {"init_params": lambda module: against_reference(module, "init_params"),
          "layernorm_forward": check_layernorm_forward, "softmax": check_softmax,
          "attention_forward": check_attention_forward,
          "forward": check_forward,
          "loss_and_dlogits": check_loss_and_dlogits,
          "layernorm_backward": check_layernorm_backward,
          "softmax_backward": check_softmax_backward,
          "attention_backward": check_attention_backward,
          "linear_backward": check_linear_backward, "backward": check_backward}


def first_wrong(module=model, names=None):
    """The first of names (all, by default) whose check fails, in one line that starts with
    the function's name (or the def or file at fault), or None. A function that raises on
    good inputs fails, with its message; one still blank (tools/exercise.py) only when
    nothing written is wrong, the first in the lesson's order; when none fails,
    rounded_otherwise(); and before a finding, an earlier function that passed its check but
    is off in its last bits (a hair off there can move a later function's numbers more).
    A reference.json that cannot be used, then a def given twice, come before any check."""
    try:
        reference()
    except bpe.FileProblem as problem:      # reference.json: no function's fault
        return str(problem)
    twice = defined_twice(module)
    if twice:
        return twice
    blanks, passed = [], []
    for name in names or CHECKS:
        try:
            found = CHECKS[name](module)
        except NotImplementedError as error:    # a blank, or a check that meets one
            blanks.append((LESSON.index(name) if name in LESSON else -1, name, error))
            continue
        except Exception as error:
            if isinstance(error, AttributeError) and error.obj is module:    # a def gone
                return (f"model.py has no def {error.name}: the lab and its tests call it by "
                        f"that name")
            if model_frames(error):         # the learner's code raised: that is the finding
                found = f"{name} raised {raised(error)}"
            else:                           # it returned what the check cannot read
                found = (f"{name} returned what its callers cannot use ({raised(error)}): "
                         f"does it return what its docstring says?")
        if found:
            return rounded_otherwise(module, passed) or found
        passed.append(name)
    if blanks:
        _, name, error = min(blanks, key=lambda blank: blank[0])
        return f"{name} raised {raised(error)}"
    return rounded_otherwise(module, names or CHECKS)


def defined_twice(module):
    """"model.py defines NAME twice ..." for the first name that two of its top-level defs
    give (a helper of one's own called add, say: the later def serves every caller), or None."""
    first = {}      # name -> the line of its first def
    for number, line in enumerate(linecache.getlines(getattr(module, "__file__", "")), 1):
        match = re.match(r"def (\w+)\(", line)
        if not match:
            continue
        if match[1] in first:
            return (f"model.py defines {match[1]} twice, at lines {first[match[1]]} and {number}: "
                    f"the second serves every caller; give one of them another name")
        first[match[1]] = number
    return None


OTHERWISE = {   # steps that round otherwise than the lesson's formula, as learners wrote them
    "layernorm_forward": "x * (1 / s) for x / s, a variance other than fsum((x - mean)²) / d",
    "layernorm_backward": "d_x's three terms added with - for one math.fsum, d_x as the full "
                          "Jacobian's products, or d_g's or d_b's rows added one by one",
    "softmax": "exp(z) for exp(z - max), e * (1 / total) for e / total; or a shift by another "
               "score than the row's maximum",
    "softmax_backward": "w · d_w - w · average, or the full Jacobian's Σ_k d_w_k · w_k · "
                        "(δ_kj - w_j), for w · (d_w - average); or terms left out of the average",
    "attention_backward": "d_x's three parts added two at a time (+, or add() twice) for one "
                          "add(), all their products in one math.fsum, or softmax's backward "
                          "written out within it",
    "forward": "a bias added within its dot product's math.fsum, for after it",
    "loss_and_dlogits": "top + log(total) - z added with + and -, or -log(e / total), for one "
                        "math.fsum of top, log(total) and -z; the rows' losses added one by one, "
                        "or statistics.mean, for fsum(losses) / T; d_logits as exp(z - top - "
                        "log(total)) / T for e / (total · T); or a shift by another score than "
                        "the row's maximum",
    "backward": "a token's rows of d_x0, or a linear step's terms, added one by one for one "
                "math.fsum; or, with no model.py kept by tools/exercise.py to tell them apart, "
                "a layer's backward that it calls"}


def rounded_otherwise(module, names):
    """The first of names (init_params, the forwards, then backward if it makes its own steps)
    whose output is near reference.json (backward's: near the lab's backward on the same
    layers, where it is kept) but not equal to it, or None: a sum not rounded once moves the
    last bit, which the order experiment sees, and training would carry on."""
    for name, expected in [(n, e) for n, e in reference().items() if n in names]:
        if name == "backward":
            if not own_steps(module):
                continue    # the exact-sum test hands its sums traps
            found = gradients(module, expected["d_logits"])     # another loss's bits aside
            labs = lab_backward(module)
            if labs:        # the layers' last bits are not backward's
                with mock.patch.object(module, "backward", labs):
                    expected = gradients(module, expected["d_logits"])
        else:
            found = outputs(module, name)
        for key in [key for key in expected if key in found and needed(name, key)]:
            moved = apart(found[key], expected[key], key, operator.eq, "the reference is")
            if moved:
                return f"{name}: {moved}: {not_rounded_once(name)}"
    return None


def not_rounded_once(name):
    """What moves the last bit of name's numbers, in words."""
    said = ("a sum is not rounded once (use math.fsum), as sum() and math.sumprod are not, or a "
            "step is done otherwise than the lesson's formula (or with an ε other than "
            "model.EPS), which the lab holds to the last bit")
    if name in OTHERWISE:
        said += f" ({OTHERWISE[name]})"
    return said


def cause(error):
    """An error's type and its place in model.py as raised() gives it (no place: its whole
    message): two tests that meet one slip share it, however the message is worded."""
    return type(error).__name__, raised(error).rpartition(" (model.py line")[2]


def model_frames(error):
    """The frames of error's traceback in model.py."""
    return [f for f in traceback.extract_tb(error.__traceback__)
            if Path(f.filename).name.startswith("model.py")]


def raised(error):
    """The error in one line, with the line of the last lesson function in model.py that it
    went through, if it went through one, or of code within it (not a helper of model.py that
    it called), and the step the function's own line is under (its "# N." comment; a def
    within it: where it was called): "IndexError: ... (model.py line N, in forward step 4)"."""
    said = f"{type(error).__name__}: {error}"
    if isinstance(error, FileNotFoundError):        # a lab file: the command that makes it
        said += bpe.REMAKE.get(Path(error.filename or "").name, "")
    frames = model_frames(error)
    lesson = [n for n, f in enumerate(frames) if f.name in LESSON]
    if lesson:
        own = line = frames[lesson[-1]]
        for inner in frames[lesson[-1] + 1:]:
            if hasattr(model, inner.name):      # a helper, not a comprehension or def within
                break
            line = inner
        said += f" (model.py line {line.lineno}, in {own.name}{step(own)})"
    return said


def step(frame):
    """" step N" if the frame's line is under a "# N." comment of its function, else ""."""
    for n in range(frame.lineno, 0, -1):
        text = linecache.getline(frame.filename, n)
        if text.startswith("def "):         # the lesson function's own, not one within it
            return ""
        if re.match(r" *# \d\b", text):       # "# 2." or "# 2 and 1."
            return f" step {text.split()[1][0]}"
    return ""
