"""A one-block transformer language model in plain Python, with its backward pass written by hand.

For token IDs `ids` of length T the model computes

    x0     = tok_emb[ids] + pos_emb[0:T]          token plus position embeddings
    x1     = x0 + Attention(LN1(x0))              pre-norm attention, a skip path around it
    x2     = x1 + MLP(LN2(x1))                    pre-norm MLP, a skip path around it
    logits = LNF(x2) · W_out + b_out              output scores: every token, every position

and `backward` walks the same lines in reverse, giving a gradient for every parameter.

Read it top-down: list helpers, layer normalization, causal self-attention, then the whole
model (parameters, forward, loss, backward). Each backward walks its forward's numbered steps
in reverse, quoting the line it differentiates, and every gradient is d_ + the forward name
(d_x1, d_W2). Each public function opens with one line that checks its input, most of them
as a dimension string: check("linear(x: T n, W: n m, b: m)", x, W, b) says that x has T rows
of n numbers, W is n by m, and b has m. The three sections at the end can be skipped: "Speed"
(one trick: leaving out the products of a zero), "Rows too large to square", and "Input
checks", where check() and the few checks a dimension string cannot say live.

Shapes, in comments where each matrix is made:
    T  positions in the sequence (1..max_len)     d  width of the model (16)
    H  hidden width of the MLP (4·d = 64)         V  vocabulary size (96)
Matrices are lists of rows (lists of floats), vectors lists of floats; matmul(a, b) is a · b.

Every floating-point sum of more than two terms goes through math.fsum, which rounds the exact
sum once. Its result does not depend on the order of the terms (so two sequences holding the
same tokens in another order give bit-identical scores at the last position when positions
are left out), and it has not changed between Python versions (built-in sum() of floats did,
in 3.12), so the recorded trace is byte-identical on every Python from 3.10.

But: one sequence at a time (a training step loops over a batch), one attention head, no
dropout, no tied embeddings. Standard library only.
"""
import math
import random
from itertools import chain, compress, islice
from math import exp, fsum, log, sqrt
from operator import mul

SIZES = {"vocab": 96, "d": 16, "hidden": 64, "max_len": 64}   # the series' model: 7,440 numbers
EPS = 1e-5  # added to the variance in layer norm, as torch.nn.LayerNorm does

# The parameters, in init_params' order, with their shapes: V vocabulary, P positions
# (max_len), d width, H hidden width.
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


