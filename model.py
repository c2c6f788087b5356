"""A one-block transformer language model in plain Python, with its backward pass written by hand.

For token IDs `ids` of length T the model computes

    x0     = tok_emb[ids] + pos_emb[0:T]          token plus position embeddings
    x1     = x0 + Attention(LN1(x0))              pre-norm attention, a skip path around it
    x2     = x1 + MLP(LN2(x1))                    pre-norm MLP, a skip path around it
    logits = LNF(x2) · W_out + b_out              output scores: every token, every position

and `backward` walks the same lines in reverse, giving a gradient for every parameter.

Read it top-down: list helpers, layer norm, attention, the model ("Speed" and "Input checks"
can wait). Each backward walks its forward's numbered steps in reverse; a gradient is d_ + the
forward name (d_x1, d_W2). Inputs are checked first, most by a dimension string ("x: T n").

Shapes, in comments where each matrix is made: T positions (1..max_len), d the width (16), H
the MLP's hidden width (64), V the vocabulary (96). A matrix is a list of rows of floats.

Every floating-point sum of more than two terms goes through math.fsum, which rounds the exact
sum once. Its result does not depend on the terms' order (so the same tokens in another order
give bit-identical scores at the last position when positions are left out), nor has it changed
between Python versions (built-in sum() did, in 3.12): the trace is byte-identical from 3.10 on.

But: one sequence at a time (a training step loops over a batch), one attention head, no
dropout, no tied embeddings. Standard library only.
"""
import math
import random
from itertools import chain, compress
from math import exp, fsum, hypot, log, sqrt
from operator import mul

SIZES = {"vocab": 96, "d": 16, "hidden": 64, "max_len": 64}   # the series' model: 7,440 numbers
EPS = 1e-5  # added to the variance in layer norm, as torch.nn.LayerNorm does

# The parameters in init_params' order, and their shapes (P: max_len, the positions).
PARAMETERS = {"tok_emb": "V d", "pos_emb": "P d", "ln1_g": "d", "ln1_b": "d",
              "Wq": "d d", "Wk": "d d", "Wv": "d d", "Wo": "d d", "ln2_g": "d", "ln2_b": "d",
              "W1": "d H", "b1": "H", "W2": "H d", "b2": "d", "lnf_g": "d", "lnf_b": "d",
              "W_out": "d V", "b_out": "V"}
PARAM_NAMES = tuple(PARAMETERS)


################ List helpers

def shape(nested_list):
    """The shape of a vector or a matrix, as a tuple.

    >>> shape([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), shape([0.5, 0.25])
    ((2, 3), (2,))
    """
    return dims(nested_list, "shape()", "its argument", numbers=True)


def transpose(m):
    """mᵀ: the columns of m, as rows.

    >>> transpose([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    """
    check("transpose(m: n k)", m)
    return [list(col) for col in zip(*m)]


def matmul(a, b):
    """a · b, (n, k) · (k, m) -> (n, m), each entry a dot product rounded once.

    >>> matmul([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]])
    [[19.0, 22.0], [43.0, 50.0]]
    """
    check("matmul(a: n k, b: k m)", a, b)
    if not all(map(all, a)) or not all(map(all, b)):
        return matmul_skipping_zeros(a, b)          # Speed: the same, without the zeros' terms
    b_cols = list(zip(*b))                          # made once, for every row of a
    return [[fsum(map(mul, row, col)) for col in b_cols] for row in a]


def add(a, b):
    """a + b, entry by entry, for two matrices of one shape (two terms: + rounds once).

    >>> add([[1.0, 2.0]], [[0.5, 0.25]])
    [[1.5, 2.25]]
    """
    check("add(a: n k, b: n k)", a, b)
    return [[u + v for u, v in zip(row_a, row_b)] for row_a, row_b in zip(a, b)]


def column_sums(m):
    """The sum of each column of a matrix, rounded once.

    >>> column_sums([[0.1, 1.0], [0.2, 2.0], [0.3, 3.0]])
    [0.6, 6.0]
    """
    check("column_sums(m: n k)", m)
    return [fsum(col) for col in zip(*m)]


################ Layer normalization

