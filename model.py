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
(d_x1, d_W1). The sections at the end can be skipped: "Speed" (the one trick, leaving out
the products of a zero), "Rows too large to square", and "Input checks", where the check that
each public function calls in its first line lives.

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
from itertools import chain, compress
from math import exp, fsum, log, sqrt
from operator import mul

EPS = 1e-5  # added to the variance in layer norm, as torch.nn.LayerNorm does

PARAM_NAMES = ("tok_emb", "pos_emb", "ln1_g", "ln1_b", "Wq", "Wk", "Wv", "Wo",
               "ln2_g", "ln2_b", "W1", "b1", "W2", "b2", "lnf_g", "lnf_b", "W_out", "b_out")


################ List helpers

def shape(nested_list):
    """The shape of a vector or a matrix, as a tuple.

    >>> shape([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), shape([0.5, 0.25])
    ((2, 3), (2,))
    """
    check_shape(nested_list)
    if nested_list and isinstance(nested_list[0], (list, tuple)):
        return len(nested_list), len(nested_list[0])
    return (len(nested_list),)


def zeros(rows, cols):
    """A rows × cols matrix of 0.0.

    >>> zeros(2, 3)
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    check_zeros(rows, cols)
    return [[0.0] * cols for _ in range(rows)]


def transpose(m):
    """mᵀ: the columns of m, as rows.

    >>> transpose([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    """
    check_rows(m, "transpose()")
    return [list(col) for col in zip(*m)]


def matmul(a, b):
    """The product a · b of an (n, k) and a (k, m) matrix: (n, m), each entry a dot product
    rounded once.

    >>> matmul([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]])
    [[19.0, 22.0], [43.0, 50.0]]
    """
    check_matmul(a, b)
    b_cols = list(zip(*b))                          # made once, for every row of a
    return [[fsum(map(mul, row, col)) for col in b_cols] if all(row)
            else row_times_skipping_zeros(row, b)   # Speed: a row holding a 0.0, see there
            for row in a]


def add(*ms):
    """The elementwise sum of matrices of one shape, each entry rounded once.

    >>> add([[1.0, 2.0]], [[0.5, 0.25]], [[0.25, 0.25]])
    [[1.75, 2.5]]
    """
    check_add(ms)
    if len(ms) == 2:                                # two terms: a + b is rounded once
        return [[u + v for u, v in zip(row_a, row_b)] for row_a, row_b in zip(*ms)]
    return [[fsum(entries) for entries in zip(*rows)] for rows in zip(*ms)]


def column_sums(m):
    """The sum of each column of a matrix, rounded once.

    >>> column_sums([[0.1, 1.0], [0.2, 2.0], [0.3, 3.0]])
    [0.6, 6.0]
    """
    check_rows(m, "column_sums()")
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
    """Gradients of layer norm, given d_y: returns (d_x, d_g, d_b). With d_xhat = d_y · g, and
    because the mean and the std depend on every x of the row, each d_x has three terms:
        d_x = (d_xhat - mean(d_xhat) - xhat · mean(d_xhat · xhat)) / std
               term 1   term 2         term 3
    """
    check_layernorm_backward(d_y, g, cache)
    xhat, std = cache["xhat"], cache["std"]
    d = len(g)
    # 3. in the forward pass this was: y = xhat · g + b, row by row
    d_g = [fsum(map(mul, d_y_col, xhat_col)) for d_y_col, xhat_col in zip(zip(*d_y), zip(*xhat))]
    d_b = column_sums(d_y)                                         # (d)
    d_x = []
    for d_y_t, xhat_t, s in zip(d_y, xhat, std):                  # row t
        d_xhat = [d_y_j * g_j for d_y_j, g_j in zip(d_y_t, g)]
        # 2 and 1. xhat = (x - mean) / std: term 2 comes through the mean, term 3 the std
        term2 = fsum(d_xhat) / d
        term3 = fsum(map(mul, d_xhat, xhat_t)) / d
        # three terms, so fsum: (a - b - c) would round twice
        d_x.append([fsum((t1, -term2, -xhat_j * term3)) / s for t1, xhat_j in zip(d_xhat, xhat_t)])
    return d_x, d_g, d_b                                           # d_x: (T, d), d_g, d_b: (d)


################ Causal self-attention

def softmax(row):
    """exp(z) / Σ exp(z) for each z of row, computed as exp(z - max) / Σ exp(z - max): the
    same numbers, but exp cannot overflow. A score of -inf gets a weight of exactly 0.

    >>> softmax([1.0, 1.0, -math.inf])
    [0.5, 0.5, 0.0]
    """
    check_vector(row, "softmax")
    top = max(row)
    e = [exp(z - top) for z in row]
    total = fsum(e)
    return [e_j / total for e_j in e]


def softmax_backward(w, d_w):
    """Gradient of the scores z, given d_w, the gradient of w = softmax(z): each weight moves
    all the others (they sum to 1), so d_z_j = w_j · (d_w_j - Σ over k of w_k · d_w_k).

    >>> softmax_backward([0.5, 0.5, 0.0], [1.0, 0.0, 7.0])
    [0.25, -0.25, 0.0]
    """
    check_vector(w, "softmax_backward: w")
    check_vector(d_w, "softmax_backward: d_w", length=len(w))
    average = fsum(map(mul, w, d_w))                   # d_w averaged with the weights w
    return [w_j * (d_w_j - average) for w_j, d_w_j in zip(w, d_w)]


def attention_forward(p, x):
    """One head of causal self-attention over the rows of x (T, d): position i mixes the values
    of positions j ≤ i, weighted by how well its query fits their keys. Returns (out, cache)."""
    check_attention(p, x)
    T, sqrt_d = len(x), sqrt(len(x[0]))
    # 1. queries, keys, values
    q = matmul(x, p["Wq"])                                             # (T, d)
    k = matmul(x, p["Wk"])                                             # (T, d)
    v = matmul(x, p["Wv"])                                             # (T, d)
    # 2. scores q_i · k_j / √d, with the causal mask: -inf where j > i, never computed
    scores = [[fsum(map(mul, q[i], k[j])) / sqrt_d if j <= i else -math.inf
               for j in range(T)] for i in range(T)]                   # (T, T)
    # 3. weights: each row's softmax; a masked score's weight is exactly 0
    weights = [softmax(row) for row in scores]                         # (T, T)
    # 4. mix: mixed_i = Σ over j ≤ i of weights[i][j] · v_j
    mixed = matmul(weights, v)                                         # (T, d)
    # 5. projection
    out = matmul(mixed, p["Wo"])                                       # (T, d)
    return out, {"x": x, "q": q, "k": k, "v": v, "weights": weights, "mixed": mixed}


def attention_backward(p, cache, d_out):
    """Gradients of attention, given d_out: returns ({"Wq", "Wk", "Wv", "Wo"} gradients, d_x).
    The forward steps 1-5 walked back as 5, 4, 3, 2, 1."""
    check_attention_backward(p, cache, d_out)
    x, q, k, v = cache["x"], cache["q"], cache["k"], cache["v"]
    weights, mixed = cache["weights"], cache["mixed"]
    T, sqrt_d = len(x), sqrt(len(x[0]))
    # 5. in the forward pass this was: out = matmul(mixed, p["Wo"])
    d_Wo = matmul(transpose(mixed), d_out)                             # (d, d)
    d_mixed = matmul(d_out, transpose(p["Wo"]))                        # (T, d)
    # 4. mixed = matmul(weights, v): d_weights = d_mixed · vᵀ, d_v = weightsᵀ · d_mixed
    d_weights = [[fsum(map(mul, d_mixed[i], v[j])) if j <= i else 0.0  # masked: always 0
                  for j in range(T)] for i in range(T)]                # (T, T)
    d_v = matmul(transpose(weights), d_mixed)                          # (T, d)
    # 3. weights = [softmax(row) for row in scores]
    d_scores = [softmax_backward(w, d_w) for w, d_w in zip(weights, d_weights)]    # (T, T)
    # 2. scores[i][j] = q_i · k_j / √d: d_q = d_scores · k / √d, d_k = d_scoresᵀ · q / √d
    d_q = [[entry / sqrt_d for entry in row] for row in matmul(d_scores, k)]             # (T, d)
    d_k = [[entry / sqrt_d for entry in row] for row in matmul(transpose(d_scores), q)]  # (T, d)
    # 1. q = matmul(x, p["Wq"]), k and v alike: x fed all three, so d_x sums what comes back
    x_T = transpose(x)
    grads = {"Wq": matmul(x_T, d_q), "Wk": matmul(x_T, d_k), "Wv": matmul(x_T, d_v),
             "Wo": d_Wo}                                               # (d, d) each
    d_x = add(matmul(d_q, transpose(p["Wq"])), matmul(d_k, transpose(p["Wk"])),
              matmul(d_v, transpose(p["Wv"])))                         # (T, d)
    return grads, d_x


################ The model

def linear(x, W, b):
    """y = x · W + b for every row of x: (T, n) · (n, m) + (m) -> (T, m).

    >>> linear([[1.0, 2.0]], [[1.0, 0.0], [0.0, 1.0]], [0.5, -0.5])
    [[1.5, 1.5]]
    """
    check_linear(x, W, b)
    # the bias is added to a dot product already rounded: a sum of two terms
    return [[xw + bias for xw, bias in zip(row, b)] for row in matmul(x, W)]


def linear_backward(d_y, x, W):
    """Gradients of y = x · W + b, given d_y: returns (d_x, d_W, d_b).

    >>> linear_backward([[1.0, 2.0]], [[3.0]], [[4.0, 5.0]])
    ([[14.0]], [[3.0, 6.0]], [1.0, 2.0])
    """
    check_linear_backward(d_y, x, W)
    d_x = matmul(d_y, transpose(W))     # (T, n): each x reaches every y through W
    d_W = matmul(transpose(x), d_y)     # (n, m): a sum over the positions
    d_b = column_sums(d_y)              # (m): b is added at every position
    return d_x, d_W, d_b


def init_params(vocab, d, hidden, max_len, seed):
    """Fresh parameters: a dict of 18 tensors, in a fixed order.

    One random.Random(seed) draws gauss(0.0, 0.02) for every entry of the random matrices,
    row by row, matrix by matrix in the order tok_emb, pos_emb, Wq, Wk, Wv, Wo, W1, W2, W_out;
    gains start at 1.0 and biases at 0.0. Same seed, same numbers, on every Python version.

    >>> p = init_params(96, 16, 64, 64, seed=3)
    >>> count_params(p), shape(p["tok_emb"]), shape(p["W1"])
    (7440, (96, 16), (16, 64))
    """
    check_sizes(vocab=vocab, d=d, hidden=hidden, max_len=max_len, seed=seed)
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
    check_params_dict(params)
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
    return logits, {"ids": list(ids), "use_positions": use_positions, "x0": x0,
                    "h1": h1, "ln1": ln1, "att": att, "h2": h2, "ln2": ln2, "act": act,
                    "hf": hf, "lnf": lnf, "params": fingerprint(p)}    # see check_backward


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
        d_row = [e_j / (total * T) for e_j in e]         # softmax / T
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
    d_act, grads["W2"], grads["b2"] = linear_backward(d_m, act, p["W2"])
    #    relu: act = max(0, pre), so the gradient passes only where act > 0
    d_pre = [[d_z if z > 0.0 else 0.0 for d_z, z in zip(d_act_t, act_t)]
             for d_act_t, act_t in zip(d_act, act)]                            # (T, H)
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

def row_times_skipping_zeros(row, b):
    """Speed: row · b without the terms where row's entry is 0.0. matmul sends it each row that
    holds a 0.0, in place of that row's [fsum(map(mul, row, col)) for col in b_cols].

    A zero term adds nothing to a sum (for finite b), so the result is the same. The relu makes
    about half of the MLP's hidden values 0.0 and the causal mask half of the attention weights:
    their products are never made.

    >>> row_times_skipping_zeros([0.0, 2.0], [[5.0, 6.0], [7.0, 8.0]])
    [14.0, 16.0]
    """
    kept = list(compress(row, row))                     # the entries that are not 0.0
    if not kept:
        return [0.0] * len(b[0])
    return [fsum(map(mul, kept, col)) for col in zip(*compress(b, row))]   # b's rows they meet


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
# Each public function above opens with one call to a check below. The checks read the
# lengths and types of what they are given and refuse anything that would give a wrong answer
# or a raw IndexError: a ValueError or TypeError whose message says what was wrong.

ROWS = {list, tuple}


def is_matrix(m):
    """Whether m is a list (or tuple) of rows that are lists (or tuples)."""
    return isinstance(m, (list, tuple)) and set(map(type, m)) <= ROWS


def dims(m):
    """The shape of a list of rows for a message, even if its rows are ragged.

    >>> dims([[1.0, 2.0]]), dims([[1.0], [2.0, 3.0]]), dims(None)
    ('(1, 2)', '2 rows of lengths [1, 2]', 'NoneType')
    """
    if not is_matrix(m):
        return type(m).__name__
    widths = sorted({len(row) for row in m})
    return f"({len(m)}, {widths[0]})" if len(widths) == 1 else f"{len(m)} rows of lengths {widths}"


def check_rows(m, who):
    """The length of m's rows (0 if it has none), refusing anything but a matrix of rows of
    one length on behalf of `who`: zip() and map() would quietly stop at the shortest.

    >>> check_rows([[1.0, 2.0], [3.0, 4.0]], "add()")
    2
    """
    if not is_matrix(m):
        raise TypeError(f"{who} needs a matrix (a list of rows), not {type(m).__name__}")
    widths = set(map(len, m))
    if len(widths) > 1:
        raise ValueError(f"{who} needs rows of one length, not {sorted(widths)}")
    return widths.pop() if widths else 0


def check_vector(v, who, length=None):
    """Refuse anything but a non-empty list of numbers (of the given length) for `who`."""
    if not isinstance(v, (list, tuple)) or not v or not set(map(type, v)) <= NUMBERS:
        raise TypeError(f"{who} needs a non-empty list of numbers, not {v!r:.40}")
    if length is not None and len(v) != length:
        raise ValueError(f"{who} has {len(v)} entries, not {length}")


def check_shape(x):
    """Refuse anything shape() cannot describe."""
    if not isinstance(x, (list, tuple)):
        raise TypeError(f"shape() takes a list or a list of lists, not {type(x).__name__}")
    rows = [isinstance(v, (list, tuple)) for v in x]
    if any(rows) and not all(rows):
        raise ValueError("shape() needs a vector of numbers or a list of rows, not a mix")
    if any(rows) and any(isinstance(v, (list, tuple)) for row in x for v in row):
        raise ValueError("shape() takes a vector or a matrix, not lists nested three deep")
    if any(rows) and len({len(row) for row in x}) != 1:
        raise ValueError("shape() needs rows of one length; these rows are ragged")


def check_zeros(rows, cols):
    """Refuse sizes zeros() cannot make."""
    for n in (rows, cols):
        if type(n) is not int:
            raise TypeError(f"zeros() needs int sizes, not {type(n).__name__}")
    if rows < 0 or cols < 0:
        raise ValueError(f"zeros() needs sizes of at least 0, not {rows} × {cols}")


def check_matmul(a, b):
    """Refuse a and b unless a · b is defined: rows of a as long as b has rows."""
    n = check_rows(a, "matmul: a")
    m = check_rows(b, "matmul: b")
    if not b or m == 0:
        raise ValueError(f"matmul: b must have at least one row and one column, "
                         f"not shape {shape(b)}")
    if a and n != len(b):
        raise ValueError(f"matmul: the rows of a have {n} entries but b has {len(b)} rows; "
                         f"a · b needs them equal")


def check_add(ms):
    """Refuse matrices that are not all of one shape."""
    count = {2: "two", 3: "three"}.get(len(ms), str(len(ms)))
    if not ms:
        raise ValueError("add() needs at least one matrix")
    widths = [check_rows(m, f"add(): matrix {n + 1}") for n, m in enumerate(ms)]
    if len({len(m) for m in ms}) > 1 or len(set(widths)) > 1:
        shapes = " and ".join(str((len(m), w)) for m, w in zip(ms, widths))
        raise ValueError(f"add() needs {count} matrices of one shape, not {shapes}")


def check_linear(x, W, b):
    """Refuse x, W and b unless x · W + b is defined."""
    n, m = check_rows(x, "linear: x"), check_rows(W, "linear: W")
    if not isinstance(b, (list, tuple)):
        raise TypeError(f"linear: b must be a vector (a list of numbers), not {type(b).__name__}")
    if not W or len(b) != m or (x and n != len(W)):
        raise ValueError(f"linear needs x (T, n), W (n, m) and b (m), not x {(len(x), n)}, "
                         f"W {(len(W), m)} and b ({len(b)},)")


def check_linear_backward(d_y, x, W):
    """Refuse d_y, x and W unless they fit one linear layer y = x · W + b."""
    m_y = check_rows(d_y, "linear_backward: d_y")
    n, m = check_rows(x, "linear_backward: x"), check_rows(W, "linear_backward: W")
    if not W or len(d_y) != len(x) or (d_y and (m_y != m or n != len(W))):
        raise ValueError(f"linear_backward needs d_y (T, m), x (T, n) and W (n, m), not "
                         f"d_y {(len(d_y), m_y)}, x {(len(x), n)} and W {(len(W), m)}")


HUGE = 2.0 ** 1000      # about 1e301: a row beyond it could overflow the sum of its values


def check_layernorm(x, g, b):
    """Refuse x, g and b unless each row of x has as many values as g and b, all finite."""
    for name, v in (("gain", g), ("bias", b)):
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"layer norm {name} must be a list of numbers, not {type(v).__name__}")
    d = len(g)
    if d == 0:
        raise ValueError("layer norm needs a gain and a bias of at least one entry, not 0")
    if len(b) != d:
        raise ValueError(f"layer norm gain has {d} entries but bias has {len(b)}")
    if not is_matrix(x):
        raise TypeError(f"layer norm needs x as a matrix (a list of rows), not {type(x).__name__}")
    for t, row in enumerate(x):
        if len(row) != d:
            raise ValueError(f"layer norm over rows of {len(row)} values, but the gain has {d}")
        if not sum(map(abs, row)) < HUGE:          # False for inf and nan too
            raise ValueError(f"layer norm: row {t} of x holds inf, nan or a value beyond 1e301")


def check_layernorm_backward(d_y, g, cache):
    """Refuse a cache layernorm_forward did not make, or d_y and g that do not fit it."""
    if not isinstance(cache, dict) or "xhat" not in cache or "std" not in cache:
        raise TypeError("layernorm_backward needs the cache its layernorm_forward returned "
                        "(a dict with 'xhat' and 'std')")
    xhat, std = cache["xhat"], cache["std"]
    d = check_rows(xhat, "layernorm_backward: the cache's xhat")
    if len(std) != len(xhat):
        raise ValueError(f"layernorm_backward: the cache holds {len(xhat)} rows but "
                         f"{len(std)} standard deviations")
    width = check_rows(d_y, "layernorm_backward: d_y")
    if not isinstance(g, (list, tuple)):
        raise TypeError(f"layernorm_backward: g must be a list of numbers, not {type(g).__name__}")
    if len(d_y) != len(xhat) or width != d or len(g) != d or not d_y:
        raise ValueError(f"layernorm_backward: d_y is {(len(d_y), width)} and g has {len(g)} "
                         f"entries, but the forward pass normalized {(len(xhat), d)}")


def check_attention_weights(p, d):
    """Refuse p unless it holds Wq, Wk, Wv and Wo, each d × d for rows of d values."""
    if not isinstance(p, dict):
        raise TypeError(f"attention needs the dict of parameters, not {type(p).__name__}")
    for name in ("Wq", "Wk", "Wv", "Wo"):
        if name not in p:
            raise ValueError(f"attention needs p[{name!r}], which is missing")
        width = check_rows(p[name], f"attention: {name}")
        if (len(p[name]), width) != (d, d):
            raise ValueError(f"attention over rows of {d} values needs {name} of shape "
                             f"({d}, {d}), not {(len(p[name]), width)}")


def check_attention(p, x):
    """Refuse x unless it is a non-empty matrix whose width fits p's attention weights."""
    if isinstance(x, (list, tuple)) and not x:
        raise ValueError("empty sequence")
    if not is_matrix(x):
        raise TypeError(f"attention needs x as a matrix (a list of rows), not {type(x).__name__}")
    if len({len(row) for row in x}) > 1:
        raise ValueError(f"attention needs rows of one width, not {sorted({len(r) for r in x})}")
    check_attention_weights(p, len(x[0]))


def check_attention_backward(p, cache, d_out):
    """Refuse a cache attention_forward did not make, or a d_out that does not fit it."""
    if not isinstance(cache, dict) or not {"x", "q", "k", "v", "weights", "mixed"} <= set(cache):
        raise TypeError("attention_backward needs the cache attention_forward returned "
                        "(in the model's cache: cache['att'])")
    T, d = len(cache["x"]), len(cache["x"][0])
    check_attention_weights(p, d)
    if not is_matrix(d_out) or len(d_out) != T or any(len(row) != d for row in d_out):
        raise ValueError(f"d_out must have shape ({T}, {d}) to match the forward pass, "
                         f"not {dims(d_out)}")


def check_sizes(vocab, d, hidden, max_len, seed):
    """Refuse model sizes that are not positive ints, and a seed that is not an int >= 0."""
    for name, n in (("vocab", vocab), ("d", d), ("hidden", hidden), ("max_len", max_len)):
        if type(n) is not int:
            raise TypeError(f"{name} must be an int, not {type(n).__name__}")
        if n <= 0:
            raise ValueError(f"{name} must be a positive size, not {n}")
    if type(seed) is not int:   # None would draw fresh numbers each call; "3" others than 3
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if seed < 0:                # random.Random(-3) is random.Random(3): refuse, don't surprise
        raise ValueError(f"seed must be 0 or more, not {seed}")


def check_params_dict(params):
    """Refuse anything but a dict of tensors (count_params)."""
    if not isinstance(params, dict):
        raise TypeError(f"count_params takes the dict of parameters, not {type(params).__name__}")
    for name, t in params.items():
        shape(t)


def check_ids(ids, vocab, what="token IDs"):
    """Refuse anything but a list of ints in 0..vocab-1, naming what is wrong."""
    if isinstance(ids, str):
        raise TypeError(f"{what} must be a list of ints, not a str (encode text to IDs first)")
    if not isinstance(ids, (list, tuple)):
        raise TypeError(f"{what} must be a list of ints, not {type(ids).__name__}")
    for t, i in enumerate(ids):
        if type(i) is not int:
            raise TypeError(f"{what} must be ints, but position {t} holds {i!r} "
                            f"({type(i).__name__})")
    bad = []
    for i in ids:
        if not 0 <= i < vocab and i not in bad:
            bad.append(i)
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise ValueError(f"{what} outside the vocabulary of size {vocab}: {bad[:5]}{more}")


NUMBERS = {float, int}


def check_params(p, numbers=True):
    """Refuse anything but init_params' 18 tensors of one model size, holding numbers (their
    types are read only if numbers is true: backward relies on forward's reading, through
    the fingerprint)."""
    if not isinstance(p, dict):
        raise TypeError(f"parameters must be the dict init_params returns, "
                        f"not {type(p).__name__}")
    missing = [name for name in PARAM_NAMES if name not in p]
    if missing:
        raise ValueError(f"parameters missing: {', '.join(missing)}")
    unknown = [name for name in p if name not in PARAM_NAMES]
    if unknown:
        raise ValueError(f"parameters with unknown names: {', '.join(map(str, unknown))}")
    tensors = [p[name] for name in PARAM_NAMES]
    for name, t in zip(PARAM_NAMES, tensors):
        if not isinstance(t, (list, tuple)) or not t:
            raise TypeError(f"parameter {name} must be a non-empty list, not {t!r:.40}")
    V, d, L, H = len(p["tok_emb"]), len(p["tok_emb"][0]), len(p["pos_emb"]), len(p["W1"][0])
    wanted = [(V, d), (L, d), (d,), (d,), (d, d), (d, d), (d, d), (d, d), (d,), (d,),
              (d, H), (H,), (H, d), (d,), (d,), (d,), (d, V), (V,)]   # PARAM_NAMES' order
    for name, t, want in zip(PARAM_NAMES, tensors, wanted):
        got = (len(t), len(t[0])) if isinstance(t[0], (list, tuple)) else (len(t),)
        if got != want:
            raise ValueError(f"parameter {name} has shape {got}, but tok_emb, pos_emb and W1 "
                             f"make a model of V={V}, d={d}, H={H}, max_len={L}, where {name} "
                             f"is {want}")
        if len(want) == 2 and not (is_matrix(t) and set(map(len, t)) == {want[1]}):
            raise ValueError(f"parameter {name} has rows of different lengths; each row of "
                             f"{name} must hold {want[1]} numbers")
        numbers_of_t = chain.from_iterable(t) if len(want) == 2 else t
        if numbers and not set(map(type, numbers_of_t)) <= NUMBERS:
            check_numbers(name, t)


def check_numbers(name, t):
    """Refuse a tensor holding anything but ints and floats, naming the first such entry."""
    for r, row in enumerate(t if isinstance(t[0], (list, tuple)) else [t]):
        for c, v in enumerate(row):
            if type(v) not in NUMBERS:
                where = f"[{r}][{c}]" if isinstance(t[0], (list, tuple)) else f"[{c}]"
                raise TypeError(f"parameter {name}{where} is {v!r:.40} ({type(v).__name__}); "
                                f"parameters hold floats")


def fingerprint(p):
    """A hash of every number in p: forward stores it in its cache, and backward refuses a
    cache made when the parameters held other values (its gradients would be wrong)."""
    return hash(tuple(tuple(map(tuple, p[name])) if is_matrix(p[name]) else tuple(p[name])
                      for name in PARAM_NAMES))


def check_forward(p, ids, use_positions):
    """Refuse parameters, token IDs or use_positions that forward cannot use."""
    check_params(p)
    if type(use_positions) is not bool:
        raise TypeError(f"use_positions must be True or False, "
                        f"not {type(use_positions).__name__}")
    check_ids(ids, len(p["tok_emb"]))
    if len(ids) == 0:
        raise ValueError("empty sequence")
    if len(ids) > len(p["pos_emb"]):
        raise ValueError(f"sequence of {len(ids)} tokens is longer than the {len(p['pos_emb'])} "
                         f"positions the model has")


def check_loss(logits, targets):
    """Refuse logits that are not T rows of V finite scores, or targets that do not fit them."""
    if not isinstance(logits, list) or not all(isinstance(r, list) for r in logits):
        raise TypeError("logits must be a list of rows (lists of floats)")
    T = len(logits)
    if T == 0:
        raise ValueError("empty sequence")
    vocab = len(logits[0])
    check_ids(targets, vocab, what="target IDs")
    if len(targets) != T:
        raise ValueError(f"{T} positions but {len(targets)} targets")
    for t, row in enumerate(logits):
        if len(row) != vocab:
            raise ValueError(f"logits rows must all have {vocab} scores, not {len(row)}")
        if not all(map(math.isfinite, row)):
            raise ValueError(f"logits at position {t} are not all finite numbers")


def check_backward(p, cache, d_logits):
    """Refuse a cache forward(p, ids) did not return, or d_logits that do not fit it."""
    check_params(p, numbers=False)
    needed = {"ids", "use_positions", "x0", "ln1", "att", "ln2", "h2", "act", "lnf", "hf",
              "params"}
    if not isinstance(cache, dict) or not needed <= set(cache):
        raise TypeError("backward needs the cache that forward(p, ids) returned with the logits")
    ids = cache["ids"]
    T, vocab = len(ids), len(p["tok_emb"])
    check_ids(ids, vocab, what="the cache's token IDs")
    made = (len(cache["x0"][0]), len(cache["act"][0]))        # (d, H) of the forward pass
    if made != (len(p["b2"]), len(p["b1"])) or T > len(p["pos_emb"]):
        raise ValueError(f"the cache comes from a model of width {made[0]} and hidden {made[1]} "
                         f"on {T} positions, not from p (width {len(p['b2'])}, hidden "
                         f"{len(p['b1'])}, {len(p['pos_emb'])} positions)")
    if cache["params"] != fingerprint(p):
        raise ValueError("the cache was made by forward with other parameter values: p has "
                         "changed since, so run forward(p, ids) again before backward")
    if not isinstance(d_logits, list) or not all(isinstance(row, list) for row in d_logits):
        raise TypeError("d_logits must be a list of rows (lists of floats), as "
                        "loss_and_dlogits returns")
    if len(d_logits) != T or any(len(row) != vocab for row in d_logits):
        raise ValueError(f"d_logits must have shape ({T}, {vocab}) to match the forward pass, "
                         f"not {dims(d_logits)}")