def zeros(rows, cols):
    """A rows × cols matrix of 0.0.

    >>> zeros(2, 3)
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    check_sizes("zeros", rows=rows, cols=cols)
    return [[0.0] * cols for _ in range(rows)]


def transpose(m):
    """mᵀ: the columns of m, as rows.

    >>> transpose([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    """
    check("transpose(m: n k)", m)
    return [list(col) for col in zip(*m)]


def side_by_side(*ms):
    """Matrices of the same number of rows, joined row by row: [a b c].

    >>> side_by_side([[1.0], [2.0]], [[3.0, 4.0], [5.0, 6.0]])
    [[1.0, 3.0, 4.0], [2.0, 5.0, 6.0]]
    """
    check("side_by_side(*ms: n _)", *ms)
    return [list(chain(*rows)) for rows in zip(*ms)]


def matmul(a, b):
    """The product a · b of an (n, k) and a (k, m) matrix: (n, m), each entry a dot product
    rounded once.

    >>> matmul([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]])
    [[19.0, 22.0], [43.0, 50.0]]
    """
    check("matmul(a: n k, b: k m)", a, b)
    if not all(map(all, a)) or not all(map(all, b)):
        return matmul_skipping_zeros(a, b)          # Speed: the same, without the zeros' terms
    b_cols = list(zip(*b))                          # made once, for every row of a
    return [[fsum(map(mul, row, col)) for col in b_cols] for row in a]


def add(*ms):
    """The elementwise sum of matrices of one shape, each entry rounded once.

    >>> add([[1.0, 2.0]], [[0.5, 0.25]], [[0.25, 0.25]])
    [[1.75, 2.5]]
    """
    check("add(*ms: n k)", *ms)
    if len(ms) == 2:                                # two terms: a + b is rounded once
        return [[u + v for u, v in zip(row_a, row_b)] for row_a, row_b in zip(*ms)]
    return [[fsum(entries) for entries in zip(*rows)] for rows in zip(*ms)]


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

    >>> y, _ = layernorm_forward([[1.0, 3.0]], [1.0, 1.0], [0.0, 0.0])
    >>> [round(v, 4) for v in y[0]]
    [-1.0, 1.0]
    """
    check_layernorm(x, g, b)
    d = len(g)
    y, xhat, std = [], [], []
    for row in x:
        # 1. centre
        mean = fsum(row) / d
        centred = [x_j - mean for x_j in row]
        # 2. scale (a row beyond about 1e154 overflows its squares: see std_of_huge_row)
        variance = fsum(c * c for c in centred) / d
        s = sqrt(variance + EPS) if variance < math.inf else std_of_huge_row(centred)
        xhat.append([c / s for c in centred])                      # (d)
        std.append(s)
        # 3. gain and bias
        y.append([xhat_j * g_j + b_j for xhat_j, g_j, b_j in zip(xhat[-1], g, b)])   # (d)
    return y, {"xhat": xhat, "std": std}                           # y: (T, d)


def layernorm_backward(d_y, g, cache):
    """Gradients of layer norm, given d_y: returns (d_x, d_g, d_b). The forward steps 3, 2, 1
    walked back. With d_xhat = d_y · g, and because the mean and the std depend on every x of
    the row, each d_x has three terms:
        d_x = (d_xhat - mean(d_xhat) - xhat · mean(d_xhat · xhat)) / std
               term 1   term 2         term 3
    """
    check("layernorm_backward(xhat: T d, std: T, g: d, d_y: T d)",
          *cached(cache, "layernorm_forward", "xhat", "std"), g, d_y)
    xhat, std = cache["xhat"], cache["std"]
    d = len(g)
    # 3. in the forward pass this was: y = xhat · g + b, row by row
    d_g = [fsum(map(mul, d_y_col, xhat_col)) for d_y_col, xhat_col in zip(zip(*d_y), zip(*xhat))]
    d_b = column_sums(d_y)                                         # (d)
    d_x = []
    for d_y_t, xhat_t, s in zip(d_y, xhat, std):                  # row t
        d_xhat = [d_y_j * g_j for d_y_j, g_j in zip(d_y_t, g)]    # term 1
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
    """Each row's softmax: exp(z) / Σ exp(z) for each score z of the row, computed as
    exp(z - max) / Σ exp(z - max), the same numbers, but exp cannot overflow. A score of -inf
    gets a weight of exactly 0.

    >>> softmax([[1.0, 1.0, -math.inf]])
    [[0.5, 0.5, 0.0]]
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
    """Gradient of the scores, given d_weights, the gradient of weights = softmax(scores): in a
    row, each weight moves all the others (they sum to 1), so d_z_j = w_j · (d_w_j - Σ over k
    of w_k · d_w_k).

    >>> softmax_backward([[0.5, 0.5, 0.0]], [[1.0, 0.0, 7.0]])
    [[0.25, -0.25, 0.0]]
    """
    check("softmax_backward(weights: T n, d_weights: T n)", weights, d_weights)
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
    # 2. scores q_i · k_j / √d for the positions j ≤ i that position i may see, then the
    #    causal mask: -inf for each later position, whose score is never computed
    scores = [[fsum(map(mul, q_i, k_j)) / sqrt_d for k_j in k[:i + 1]] + [-math.inf] * (T - 1 - i)
              for i, q_i in enumerate(q)]                              # (T, T)
    # 3. weights: each row's softmax; a masked score's weight is exactly 0
    weights = softmax(scores)                                          # (T, T)
    # 4. mix: mixed_i = Σ over j ≤ i of weights[i][j] · v_j
    mixed = matmul(weights, v)                                         # (T, d)
    # 5. projection
    out = matmul(mixed, p["Wo"])                                       # (T, d)
    return out, {"x": x, "q": q, "k": k, "v": v, "scores": scores, "weights": weights,
                 "mixed": mixed}


def attention_backward(p, cache, d_out):
    """Gradients of attention, given d_out: returns ({"Wq", "Wk", "Wv", "Wo"} gradients, d_x).
    The forward steps 1-5 walked back as 5, 4, 3, 2, 1."""
    check("attention_backward(x: T d, weights: T T, Wq: d d, Wk: d d, Wv: d d, Wo: d d, "
          "d_out: T d)", *cached(cache, "attention_forward", "x", "weights"),
          *tensors(p, "Wq", "Wk", "Wv", "Wo"), d_out)
    x, q, k, v = cache["x"], cache["q"], cache["k"], cache["v"]
    weights, mixed = cache["weights"], cache["mixed"]
    T, sqrt_d = len(x), sqrt(len(x[0]))
    # 5. in the forward pass this was: out = matmul(mixed, p["Wo"])
    d_Wo = matmul(transpose(mixed), d_out)                             # (d, d)
    d_mixed = matmul(d_out, transpose(p["Wo"]))                        # (T, d)
    # 4. mixed = matmul(weights, v): d_weights = d_mixed · vᵀ, d_v = weightsᵀ · d_mixed
    d_weights = [[fsum(map(mul, d_mixed_i, v_j)) for v_j in v[:i + 1]] + [0.0] * (T - 1 - i)
                 for i, d_mixed_i in enumerate(d_mixed)]               # (T, T): masked, 0
    d_v = matmul(transpose(weights), d_mixed)                          # (T, d)
    # 3. weights = softmax(scores)
    d_scores = softmax_backward(weights, d_weights)                    # (T, T)
    # 2. scores[i][j] = q_i · k_j / √d: d_q = d_scores · k / √d, d_k = d_scoresᵀ · q / √d
    d_q = [[entry / sqrt_d for entry in row] for row in matmul(d_scores, k)]             # (T, d)
    d_k = [[entry / sqrt_d for entry in row] for row in matmul(transpose(d_scores), q)]  # (T, d)
    # 1. q = matmul(x, p["Wq"]), k and v alike: x fed all three, so d_x is the sum of what
    #    comes back, d_q · Wqᵀ + d_k · Wkᵀ + d_v · Wvᵀ, each entry one sum of 3·d products:
    #    [d_q d_k d_v] · [Wq Wk Wv]ᵀ
    x_T = transpose(x)
    grads = {"Wq": matmul(x_T, d_q), "Wk": matmul(x_T, d_k), "Wv": matmul(x_T, d_v),
             "Wo": d_Wo}                                               # (d, d) each
    d_x = matmul(side_by_side(d_q, d_k, d_v),
                 transpose(side_by_side(p["Wq"], p["Wk"], p["Wv"])))  # (T, d)
    return grads, d_x


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
    check("linear_backward(d_y: T m, x: T n, W: n m)", d_y, x, W)
    d_x = matmul(d_y, transpose(W))     # (T, n): each x reaches every y through W
    d_W = matmul(transpose(x), d_y)     # (n, m): a sum over the positions
    d_b = column_sums(d_y)              # (m): b is added at every position
    return d_x, d_W, d_b


def init_params(vocab, d, hidden, max_len, seed):
    """Fresh parameters: a dict of 18 tensors, in the order of PARAMETERS.

    One random.Random(seed) draws gauss(0.0, 0.02) for every entry of the random matrices,
    row by row, matrix by matrix in the order tok_emb, pos_emb, Wq, Wk, Wv, Wo, W1, W2, W_out;
    gains start at 1.0 and biases at 0.0. Same seed, same numbers, on every Python version.

    >>> p = init_params(**SIZES, seed=3)
    >>> count_params(p), shape(p["tok_emb"]), shape(p["W1"])
    (7440, (96, 16), (16, 64))
    """
    check_sizes("init_params", vocab=vocab, d=d, hidden=hidden, max_len=max_len, seed=seed)
    rng = random.Random(seed)

    def gauss(rows, cols):
        return [[rng.gauss(0.0, 0.02) for _ in range(cols)] for _ in range(rows)]

    # The random matrices are drawn in this order; the dict below gives the names' order.
    tok_emb, pos_emb = gauss(vocab, d), gauss(max_len, d)
    Wq, Wk, Wv, Wo = gauss(d, d), gauss(d, d), gauss(d, d), gauss(d, d)
    W1, W2 = gauss(d, hidden), gauss(hidden, d)
    W_out = gauss(d, vocab)
    return {
        "tok_emb": tok_emb,                            # (V, d)
        "pos_emb": pos_emb,                            # (max_len, d)
        "ln1_g": [1.0] * d, "ln1_b": [0.0] * d,        # (d), (d)
        "Wq": Wq, "Wk": Wk, "Wv": Wv, "Wo": Wo,        # (d, d) each
        "ln2_g": [1.0] * d, "ln2_b": [0.0] * d,        # (d), (d)
        "W1": W1, "b1": [0.0] * hidden,                # (d, H), (H)
        "W2": W2, "b2": [0.0] * d,                     # (H, d), (d)
        "lnf_g": [1.0] * d, "lnf_b": [0.0] * d,        # (d), (d)
        "W_out": W_out, "b_out": [0.0] * vocab,        # (d, V), (V)
    }


def count_params(params):
    """How many numbers the parameters hold in all.

    >>> count_params({"W": [[0.0, 0.0], [0.0, 0.0]], "b": [0.0, 0.0]})
    6
    """
    check_dict("count_params", params)
    return sum(math.prod(shape(t)) for t in params.values())      # ints: exact


def forward(p, ids, use_positions=True):
    """Scores for every vocabulary token at every position: returns (logits, cache). logits[t][j]
    scores token j as the one that follows ids[0..t], seeing only positions 0..t.
    use_positions=False leaves the position embeddings out."""
    check_forward(p, ids, use_positions)
    T = len(ids)
    # 1. embeddings: a row per token, plus a row per position
    x0 = [list(p["tok_emb"][i]) for i in ids]                          # (T, d)
    if use_positions:
        x0 = add(x0, p["pos_emb"][:T])                                 # (T, d)
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
                    "ln1": ln1, "att": att, "a": a, "x1": x1, "h2": h2, "ln2": ln2,
                    "pre": pre, "act": act, "m": m, "x2": x2, "hf": hf, "lnf": lnf,
                    "params": fingerprint(p)}                          # see check_backward


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
    #    m = linear(act, W2, b2), then x2 = x1 + m; walked back from the end:
    d_m = d_x2                                     # x2 = x1 + m: m gets d_x2 as it is
    #    m = linear(act, W2, b2), act = relu(pre): back through linear_backward, then through
    #    the relu, act = max(0, pre), which lets the gradient pass only where act > 0:
    #        d_act, grads["W2"], grads["b2"] = linear_backward(d_m, act, p["W2"])
    #        d_pre = [[d_z if z > 0.0 else 0.0 for d_z, z in zip(d_act_t, act_t)]
    #                 for d_act_t, act_t in zip(d_act, act)]
    #    Speed: those two lines at once, never computing what the relu sets to 0 (see there)
    d_pre, grads["W2"], grads["b2"] = linear_relu_backward(d_m, act, p["W2"])    # (T, H)
    d_h2, grads["W1"], grads["b1"] = linear_backward(d_pre, cache["h2"], p["W1"])
    d_x1_mlp, grads["ln2_g"], grads["ln2_b"] = layernorm_backward(d_h2, p["ln2_g"], cache["ln2"])
    d_x1 = add(d_x2, d_x1_mlp)     # skip path: straight along it, plus back through the MLP
    # 2. in the forward pass: h1 = LN1(x0), a = Attention(h1), then x1 = x0 + a
    d_a = d_x1                                     # x1 = x0 + a: a gets d_x1 as it is
    attention_grads, d_h1 = attention_backward(p, cache["att"], d_a)
    grads.update(attention_grads)
    d_x0_att, grads["ln1_g"], grads["ln1_b"] = layernorm_backward(d_h1, p["ln1_g"], cache["ln1"])
    d_x0 = add(d_x1, d_x0_att)     # skip path: straight along it, plus back through attention
    # 1. in the forward pass: x0 = tok_emb[ids] + pos_emb[0:T]; pos_emb's rows past T were
    #    not used, and a token at several positions collects the gradient of each
    grads["pos_emb"] = zeros(len(p["pos_emb"]), len(p["pos_emb"][0]))
    if cache["use_positions"]:
        grads["pos_emb"][:len(ids)] = d_x0
    grads["tok_emb"] = zeros(len(p["tok_emb"]), len(p["tok_emb"][0]))
    for i in set(ids):
        grads["tok_emb"][i] = column_sums([d_x0[t] for t, token in enumerate(ids) if token == i])
    return {name: grads[name] for name in PARAM_NAMES}


def sequence_loss(p, ids, targets, use_positions=True):
    """The mean next-token cross-entropy of one sequence (forward and loss, no gradient)."""
    logits, _ = forward(p, ids, use_positions)
    return loss_and_dlogits(logits, targets)[0]


################ Speed (you can skip this section)

def matmul_skipping_zeros(a, b):
    """Speed: matmul(a, b) for an a or a b that holds a 0.0, without the terms of the zeros, in
    place of its plain [[fsum(map(mul, row, col)) for col in b_cols] for row in a].

    A zero term adds nothing to a sum (for finite numbers), so the result is the same. The
    causal mask makes half of the attention weights 0.0 and the relu about half of the MLP's
    hidden values and their gradients: their products are never made.

    >>> matmul_skipping_zeros([[0.0, 2.0]], [[5.0, 6.0], [7.0, 8.0]])
    [[14.0, 16.0]]
    """
    if all(map(all, a)):            # the zeros are b's: work out bᵀ · aᵀ, with them in its rows
        return transpose(matmul_skipping_zeros(transpose(b), transpose(a)))
    b_cols = list(zip(*b))
    return [[fsum(map(mul, row, col)) for col in b_cols] if all(row)
            else row_times_skipping_zeros(row, b, b_cols) for row in a]


def row_times_skipping_zeros(row, b, b_cols):
    """Speed: one row of matmul(a, b) without the terms where row's entry is 0.0.

    >>> row_times_skipping_zeros([0.0, 2.0], [[5.0, 6.0], [7.0, 8.0]], [(5.0, 7.0), (6.0, 8.0)])
    [14.0, 16.0]
    """
    kept = list(compress(row, row))                     # the entries that are not 0.0
    if not kept:
        return [0.0] * len(b_cols)
    first = row.index(kept[0])
    if row[first:first + len(kept)] == kept:
        # one run between the zeros, as in a causal row (or a column of one): each column's
        # matching stretch; map stops at the end of kept
        return [fsum(map(mul, kept, col[first:] if first else col)) for col in b_cols]
    return [fsum(map(mul, kept, col)) for col in zip(*compress(b, row))]   # b's rows they meet


def linear_relu_backward(d_m, act, W2):
    """Speed: the gradients of m = linear(act, W2, b2) and of act = relu(pre), in place of
    backward's plain two lines (quoted there): linear_backward(d_m, act, W2), then the relu's
    gate on its d_act. Returns (d_pre, d_W2, d_b2). Of d_act = d_m · W2ᵀ only the entries
    where act > 0 are computed: the relu sets the others to 0.

    >>> linear_relu_backward([[1.0, 2.0]], [[3.0, 0.0]], [[1.0, 1.0], [5.0, 5.0]])
    ([[3.0, 0.0]], [[3.0, 6.0], [0.0, 0.0]], [1.0, 2.0])
    """
    check("linear_relu_backward(d_m: T m, act: T n, W2: n m)", d_m, act, W2)
    d_pre = [[fsum(map(mul, d_m_t, W2_row)) if z > 0.0 else 0.0
              for z, W2_row in zip(act_t, W2)] for d_m_t, act_t in zip(d_m, act)]
    return d_pre, matmul(transpose(act), d_m), column_sums(d_m)


################ Rows too large to square (you can skip this section)

def std_of_huge_row(centred):
    """√(variance + EPS) of a centred row whose squares overflow (entries beyond about 1e154).

    The row is divided by a power of two first, which is exact, so the squares stay finite:
    std = scale · √(variance of the scaled row + EPS / scale²). (check_layernorm keeps the
    values of a row to less than 2**1000 in all, so the centred ones are finite.)
    """
    scale = 2.0 ** math.frexp(max(map(abs, centred)))[1]
    scaled = [c / scale for c in centred]
    return scale * sqrt(fsum(c * c for c in scaled) / len(scaled) + EPS / scale / scale)


################ Input checks (you can skip this section)
#
# Each public function above checks its input in its first line, and refuses what would give
# a wrong answer or a raw IndexError: a ValueError or TypeError that names the argument, what
# it holds and what was expected. Most state their shapes as a dimension string; what one
# cannot say (a cache's keys, an ID's range, finite numbers) has a short check of its own.

ROWS, NUMBERS = {list, tuple}, {float, int}
HUGE = 2.0 ** 1000      # about 1e301: a row whose values add up to more could overflow a sum
SIGNATURES = {}         # each dimension string, read once: (function, [(argument, letters)])


def check(signature, *args):
    """Refuse args unless each has the shape the dimension string gives it: one letter per
    size, the same wherever it appears ("_": any size; "*ms": every argument). Returns the
    sizes. A size of 0 is refused; for T, as "empty sequence".

    >>> check("linear(x: T n, W: n m, b: m)", [[1.0, 2.0]], [[1.0], [2.0]], [0.5])
    {'T': 1, 'n': 2, 'm': 1}
    >>> check("linear(x: T n, W: n m, b: m)", [[1.0, 2.0]], [[1.0], [2.0]], [0.5, 0.5])
    Traceback (most recent call last):
    ValueError: linear: b has shape (2,), but it must be (m,) with m = 1, as in W
    """
    if signature not in SIGNATURES:
        who, _, rest = signature.rstrip(")").partition("(")
        SIGNATURES[signature] = who, [(name.strip(), letters.split()) for name, letters in
                                      (part.split(":") for part in rest.split(","))]
    who, params = SIGNATURES[signature]
    if params[0][0][0] == "*":
        params = [(f"{params[0][0][1:]}[{n}]", params[0][1]) for n in range(len(args))]
    sizes = {}
    for (name, letters), value in zip(params, args):
        found = dims(value, who, name, letters)
        for letter, n in zip(letters, found):
            if sizes.setdefault(letter, n) != n and letter != "_" or n == 0:
                raise ValueError(mismatch(who, name, letters, found, sizes, letter, params))
    return sizes


def mismatch(who, name, letters, found, sizes, letter, params):
    """Say which argument's shape does not fit, and why."""
    if found[letters.index(letter)] == 0:
        return "empty sequence" if letter == "T" else f"{who}: {name} is empty"
    first = next(other for other, other_letters in params if letter in other_letters)
    want = ", ".join(letters) + ("," if len(letters) == 1 else "")
    return (f"{who}: {name} has shape {found}, but it must be ({want}) with {letter} = "
            f"{sizes[letter]}, as in {first}")


def dims(value, who, name, want=None, numbers=False):
    """The shape of a vector (a list of numbers) or a matrix (a list of rows of one length);
    anything else, or another number of dimensions than want's, is refused for who. The
    numbers of a matrix are read only if numbers is true (shape() does; the math does not pay
    for it, and a row of anything else fails in its first product)."""
    found = None
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple)):
        try:
            widths = set(map(len, value))
        except TypeError:                   # a number among the rows
            widths = {}
        if len(widths) > 1:
            raise ValueError(f"{who}: {name} has rows of lengths {sorted(widths)}; a matrix's "
                             f"rows all have one length")
        if widths and (not numbers or set(map(type, chain.from_iterable(value))) <= NUMBERS):
            found = (len(value), *widths)
    elif isinstance(value, (list, tuple)) and set(map(type, value)) <= NUMBERS:
        found = (0, 0) if not value and want and len(want) == 2 else (len(value),)
    if found is None or want and len(found) != len(want):
        kind = ("a list of rows" if len(want) == 2 else "a list of numbers") if want else \
            "a list of numbers, or of rows of numbers"
        raise TypeError(f"{who}: {name} must be {kind}"
                        f"{' (' + ' '.join(want) + ')' if want else ''}, not {value!r:.50}")
    return found