def layernorm_forward(x, g, b):
    """Each row of x centred and scaled to mean 0 and variance about 1, then times the gain g
    plus the bias b: y = (x - mean) / √(variance + EPS) · g + b, with the biased variance
    (divide by d), as torch.nn.LayerNorm. Returns (y, cache).

    >>> [round(v, 4) for v in layernorm_forward([[1.0, 3.0]], [1.0, 1.0], [0.0, 0.0])[0][0]]
    [-1.0, 1.0]
    """
    check("layernorm_forward(x: T d, g: d, b: d)", x, g, b)
    check_finite("layernorm_forward", x=x, g=g, b=b)
    d = len(g)
    y, xhat, std = [], [], []
    for row in x:
        # 1. centre
        mean = fsum(row) / d
        centred = [x_j - mean for x_j in row]
        # 2. scale
        variance = fsum(c * c for c in centred) / d
        s = sqrt(variance + EPS)
        xhat.append([c / s for c in centred])                      # (d)
        std.append(s)
        # 3. gain and bias
        y.append([xhat_j * g_j + b_j for xhat_j, g_j, b_j in zip(xhat[-1], g, b)])   # (d)
    return y, {"xhat": xhat, "std": std}                           # y: (T, d)


def layernorm_backward(dy, g, cache):
    """Gradients of layer norm, given dy: returns (d_x, d_g, d_b), the forward steps 3, 2, 1
    walked back. With d_xhat = dy · g, and as the mean and the std depend on every x of the
    row, each d_x has three terms:
        d_x = (d_xhat - mean(d_xhat) - xhat · mean(d_xhat · xhat)) / std
               term 1   term 2         term 3
    """
    xhat, std = cached(cache, "layernorm_forward", "xhat", "std")
    check("layernorm_backward(xhat: T d, std: T, g: d, dy: T d)", xhat, std, g, dy)
    check_finite("layernorm_backward", dy=dy)
    d = len(g)
    # 3. in the forward pass this was: y = xhat · g + b, row by row
    d_g = [fsum(map(mul, dy_col, xhat_col)) for dy_col, xhat_col in zip(zip(*dy), zip(*xhat))]
    d_b = column_sums(dy)                                          # (d)
    d_x = []
    for dy_t, xhat_t, s in zip(dy, xhat, std):                    # row t
        d_xhat = [dy_j * g_j for dy_j, g_j in zip(dy_t, g)]       # term 1
        # 2 and 1. xhat = (x - mean) / std: the mean moves every x alike (term 2), and the
        # std grows along xhat (term 3)
        mean_d_xhat = fsum(d_xhat) / d
        mean_d_xhat_xhat = fsum(map(mul, d_xhat, xhat_t)) / d
        # three terms, so fsum: (a - b - c) would round twice
        d_x.append([fsum((term1, -mean_d_xhat, -xhat_j * mean_d_xhat_xhat)) / s
                    for term1, xhat_j in zip(d_xhat, xhat_t)])
    return d_x, d_g, d_b                                           # d_x: (T, d), d_g, d_b: (d)


################ Causal self-attention

def softmax(scores):
    """Each row's softmax, exp(z) / Σ exp(z), computed as exp(z - max) / Σ exp(z - max): the
    same numbers, but exp cannot overflow. Rows may differ in length; -inf weighs exactly 0.

    >>> softmax([[3.0], [1.0, 1.0, -math.inf]])
    [[1.0], [0.5, 0.5, 0.0]]
    """
    check_scores(scores)
    weights = []
    for row in scores:
        top = max(row)
        e = [exp(z - top) for z in row]
        total = fsum(e)
        weights.append([e_j / total for e_j in e])
    return weights


def softmax_backward(weights, d_weights):
    """Gradient of the scores, given d_weights, of weights = softmax(scores): in a row each
    weight moves all the others (they sum to 1), so d_z_j = w_j · (d_w_j - Σ_k w_k · d_w_k).

    >>> softmax_backward([[0.5, 0.5, 0.0]], [[1.0, 0.0, 7.0]])
    [[0.25, -0.25, 0.0]]
    """
    check("softmax_backward(weights: T *, d_weights: T *)", weights, d_weights)
    d_scores = []
    for w, d_w in zip(weights, d_weights):
        average = fsum(map(mul, w, d_w))               # d_w averaged with the weights w
        d_scores.append([w_j * (d_w_j - average) for w_j, d_w_j in zip(w, d_w)])
    return d_scores


def attention_forward(p, x):
    """One head of causal self-attention over the rows of x (T, d): position i mixes the values
    of positions j ≤ i, weighted by how well its query fits their keys. Returns (out, cache)."""
    check("attention_forward(x: T d, Wq: d d, Wk: d d, Wv: d d, Wo: d d)", x,
          *tensors(p, "Wq", "Wk", "Wv", "Wo"))
    T, sqrt_d = len(x), sqrt(len(x[0]))
    # 1. queries, keys, values
    q = matmul(x, p["Wq"])                                             # (T, d)
    k = matmul(x, p["Wk"])                                             # (T, d)
    v = matmul(x, p["Wv"])                                             # (T, d)
    # 2. scores q_i · k_j / √d, and the causal mask: only the positions j ≤ i that position i
    #    may see get a score; a later one gets none, as if its score were -inf
    scores = [[fsum(map(mul, q_i, k_j)) / sqrt_d for k_j in k[:i + 1]] for i, q_i in enumerate(q)]
    # 3. weights: each row's softmax over the positions it sees, then 0.0 for each later one
    weights = [w_i + [0.0] * (T - len(w_i)) for w_i in softmax(scores)]   # (T, T)
    # 4. mix: mixed_i = Σ over j ≤ i of weights[i][j] · v_j
    mixed = matmul(weights, v)                                         # (T, d)
    # 5. projection
    out = matmul(mixed, p["Wo"])                                       # (T, d)
    return out, {"x": x, "q": q, "k": k, "v": v, "weights": weights, "mixed": mixed,
                 "scores": [s_i + [-math.inf] * (T - len(s_i)) for s_i in scores]}   # (T, T)


def attention_backward(p, cache, d_out):
    """Gradients of attention, given d_out: returns ({"Wq", "Wk", "Wv", "Wo"} gradients, d_x).
    The forward steps 1-5 walked back as 5, 4, 3, 2, 1."""
    x, weights, q, k, v, mixed = cached(cache, "attention_forward", "x", "weights", *"qkv", "mixed")
    check("attention_backward(x: T d, weights: T T, q: T d, k: T d, v: T d, mixed: T d, Wq: d d, "
          "Wk: d d, Wv: d d, Wo: d d, d_out: T d)", x, weights, q, k, v, mixed,
          *tensors(p, "Wq", "Wk", "Wv", "Wo"), d_out)
    check_finite("attention_backward", d_out=d_out)
    weights, sqrt_d = [w[:i + 1] for i, w in enumerate(weights)], sqrt(len(x[0]))  # cut to j ≤ i
    # 5. in the forward pass this was: out = matmul(mixed, p["Wo"])
    d_Wo = matmul(transpose(mixed), d_out)                             # (d, d)
    d_mixed = matmul(d_out, transpose(p["Wo"]))                        # (T, d)
    # 4. mixed = matmul(weights, v): d_weights = d_mixed · vᵀ, d_v = weightsᵀ · d_mixed, j ≤ i
    d_weights = [[fsum(map(mul, d_mixed_i, v_j)) for v_j in v[:i + 1]]
                 for i, d_mixed_i in enumerate(d_mixed)]               # row i: (i + 1)
    d_v = causal_matmul(weights, d_mixed, transpose_a=True)            # (T, d)
    # 3. weights = softmax(scores)
    d_scores = softmax_backward(weights, d_weights)                    # row i: (i + 1)
    # 2. scores[i][j] = q_i · k_j / √d: d_q = d_scores · k / √d, d_k = d_scoresᵀ · q / √d
    d_q = [[e / sqrt_d for e in row] for row in causal_matmul(d_scores, k)]            # (T, d)
    d_k = [[e / sqrt_d for e in row] for row in causal_matmul(d_scores, q, transpose_a=True)]
    # 1. q = matmul(x, p["Wq"]), k and v alike: x fed all three, so d_x = d_q · Wqᵀ + d_k · Wkᵀ
    #    + d_v · Wvᵀ, each entry one sum of 3·d products: [d_q d_k d_v] · [Wq Wk Wv]ᵀ
    x_T = transpose(x)
    grads = {"Wq": matmul(x_T, d_q), "Wk": matmul(x_T, d_k), "Wv": matmul(x_T, d_v), "Wo": d_Wo}
    d_qkv = [[*q_t, *k_t, *v_t] for q_t, k_t, v_t in zip(d_q, d_k, d_v)]    # (T, 3d)
    W_qkv = [[*q_r, *k_r, *v_r] for q_r, k_r, v_r in zip(p["Wq"], p["Wk"], p["Wv"])]  # (d, 3d)
    return grads, matmul(d_qkv, transpose(W_qkv))                     # d_x: (T, d)