def tensors(p, *names):
    """The parameters named, refusing a p that is not a dict holding them."""
    check_dict("the parameters", p)
    missing = [name for name in names if name not in p]
    if missing:
        raise ValueError(f"parameters missing: {', '.join(missing)}")
    return [p[name] for name in names]


def cached(cache, maker, *keys):
    """The entries of a cache that maker returned, refusing anything else."""
    if not isinstance(cache, dict) or not set(keys) <= set(cache):
        whole = " (the model's cache holds it as cache['att'])" if "att" in (cache or ()) else ""
        raise TypeError(f"expected the cache that {maker} returned, a dict with "
                        f"{', '.join(map(repr, keys))}{whole}")
    return [cache[key] for key in keys]


def check_dict(who, value):
    if not isinstance(value, dict):
        raise TypeError(f"{who} must be the dict of parameters init_params returns, "
                        f"not {type(value).__name__}")


def check_sizes(who, **sizes):
    """Refuse sizes that are not ints, or below 1 (a model's size) or 0 (a seed, zeros')."""
    for name, n in sizes.items():
        least = 1 if name in SIZES else 0       # random.Random(-3) would be Random(3)
        if type(n) is not int:                  # a seed of None would draw new numbers each time
            raise TypeError(f"{who}: {name} must be an int, not {n!r}")
        if n < least:
            raise ValueError(f"{who}: {name} must be at least {least}, not {n}")