################ The model

def linear(x, W, b):
    """y = x · W + b for every row of x: (T, n) · (n, m) + (m) -> (T, m).

    >>> linear([[1.0, 2.0]], [[1.0, 0.0], [0.0, 1.0]], [0.5, -0.5])
    [[1.5, 1.5]]
    """
    check("linear(x: T n, W: n m, b: m)", x, W, b)
    # the bias is added to a dot product already rounded: a sum of two terms
    return [[xw + bias for xw, bias in zip(row, b)] for row in matmul(x, W)]


def linear_backward(d_y, x, W):
    """Gradients of y = x · W + b, given d_y: returns (d_x, d_W, d_b).

    >>> linear_backward([[1.0, 2.0]], [[3.0]], [[4.0, 5.0]])
    ([[14.0]], [[3.0, 6.0]], [1.0, 2.0])
    """
    check("linear_backward(W: n m, x: T n, d_y: T m)", W, x, d_y)
    d_x = matmul(d_y, transpose(W))     # (T, n): each x reaches every y through W
    d_W = matmul(transpose(x), d_y)     # (n, m): a sum over the positions
    d_b = column_sums(d_y)              # (m): b is added at every position
    return d_x, d_W, d_b


def init_params(vocab, d, hidden, max_len, seed):
    """Fresh parameters, the 18 tensors of PARAMETERS in its order: one random.Random(seed)
    draws gauss(0.0, 0.02) for every entry of the matrices, in turn, row by row; gains start
    at 1.0, biases at 0.0. Same seed, same numbers, on every Python version.

    >>> p = init_params(**SIZES, seed=3)
    >>> count_params(p), shape(p["tok_emb"]), shape(p["W1"])
    (7440, (96, 16), (16, 64))
    """
    check_sizes("init_params", vocab=vocab, d=d, hidden=hidden, max_len=max_len, seed=seed)
    rng, sizes, p = random.Random(seed), {"V": vocab, "P": max_len, "d": d, "H": hidden}, {}
    for name, letters in PARAMETERS.items():
        rows, *cols = (sizes[letter] for letter in letters.split())
        if cols:                                       # a matrix: drawn row by row, in turn
            p[name] = [[rng.gauss(0.0, 0.02) for _ in range(cols[0])] for _ in range(rows)]
        else:                                          # a gain starts at 1, a bias at 0
            p[name] = [1.0 if name.endswith("_g") else 0.0] * rows
    return p


def count_params(params):
    """How many numbers the parameters hold in all (init_params' example: 7440)."""
    tensors(params)                                     # refuses anything but a dict
    return sum(math.prod(shape(t)) for t in params.values())      # ints: exact


def fingerprint(p):
    """Every number in p, as a tuple of rows: backward refuses a cache made with other values."""
    return tuple(map(tuple, chain.from_iterable(p[name] if " " in dims else [p[name]]
                                                for name, dims in PARAMETERS.items())))


def forward(p, ids, use_positions=True):
    """Scores for every vocabulary token at every position: returns (logits, cache). logits[t][j]
    scores token j as the one that follows ids[0..t], seeing only positions 0..t.
    use_positions=False leaves the position embeddings out."""
    check_forward(p, ids, use_positions)
    # 1. embeddings: a row per token, plus a row per position
    x0 = [list(p["tok_emb"][i]) for i in ids]                          # (T, d)
    if use_positions:
        x0 = add(x0, p["pos_emb"][:len(ids)])                          # (T, d)
    # 2. attention, pre-norm, with a skip path around it
    h1, ln1 = layernorm_forward(x0, p["ln1_g"], p["ln1_b"])            # (T, d)
    a, att = attention_forward(p, h1)                                  # (T, d)
    x1 = add(x0, a)                                                    # (T, d)
    # 3. the MLP, pre-norm, with a skip path around it
    h2, ln2 = layernorm_forward(x1, p["ln2_g"], p["ln2_b"])            # (T, d)
    pre = linear(h2, p["W1"], p["b1"])                                 # (T, H)
    act = [[z if z > 0.0 else 0.0 for z in row] for row in pre]        # (T, H): relu
    m = linear(act, p["W2"], p["b2"])                                  # (T, d)
    x2 = add(x1, m)                                                    # (T, d)
    # 4. output scores, after one more layer norm
    hf, lnf = layernorm_forward(x2, p["lnf_g"], p["lnf_b"])            # (T, d)
    logits = linear(hf, p["W_out"], p["b_out"])                        # (T, V)
    return logits, {"ids": list(ids), "use_positions": use_positions, "x0": x0, "h1": h1,
                    "ln1": ln1, "att": att, "a": a, "x1": x1, "h2": h2, "ln2": ln2, "pre": pre,
                    "act": act, "m": m, "x2": x2, "hf": hf, "lnf": lnf, "params": fingerprint(p)}


def loss_and_dlogits(logits, targets):
    """The mean cross-entropy of the next tokens, and its gradient (softmax - one-hot) / T.

    >>> loss, d_logits = loss_and_dlogits([[0.0, 0.0]], [1])
    >>> round(loss, 6), d_logits
    (0.693147, [[0.5, -0.5]])
    """
    check_loss(logits, targets)
    T, losses, d_logits = len(logits), [], []
    for row, target in zip(logits, targets):
        top = max(row)                                   # subtract the max: exp cannot overflow
        e = [exp(z - top) for z in row]
        total = fsum(e)
        # -log softmax(row)[target] = top + log(total) - row[target]: three terms, so fsum
        losses.append(fsum((top, log(total), -row[target])))
        scale = total * T
        d_row = [e_j / scale for e_j in e]               # softmax / T
        d_row[target] -= 1.0 / T                          # minus one-hot / T
        d_logits.append(d_row)
    return fsum(losses) / T, d_logits                    # d_logits: (T, V)


def backward(p, cache, d_logits):
    """Gradients of the loss for every parameter: a dict with the names and shapes of p.
    The forward steps 4, 3, 2, 1 walked back. At a skip path, x_next = x + f(x), the gradient
    reaches x twice, straight along the skip path and back through f, and the two are added."""
    check_backward(p, cache, d_logits)
    ids, act, grads = cache["ids"], cache["act"], {}
    # 4. in the forward pass: hf = LNF(x2), then logits = linear(hf, W_out, b_out)
    d_hf, grads["W_out"], grads["b_out"] = linear_backward(d_logits, cache["hf"], p["W_out"])
    d_x2, grads["lnf_g"], grads["lnf_b"] = layernorm_backward(d_hf, p["lnf_g"], cache["lnf"])
    # 3. in the forward pass: h2 = LN2(x1), pre = linear(h2, W1, b1), act = relu(pre),
    #    m = linear(act, W2, b2), then x2 = x1 + m; walked back from the end, where the relu,
    #    act = max(0, pre), lets the gradient pass only where act > 0:
    d_m = d_x2                                     # x2 = x1 + m: m gets d_x2 as it is
    #        d_act, grads["W2"], grads["b2"] = linear_backward(d_m, act, p["W2"])
    #        d_pre = [[d_z if z > 0.0 else 0.0 for d_z, z in zip(d_act_t, act_t)]
    #                 for d_act_t, act_t in zip(d_act, act)]
    #    Speed: those two lines in one, never computing what the relu sets to 0
    d_pre, grads["W2"], grads["b2"] = linear_relu_backward(d_m, act, p["W2"])    # (T, H)
    d_h2, grads["W1"], grads["b1"] = linear_backward(d_pre, cache["h2"], p["W1"])
    d_x1_mlp, grads["ln2_g"], grads["ln2_b"] = layernorm_backward(d_h2, p["ln2_g"], cache["ln2"])
    d_x1 = add(d_x2, d_x1_mlp)     # skip path: straight along it, plus back through the MLP
    # 2. in the forward pass: h1 = LN1(x0), a = Attention(h1), then x1 = x0 + a
    d_a = d_x1                                     # x1 = x0 + a: a gets d_x1 as it is
    attention_grads, d_h1 = attention_backward(p, cache["att"], d_a)
    d_x0_att, grads["ln1_g"], grads["ln1_b"] = layernorm_backward(d_h1, p["ln1_g"], cache["ln1"])
    grads.update(attention_grads)
    d_x0 = add(d_x1, d_x0_att)     # skip path: straight along it, plus back through attention
    # 1. in the forward pass: x0 = tok_emb[ids] + pos_emb[0:T]; pos_emb's rows past T were
    #    not used, and a token at several positions collects the gradient of each
    grads["pos_emb"] = [[0.0] * len(row) for row in p["pos_emb"]]
    if cache["use_positions"]:
        grads["pos_emb"][:len(ids)] = d_x0
    rows_of = {}                                   # token -> the rows of d_x0 where it stands
    for token, d_x0_t in zip(ids, d_x0):
        rows_of.setdefault(token, []).append(d_x0_t)
    grads["tok_emb"] = [[0.0] * len(row) for row in p["tok_emb"]]
    for token, rows in rows_of.items():
        grads["tok_emb"][token] = column_sums(rows)
    return {name: grads[name] for name in PARAM_NAMES}