def check_finite(who, name, rows):
    """Refuse rows holding anything but numbers, or inf, nan or values adding up beyond HUGE."""
    for t, row in enumerate(rows):
        try:
            total = sum(map(abs, row))          # a bound, not a result: sum() will do
        except TypeError:
            raise TypeError(f"{who}: {name} row {t} must hold numbers, not {row!r:.50}") from None
        if not total < HUGE:                    # nan fails it too
            raise ValueError(f"{who}: {name} row {t} holds inf, nan or a value beyond 1e301")


def check_layernorm(x, g, b):
    check("layernorm_forward(x: T d, g: d, b: d)", x, g, b)
    check_finite("layernorm_forward", "x", x)
    check_finite("layernorm_forward", "the gain (row 0) or bias (row 1)", [g, b])


def check_scores(scores):
    """Refuse scores softmax cannot weigh: nan, +inf, or a row of -inf only (all masked)."""
    check("softmax(scores: T n)", scores)
    for i, row in enumerate(scores):
        total = sum(row)    # a bound, not a result: nan if the row holds nan (or +inf and -inf)
        if total != total or total == math.inf or max(row) == -math.inf:
            raise ValueError(f"softmax: every score of row {i} is -inf: the causal mask hid every "
                             f"position, the row's own too" if max(row) == -math.inf else
                             f"softmax: row {i} of the scores holds nan or inf: {row!r:.60}")