def sequence_loss(p, ids, targets, use_positions=True):
    """The mean next-token cross-entropy of one sequence (forward and loss, no gradient)."""
    return loss_and_dlogits(forward(p, ids, use_positions)[0], targets)[0]


################ Speed (you can skip this section)

def matmul_skipping_zeros(a, b):
    """Speed: matmul(a, b) for an a or a b holding a 0.0, in place of matmul's plain last line:
    the same numbers (a zero term adds nothing to a sum), without the zeros' products."""
    if all(map(all, a)):            # the zeros are b's: work out bᵀ · aᵀ, with them in its rows
        return transpose(matmul_skipping_zeros(transpose(b), transpose(a)))
    b_cols, out = list(zip(*b)), []
    finite = all(hypot(*col) < math.inf for col in b_cols)    # 0 · inf and 0 · nan are nan
    for row in a:
        kept = list(compress(row, row)) if finite else row  # nonzero; all if b is not finite
        if len(kept) + row.count(0.0) < len(row):           # None, "" or [] would pass for 0.0
            raise TypeError(f"matmul: a matrix must hold numbers, not {row!r:.50}")
        # its zeros all at the end (a causal row): map stops with kept; else b's rows kept meets
        cols = b_cols if not kept or row[:len(kept)] == kept else zip(*compress(b, row))
        out.append([fsum(map(mul, kept, col)) for col in cols])
    return out


def causal_matmul(a, b, transpose_a=False):
    """Speed: matmul(a, b), or matmul(transpose(a), b), for a causal a given by its rows' first
    entries, a[i][0..i] (the rest 0): the same numbers without the zeros' products, in place of
    attention_backward's plain matmul(transpose(weights), d_mixed) and d_scores' two products.

    >>> a, b = [[2.0], [1.0, 3.0]], [[1.0, 10.0], [2.0, 20.0]]
    >>> causal_matmul(a, b), causal_matmul(a, b, transpose_a=True)
    ([[2.0, 20.0], [7.0, 70.0]], [[4.0, 40.0], [6.0, 60.0]])
    """
    check("causal_matmul(a: T i, b: T m)", a, b)
    b_cols = list(zip(*b))                          # made once, for every row of a
    if not transpose_a:
        return [[fsum(map(mul, a_i, col)) for col in b_cols] for a_i in a]   # stops at a_i's end
    a_cols = [[a_i[j] for a_i in a[j:]] for j in range(len(a))]       # column j: a[j..T-1][j]
    return [[fsum(map(mul, a_col, col[j:])) for col in b_cols] for j, a_col in enumerate(a_cols)]


def linear_relu_backward(d_m, act, W2):
    """Speed: backward's two plain lines (quoted there) in one, computing only the entries of
    d_act = d_m · W2ᵀ where act > 0 (the relu sets the others to 0): (d_pre, d_W2, d_b2).

    >>> linear_relu_backward([[1.0, 2.0]], [[3.0, 0.0]], [[1.0, 1.0], [5.0, 5.0]])
    ([[3.0, 0.0]], [[3.0, 6.0], [0.0, 0.0]], [1.0, 2.0])
    """
    check("linear_relu_backward(W2: n m, act: T n, d_m: T m)", W2, act, d_m)
    d_pre = [[fsum(map(mul, d_m_t, W2_row)) if z > 0.0 else 0.0
              for z, W2_row in zip(act_t, W2)] for d_m_t, act_t in zip(d_m, act)]
    return d_pre, matmul(transpose(act), d_m), column_sums(d_m)


################ Input checks (you can skip this section)

HUGE = 2.0 ** 500       # about 3e150: a row longer than this (√Σx²) could overflow its squares
BIG = 1e20              # parameter or d_logits rows longer than this could overflow a gradient
SIGNATURES = {}         # each dimension string, read once: (function, [(argument, letters)])