def check_ids(ids, vocab, what):
    """Refuse anything but a list of ints in 0..vocab-1, naming up to five outside it."""
    if not isinstance(ids, (list, tuple)) or not set(map(type, ids)) <= {int}:
        raise TypeError(f"{what} must be a list of ints, not {ids!r:.50}"
                        + (" (encode the text first)" if isinstance(ids, str) else ""))
    outside = list(dict.fromkeys(i for i in ids if not 0 <= i < vocab))
    if outside:
        more = f" and {len(outside) - 5} more" if len(outside) > 5 else ""
        raise ValueError(f"{what} outside the vocabulary of size {vocab}: {outside[:5]}{more}")


PARAMS_SIGNATURE = f"parameters({', '.join(f'{n}: {s}' for n, s in PARAMETERS.items())})"


def numbers_of(p):
    """Every number of the parameters, tensor by tensor, row by row."""
    return chain.from_iterable(chain.from_iterable(p[name]) if " " in shape else p[name]
                               for name, shape in PARAMETERS.items())


def check_params(p):
    """Refuse anything but init_params' 18 tensors of one model size, holding finite numbers;
    return the sizes (V, P, d, H)."""
    sizes = check(PARAMS_SIGNATURE, *tensors(p, *PARAM_NAMES))
    if len(p) != len(PARAMETERS):
        raise ValueError(f"parameters with unknown names: {', '.join(set(p) - set(PARAMETERS))}")
    try:
        total = sum(map(abs, numbers_of(p)))    # a bound, not a result: sum() will do
    except TypeError:
        total = None
    if not (type(total) is float and total < HUGE):     # nan and inf fail it too
        name, row = next((name, row) for name in PARAM_NAMES for row in
                         (p[name] if " " in PARAMETERS[name] else [p[name]])
                         if not set(map(type, row)) <= NUMBERS or not sum(map(abs, row)) < HUGE)
        raise (ValueError if set(map(type, row)) <= NUMBERS else TypeError)(
            f"parameter {name} holds {row!r:.60}: parameters hold finite floats")
    return sizes