def check(signature, *args):
    """Refuse args unless each has the shape its dimension string gives (a letter is one size
    wherever it stands, never 0: "empty sequence" for T; "*" and "i": see dims); return sizes.

    >>> check("linear(x: T n, W: n m, b: m)", [[1.0, 2.0]], [[1.0], [2.0]], [0.5, 0.5])
    Traceback (most recent call last):
    ValueError: linear: b has shape (2,), but it must be (m,) with m = 1, as in W, of shape (2, 1)
    """
    if signature not in SIGNATURES:
        who, _, rest = signature.rstrip(")").partition("(")
        SIGNATURES[signature] = who, [(name.strip(), letters.split(), letters.split()[-1] in "*i")
                                      for name, letters in (p.split(":") for p in rest.split(","))]
    (who, params), sizes, shapes = SIGNATURES[signature], {}, {}
    for (name, letters, ragged), value in zip(params, args):
        found = shapes[name] = dims(value, who, name, letters, ragged)
        for letter, n in zip(letters, found):
            if n == 0 and letter not in sizes:     # else: a shape that differs, said below
                raise ValueError("empty sequence" if letter == "T" else f"{who}: {name} is empty")
            want = (list(range(1, len(value) + 1)) if ragged and letter == "i"    # causal rows
                    else sizes.setdefault(letter, n))
            if n != want:
                first = next(other for other, other_letters, _ in params if letter in other_letters)
                if letter in "*i":        # rows of other lengths: the first that differs
                    i = next(i for i, (u, v) in enumerate(zip(n, want)) if u != v)
                    raise ValueError(f"{who}: row {i} of {name} has length {n[i]}, not {want[i]}"
                                     f"{f', as in {first}' if letter == '*' else ' (causal)'}")
                raise ValueError(f"{who}: {name} has shape {found}, but it must be "
                                 f"({', '.join(letters)}{',' * (len(letters) == 1)}) with {letter}"
                                 f" = {sizes[letter]}, as in {first}, of shape {shapes[first]}")
    return sizes


def dims(value, who, name, want=None, ragged=False, numbers=False):
    """The shape of a vector (a list of numbers) or a matrix (a list of rows of one length, unless
    ragged: "*" any, "i" i + 1 in row i), refusing anything else. numbers: read a matrix's too."""
    found = None
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        widths = set(map(len, value)) if set(map(type, value)) <= {list, tuple} else set()
        if len(widths) > 1 and not ragged:
            raise ValueError(f"{who}: {name} is ragged: it has rows of lengths {sorted(widths)}")
        if widths and (not numbers or set(map(type, chain.from_iterable(value))) <= {float, int}):
            found = (len(value), list(map(len, value)) if ragged and max(widths) else min(widths))
    elif isinstance(value, (list, tuple)) and set(map(type, value)) <= {float, int}:
        found = (0, 0) if not value and want and len(want) == 2 else (len(value),)
    if found is None or want and len(found) != len(want):
        kind = f"{['numbers', 'rows'][len(want) == 2]} ({' '.join(want)})" if want else "numbers"
        raise TypeError(f"{who}: {name} must be a list of {kind}, not {value!r:.50}")
    return found


def tensors(p, *names):
    """The parameters named, refusing a p that is not a dict holding them."""
    if not isinstance(p, dict):
        raise TypeError(f"the parameters must be the dict init_params returns, not {p!r:.40}")
    if any(name not in p for name in names):
        raise ValueError(f"parameters missing: {', '.join(n for n in names if n not in p)}")
    return [p[name] for name in names]


def cached(cache, maker, *keys):
    """The entries of a cache that maker returned, refusing anything else."""
    if lacks := [key for key in keys if not isinstance(cache, dict) or key not in cache]:
        raise TypeError(f"expected the cache that {maker} returned; this one lacks {lacks}" + (
            " (the model's cache holds one as cache['att'])" * (maker == "attention_forward")))
    return [cache[key] for key in keys]


def check_sizes(who, **s):
    """Refuse sizes that are not ints of at least 1 (a seed: 0), or that make over 1e8 numbers."""
    for name, n in s.items():
        if type(n) is not int or n < (name in SIZES):
            raise (ValueError if type(n) is int else TypeError)(
                f"{who}: {name} must be an int of at least {int(name in SIZES)}, not {n!r:.30}")
    if (d := s["d"]) * (2 * s["vocab"] + s["max_len"] + 4 * d + 2 * s["hidden"]) > 1e8:  # matrices
        raise ValueError(f"{who}: these sizes make over 1e8 numbers (3 GB as Python floats)")


def check_finite(who, bound=HUGE, **tensors):
    """Refuse tensors holding anything but numbers, or inf, nan or a row longer than bound."""
    for name, t in tensors.items():
        rows = t if t and isinstance(t[0], (list, tuple)) else [t]
        for r, row in enumerate(rows):
            try:
                if hypot(*row) < bound:     # a bound, not a result (nan fails it too)
                    continue
                why = ValueError(f"holds inf, nan or values too large (row longer than {bound:.0})")
            except (TypeError, OverflowError):     # not a number, or an int too large
                why = TypeError("must hold numbers a float can hold, not {!r:.50}".format(next((
                    v for v in row if not isinstance(v, float | int) or abs(v) >= 2 ** 1024), row)))
            raise type(why)(f"{who}: {name}{f' row {r}' * (rows is t)} {why}")


def check_scores(scores):
    """Refuse scores softmax cannot weigh: nan, +inf, or a row of -inf only (all masked)."""
    check("softmax(scores: T *)", scores)
    for i, row in enumerate(scores):
        if math.inf in row or any(map(math.isnan, row)):
            raise ValueError(f"softmax: row {i} of the scores holds nan or inf: {row!r:.60}")
        if max(row, default=-math.inf) == -math.inf:       # an empty row too
            raise ValueError(f"softmax: row {i} is all -inf: the causal mask hid every position")


def check_ids(ids, vocab, what):
    """Refuse anything but a list of ints in 0..vocab-1: name the first not an int, or 5 outside."""
    if not isinstance(ids, (list, tuple)) or (wrong := [i for i in ids if type(i) is not int]):
        raise TypeError(f"{what} must be a list of ints, not " + (
            f"one holding {wrong[0]!r:.20}" if isinstance(ids, (list, tuple)) else
            "a str: encode the text first" if isinstance(ids, str) else f"{ids!r:.50}"))
    if outside := list(dict.fromkeys(i for i in ids if not 0 <= i < vocab)):
        raise ValueError(f"{what} outside the vocabulary of size {vocab}: {outside[:5]}"
                         + f" and {len(outside) - 5} more" * (len(outside) > 5))


def check_params(p):
    """Refuse anything but init_params' 18 tensors, of one size, finite; return the sizes."""
    signature = ", ".join(f"{name}: {dims}" for name, dims in PARAMETERS.items())
    sizes = check(f"parameters({signature})", *tensors(p, *PARAM_NAMES))
    if unknown := [str(name) for name in p if name not in PARAMETERS]:    # in p's order
        raise ValueError(f"p has unknown names: {', '.join(unknown)}")
    check_finite("parameters", BIG, **p)
    return sizes


def check_forward(p, ids, use_positions):
    """Refuse parameters, token IDs or use_positions that forward cannot use."""
    sizes = check_params(p)
    if type(use_positions) is not bool:
        raise TypeError(f"use_positions must be True or False, not {use_positions!r}")
    check_ids(ids, sizes["V"], "token IDs")
    if not 0 < len(ids) <= sizes["P"]:
        raise ValueError(f"sequence of {len(ids)} tokens is longer than the {sizes['P']} "
                         f"positions the model has" if ids else "empty sequence")


def check_loss(logits, targets):
    """Refuse logits that are not T rows of V finite scores, or targets that do not fit them."""
    check_ids(targets, check("loss_and_dlogits(logits: T V)", logits)["V"], "target IDs")
    if len(targets) != len(logits):
        raise ValueError(f"{len(logits)} positions but {len(targets)} targets")
    check_finite("loss_and_dlogits", logits=logits)


def check_backward(p, cache, d_logits):
    """Refuse a cache not made by forward(p, ids) with p as it is, or d_logits that do not fit."""
    made_with, ids = cached(cache, "forward(p, ids)", "params", "ids", "x0", "act", "hf", "lnf",
                            "h2", "ln2", "att", "ln1", "use_positions")[:2]
    if made_with != fingerprint(dict(zip(PARAM_NAMES, tensors(p, *PARAM_NAMES)))):
        raise ValueError("the cache was made by forward with other parameter values: p has "
                         "changed since, or is another model's; run forward(p, ids) again")
    check_ids(ids, len(p["tok_emb"]), "the cache's token IDs")
    check("backward(tok_emb: V d, ids: T, d_logits: T V)", p["tok_emb"], ids, d_logits)
    check_finite("backward", BIG, d_logits=d_logits)