def fingerprint(p):
    """A hash of every number in p: forward stores it in its cache, and backward refuses a
    cache made when the parameters held other values (its gradients would be wrong)."""
    return hash(tuple(map(tuple, chain.from_iterable(p[name] if " " in shape else [p[name]]
                                                     for name, shape in PARAMETERS.items()))))


def check_forward(p, ids, use_positions):
    """Refuse parameters, token IDs or use_positions that forward cannot use."""
    sizes = check_params(p)
    if type(use_positions) is not bool:
        raise TypeError(f"use_positions must be True or False, not {use_positions!r}")
    check_ids(ids, sizes["V"], "token IDs")
    if len(ids) == 0:
        raise ValueError("empty sequence")
    if len(ids) > sizes["P"]:
        raise ValueError(f"sequence of {len(ids)} tokens is longer than the {sizes['P']} "
                         f"positions the model has")


def check_loss(logits, targets):
    """Refuse logits that are not T rows of V finite scores, or targets that do not fit them."""
    sizes = check("loss_and_dlogits(logits: T V)", logits)
    check_ids(targets, sizes["V"], "target IDs")
    if len(targets) != sizes["T"]:
        raise ValueError(f"{sizes['T']} positions but {len(targets)} targets")
    check_finite("loss_and_dlogits", "logits", logits)


def check_backward(p, cache, d_logits):
    """Refuse a cache forward(p, ids) did not return, or d_logits that do not fit it."""
    _, x0, act, made_with = cached(cache, "forward(p, ids)", "ids", "x0", "act", "params")
    check(f"backward({PARAMS_SIGNATURE[11:-1]}, x0: T d, act: T H, d_logits: T V)",
          *tensors(p, *PARAM_NAMES), x0, act, d_logits)
    if made_with != fingerprint(p):
        raise ValueError("the cache was made by forward with other parameter values: p has "
                         "changed since, so run forward(p, ids) again before backward")
