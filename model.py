"""A one-block transformer language model in plain Python, with its backward pass written by hand.

For token IDs `ids` of length T the model computes

    x0     = tok_emb[ids] + pos_emb[0:T]          token plus position embeddings
    x1     = x0 + Attention(LN1(x0))              skip path around attention
    x2     = x1 + MLP(LN2(x1))                    skip path around the MLP
    logits = LNF(x2) · W_out + b_out              a score for every token at every position

and `backward` walks the same lines in reverse, giving a gradient for every parameter.

The file reads top-down: list helpers, layer normalization, causal self-attention, then the
whole model (parameters, forward, loss, backward). Each backward mirrors its forward, step by
step in reverse order, and every gradient is named d_ + the forward name (d_x1, d_W1).

Shapes, in comments where each matrix is made:
    T  positions in the sequence (1..max_len)     d  width of the model (16)
    H  hidden width of the MLP (4·d = 64)         V  vocabulary size (96)
Matrices are lists of rows (row-major lists of lists of floats); vectors are lists of floats.

Every floating-point sum of more than two terms goes through math.fsum, which rounds the exact
sum once. Its result does not depend on the order of the terms (so two sequences holding the
same tokens in another order give bit-identical scores at the last position when positions
are left out), and it has not changed between Python versions (built-in sum() of floats did,
in 3.12), so the recorded trace is byte-identical on every Python from 3.10. (A bias is added
to a dot product after its sum is rounded: that addition is a sum of two terms.)

But: one sequence at a time (a training step loops over a batch), one attention head, no
dropout, no tied embeddings. The lines shaped for speed say so in a "Speed:" comment.
Standard library only.
"""
import math
import random
from itertools import compress
from math import exp, fsum, sqrt
from operator import mul

EPS = 1e-5  # added to the variance in layer norm, as torch.nn.LayerNorm does

PARAM_NAMES = ("tok_emb", "pos_emb", "ln1_g", "ln1_b", "Wq", "Wk", "Wv", "Wo",
               "ln2_g", "ln2_b", "W1", "b1", "W2", "b2", "lnf_g", "lnf_b", "W_out", "b_out")


################ List helpers

def shape(x):
    """The shape of a vector or a matrix (a list of equally long rows), as a tuple.

    >>> shape([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    (2, 3)
    >>> shape([0.5, 0.25])
    (2,)
    """
    if not isinstance(x, (list, tuple)):
        raise TypeError(f"shape() takes a list or a list of lists, not {type(x).__name__}")
    if not x or not isinstance(x[0], (list, tuple)):
        if any(isinstance(v, (list, tuple)) for v in x):
            raise ValueError("shape() needs a vector of numbers or a list of rows, not a mix")
        return (len(x),)
    if x[0] and isinstance(x[0][0], (list, tuple)):
        raise ValueError("shape() takes a vector or a matrix, not lists nested three deep")
    widths = {len(row) if isinstance(row, (list, tuple)) else None for row in x}
    if len(widths) != 1:
        raise ValueError("shape() needs rows of one length; these rows are ragged")
    return (len(x), len(x[0]))


def zeros(rows, cols):
    """A rows × cols matrix of 0.0.

    >>> zeros(2, 3)
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    if rows < 0 or cols < 0:
        raise ValueError(f"zeros() needs sizes of at least 0, not {rows} × {cols}")
    return [[0.0] * cols for _ in range(rows)]


def width(m, who):
    """The length of the rows of m (0 if it has none), refusing rows of different lengths on
    behalf of `who`: zip() and map() would quietly stop at the shortest.

    >>> width([[1.0, 2.0], [3.0, 4.0]], "add()")
    2
    """
    widths = {len(row) for row in m}
    if len(widths) > 1:
        raise ValueError(f"{who} needs rows of one length, not {sorted(widths)}")
    return widths.pop() if widths else 0


def transpose(m):
    """The columns of a matrix, as tuples (a transposed copy).

    >>> transpose([[1, 2, 3], [4, 5, 6]])
    [(1, 4), (2, 5), (3, 6)]
    """
    width(m, "transpose()")
    return list(zip(*m))


def matmul(a, b_cols):
    """The product a · b, given b by its columns; each entry is a correctly rounded dot product.

    Passing columns lets one transpose serve every row of a. To multiply by the transpose of a
    matrix W, pass W itself: its rows are the columns of Wᵀ.

    >>> matmul([[1.0, 2.0], [3.0, 4.0]], transpose([[5.0, 6.0], [7.0, 8.0]]))
    [[19.0, 22.0], [43.0, 50.0]]
    """
    # map() would stop at the shorter of row and col, so a mismatch must be refused here. The
    # last row is the longest: a causal a (row i holding i + 1 entries) ends with a full row.
    if a and b_cols and len(a[-1]) != width(b_cols, "matmul: b_cols"):
        raise ValueError(f"matmul: the rows of a have {len(a[-1])} entries but the columns of b "
                         f"have {len(b_cols[0])}; pass b by its columns, transpose(b)")
    # Speed: fsum(map(mul, ...)) written out, not through a dot() helper, saves a call per entry.
    return [[fsum(map(mul, row, col)) for col in b_cols] for row in a]


def add(a, b):
    """The elementwise sum of two matrices of one shape.

    >>> add([[1.0, 2.0]], [[0.5, 0.25]])
    [[1.5, 2.25]]
    """
    if len(a) != len(b) or width(a, "add(): a") != width(b, "add(): b"):
        raise ValueError(f"add() needs two matrices of one shape, not {shape(a)} and {shape(b)}")
    return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def column_sums(m):
    """The correctly rounded sum of each column of a matrix.

    >>> column_sums([[0.1, 1.0], [0.2, 2.0], [0.3, 3.0]])
    [0.6, 6.0]
    """
    width(m, "column_sums()")
    return [fsum(col) for col in zip(*m)]


def matmul_skipping_zeros(a, b):
    """The product a · b, leaving out the terms where a's entry is 0.0. Unlike matmul, this
    takes b itself (by its rows), because it picks the rows of b that a's nonzero entries meet.

    A zero term adds nothing to a sum, so the result is the same; the relu makes about half
    of the MLP's hidden values 0.0, and this skips their products.

    >>> matmul_skipping_zeros([[0.0, 2.0], [0.0, 0.0]], [[5.0, 6.0], [7.0, 8.0]])
    [[14.0, 16.0], [0.0, 0.0]]
    """
    n, m = width(a, "matmul_skipping_zeros: a"), width(b, "matmul_skipping_zeros: b")
    if not b or (a and n != len(b)):             # compress() would stop at the shorter one
        raise ValueError(f"matmul_skipping_zeros: the rows of a have {n} entries but b has "
                         f"{len(b)} rows")
    out = []
    for row in a:
        values = list(compress(row, row))            # the entries that are not 0.0 (false)
        if not values:
            out.append([0.0] * m)
            continue
        b_cols = zip(*compress(b, row))              # the columns of the rows of b they meet
        # Speed: the skipped products are those of the relu's zeros, about half of them
        out.append([fsum(map(mul, values, col)) for col in b_cols])
    return out


def linear(x, W, b):
    """x · W + b for every row of x: (T, n) · (n, m) + (m) -> (T, m).

    >>> linear([[1.0, 2.0]], [[1.0, 0.0], [0.0, 1.0]], [0.5, -0.5])
    [[1.5, 1.5]]
    """
    if not W or len(b) != width(W, "linear: W") or (x and width(x, "linear: x") != len(W)):
        raise ValueError(f"linear needs x (T, n), W (n, m) and b (m), not x {shape(x)}, "
                         f"W {shape(W)} and b ({len(b)},)")
    W_cols = transpose(W)
    # the dot product is one correctly rounded sum; the bias is added to it (two terms)
    return [[fsum(map(mul, row, col)) + bias for col, bias in zip(W_cols, b)] for row in x]


def linear_backward(d_y, x, W):
    """Gradients of y = x · W + b: returns (d_x, d_W, d_b).

    d_x = d_y · Wᵀ, d_W = xᵀ · d_y (a sum over positions), d_b = the column sums of d_y.

    >>> linear_backward([[1.0, 2.0]], [[3.0]], [[4.0, 5.0]])
    ([[14.0]], [[3.0, 6.0]], [1.0, 2.0])
    """
    if not W or len(d_y) != len(x) or (d_y and (len(d_y[0]) != len(W[0]) or len(x[0]) != len(W))):
        raise ValueError(f"linear_backward needs d_y (T, m), x (T, n) and W (n, m), not "
                         f"d_y {shape(d_y)}, x {shape(x)} and W {shape(W)}")
    d_y_cols = transpose(d_y)
    d_x = matmul(d_y, W)                          # (T, n): W's rows are the columns of Wᵀ
    d_W = matmul(transpose(x), d_y_cols)          # (n, m)
    d_b = [fsum(col) for col in d_y_cols]         # (m)
    return d_x, d_W, d_b


def masked_matmul(a, b_cols, where):
    """Like matmul(a, b_cols), but only the entries where `where` is > 0; the others are 0.0.

    This is the backward of a relu fused with the product before it: the gradient passes
    only where the relu's output was > 0, and the entries it would zero are never computed.

    >>> masked_matmul([[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]], where=[[0.5, 0.0]])
    [[11.0, 0.0]]
    """
    if a and (len(where) != len(a) or width(where, "masked_matmul: where") != len(b_cols)
              or width(a, "masked_matmul: a") != width(b_cols, "masked_matmul: b_cols")):
        # zip() and map() would cut them short
        raise ValueError(f"masked_matmul needs a (T, n), b_cols (m, n) and where (T, m), not "
                         f"a {shape(a)}, b_cols {shape(b_cols)} and where {shape(where)}")
    # Speed: the entries the relu zeroes are never computed (about half of them)
    return [[fsum(map(mul, row, col)) if keep > 0.0 else 0.0
             for keep, col in zip(keep_row, b_cols)]
            for row, keep_row in zip(a, where)]


def causal_mix_backward(a, b):
    """aᵀ · b for a causal a given by its rows, row i holding at least a[i][0..i] (entries
    past the diagonal, if any, are never read): row j of the result is the sum over the later
    positions i ≥ j of a[i][j] · b[i].

    This is how gradient flows back to the keys and values: position j was seen by every
    position i ≥ j, so it collects from each of them.

    >>> causal_mix_backward([[1.0], [2.0, 3.0]], [[10.0], [100.0]])
    [[210.0], [300.0]]
    """
    T = len(a)
    if len(b) != T:
        raise ValueError(f"causal_mix_backward: a has {T} rows but b has {len(b)}")
    for i, row in enumerate(a):
        if len(row) <= i:
            raise ValueError(f"causal_mix_backward: row {i} of a must hold a[{i}][0..{i}], "
                             f"but it has {len(row)} entries")
    b_cols = transpose(b)
    out = []
    for j in range(T):
        a_col = [a[i][j] for i in range(j, T)]                     # a[i][j] for i = j .. T-1
        out.append([fsum(map(mul, a_col, col[j:])) for col in b_cols])
    return out


################ Layer normalization

def layernorm_forward(x, g, b):
    """Normalize each row of x to mean 0 and variance 1, then scale by g and shift by b.

    out = (x - mean) / sqrt(var + EPS) * g + b, with the biased variance (divide by d), as in
    torch.nn.LayerNorm. Returns (out, cache).

    >>> out, _ = layernorm_forward([[1.0, 3.0]], [1.0, 1.0], [0.0, 0.0])
    >>> [round(v, 4) for v in out[0]]
    [-1.0, 1.0]
    """
    d = len(g)
    if d == 0:
        raise ValueError("layer norm needs a gain and a bias of at least one entry, not 0")
    if len(b) != d:
        raise ValueError(f"layer norm gain has {d} entries but bias has {len(b)}")
    out, xhat, std = [], [], []
    for row in x:
        if len(row) != d:
            raise ValueError(f"layer norm over rows of {len(row)} values, but the gain has {d}")
        mean = fsum(row) / d
        centred = [v - mean for v in row]
        s = sqrt(fsum(map(mul, centred, centred)) / d + EPS)      # sqrt(var + EPS)
        xh = [c / s for c in centred]                              # (d): mean 0, variance ~1
        xhat.append(xh)
        std.append(s)
        out.append([v * gi + bi for v, gi, bi in zip(xh, g, b)])
    return out, {"xhat": xhat, "std": std}                         # out: (T, d)


def layernorm_backward(dy, g, cache):
    """Gradients of layer norm: returns (d_x, d_g, d_b) for dy, the gradient of its output.

    In the forward pass this was: xhat = (x - mean) / std, out = xhat * g + b. So now
    d_xhat = dy * g, and because mean and std depend on every x of the row, each input's
    gradient has three terms:
        d_x = (d_xhat - mean(d_xhat) - xhat * mean(d_xhat * xhat)) / std
               term 1   term 2          term 3
    """
    if not isinstance(cache, dict) or "xhat" not in cache or "std" not in cache:
        raise TypeError("layernorm_backward needs the cache its layernorm_forward returned "
                        "(a dict with 'xhat' and 'std')")
    xhat, std = cache["xhat"], cache["std"]
    d = len(g)
    if len(std) != len(xhat):
        raise ValueError(f"layernorm_backward: the cache holds {len(xhat)} rows but "
                         f"{len(std)} standard deviations")
    if len(dy) != len(xhat) or (xhat and (len(dy[0]) != d or len(xhat[0]) != d)):
        raise ValueError(f"layernorm_backward: dy is {shape(dy)} and g has {d} entries, but the "
                         f"forward pass normalized {shape(xhat)}")
    dy_cols = transpose(dy)
    d_g = [fsum(map(mul, dc, xc)) for dc, xc in zip(dy_cols, transpose(xhat))]   # (d)
    d_b = [fsum(col) for col in dy_cols]                                          # (d)
    d_x = []
    for dy_row, xh, s in zip(dy, xhat, std):
        d_xh = [v * gi for v, gi in zip(dy_row, g)]
        term2 = fsum(d_xh) / d
        term3 = fsum(map(mul, d_xh, xh)) / d
        # three terms, so fsum: (a - b - c) would round twice
        d_x.append([fsum((t1, -term2, -x * term3)) / s for t1, x in zip(d_xh, xh)])
    return d_x, d_g, d_b                                                           # d_x: (T, d)


################ Causal self-attention

def check_attention_params(p, d):
    """Refuse p unless it holds Wq, Wk, Wv and Wo, each d × d for rows of d values."""
    for name in ("Wq", "Wk", "Wv", "Wo"):
        if name not in p:
            raise ValueError(f"attention needs p[{name!r}], which is missing")
        if len(p[name]) != d or (d and len(p[name][0]) != d):
            raise ValueError(f"attention over rows of {d} values needs {name} of shape "
                             f"({d}, {d}), not {shape(p[name])}")


def attention_forward(p, x):
    """One head of causal self-attention over the rows of x (T, d). Returns (out, cache).

    1. queries, keys, values: q = x·Wq, k = x·Wk, v = x·Wv
    2. scores: s[i][j] = q_i · k_j / sqrt(d), only for j <= i (position i never sees a later j)
    3. weights: softmax of each row of scores
    4. mix: mixed_i = sum over j <= i of weights[i][j] * v_j
    5. projection: out = mixed · Wo
    """
    if not x:
        raise ValueError("empty sequence")
    T, d = len(x), len(x[0])
    if any(len(row) != d for row in x):
        raise ValueError(f"attention needs rows of one width, not {sorted({len(r) for r in x})}")
    check_attention_params(p, d)
    sqrt_d = sqrt(d)
    # 1. queries, keys, values
    q = matmul(x, transpose(p["Wq"]))                              # (T, d)
    k = matmul(x, transpose(p["Wk"]))                              # (T, d)
    v = matmul(x, transpose(p["Wv"]))                              # (T, d)
    weights = []                                                   # row i: weights[i][0..i]
    for i, q_i in enumerate(q):
        # 2. scores. The causal mask: the usual way fills s[i][j] for j > i with -inf, whose
        # exp is 0; here those scores are simply never computed, and their weights are 0.
        # Speed: so nothing is spent on the T(T - 1)/2 scores the mask would hide.
        s = [fsum(map(mul, q_i, k_j)) / sqrt_d for k_j in k[:i + 1]]      # (i + 1)
        # 3. softmax, after subtracting the row maximum so that exp() cannot overflow
        top = max(s)
        e = [exp(z - top) for z in s]
        total = fsum(e)
        weights.append([z / total for z in e])                     # (i + 1), sums to 1
    # 4. mix: map() stops at the shorter argument, so row i multiplies only v_0 .. v_i
    mixed = matmul(weights, transpose(v))                          # (T, d)
    # 5. projection
    out = matmul(mixed, transpose(p["Wo"]))                        # (T, d)
    # The cache keeps the weights as the full T×T matrix, 0.0 where the mask hides j > i.
    square = [w + [0.0] * (T - len(w)) for w in weights]           # (T, T)
    cache = {"x": x, "q": q, "k": k, "v": v, "weights": square, "mixed": mixed}
    return out, cache


def attention_backward(p, cache, d_out):
    """Gradients of attention: returns ({"Wq", "Wk", "Wv", "Wo"} gradients, d_x).

    The forward passes 1-5 walked back as 5, 4, 3, 2, 1.
    """
    if not isinstance(cache, dict) or not {"x", "q", "k", "v", "weights", "mixed"} <= set(cache):
        raise TypeError("attention_backward needs the cache attention_forward returned "
                        "(in the model's cache: cache['att'])")
    x, q, k, v = cache["x"], cache["q"], cache["k"], cache["v"]
    weights, mixed = cache["weights"], cache["mixed"]
    T, d = len(x), len(x[0])
    check_attention_params(p, d)
    if len(d_out) != T or len(d_out[0]) != d:
        raise ValueError(f"d_out must have shape ({T}, {d}) to match the forward pass, "
                         f"not {shape(d_out)}")
    sqrt_d = sqrt(d)
    # 5. in the forward pass this was: out = mixed · Wo
    d_Wo = matmul(transpose(mixed), transpose(d_out))              # (d, d)
    d_mixed = matmul(d_out, p["Wo"])                               # (T, d)
    # 4. mixed_i = sum_j weights[i][j] * v_j, so:
    #    d_weights[i][j] = d_mixed_i · v_j             (for j <= i only)
    #    d_v_j = sum over i >= j of weights[i][j] * d_mixed_i
    d_weights = [[fsum(map(mul, dm, v_j)) for v_j in v[:i + 1]]
                 for i, dm in enumerate(d_mixed)]                  # row i: (i + 1)
    d_v = causal_mix_backward(weights, d_mixed)                    # (T, d)
    # 3. weights = softmax(s) row by row, so
    #    d_s[i][j] = weights[i][j] * (d_weights[i][j] - mean_dw), where
    #    mean_dw = sum over k of weights[i][k] * d_weights[i][k]
    #    zip() and map() stop at j <= i because each d_weights row has i + 1 entries.
    d_s = []
    for w, dw in zip(weights, d_weights):
        mean_dw = fsum(map(mul, w, dw))                            # the weights' average of dw
        d_s.append([wj * (dwj - mean_dw) for wj, dwj in zip(w, dw)])   # row i: (i + 1)
    # 2. s[i][j] = (q_i · k_j) / sqrt(d), so the gradient of q_i · k_j is d_s[i][j] / sqrt(d),
    #    d_q_i = sum over j <= i of that times k_j, and d_k_j = sum over i >= j of it times q_i
    d_qk = [[g / sqrt_d for g in row] for row in d_s]              # row i: (i + 1)
    d_q = matmul(d_qk, transpose(k))                               # (T, d); rows stop at j = i
    d_k = causal_mix_backward(d_qk, q)                             # (T, d)
    # 1. q = x·Wq, k = x·Wk, v = x·Wv: three weight gradients, and x got all three, so
    #    d_x = d_q·Wqᵀ + d_k·Wkᵀ + d_v·Wvᵀ, summed as one dot product of 3d terms per entry
    x_cols = transpose(x)
    grads = {"Wq": matmul(x_cols, transpose(d_q)),                 # (d, d)
             "Wk": matmul(x_cols, transpose(d_k)),
             "Wv": matmul(x_cols, transpose(d_v)),
             "Wo": d_Wo}
    # Speed: rows laid side by side make each entry of d_x one sum of 3d terms, not three
    d_qkv = [a + b + c for a, b, c in zip(d_q, d_k, d_v)]           # (T, 3d)
    W_qkv = [a + b + c for a, b, c in zip(p["Wq"], p["Wk"], p["Wv"])]   # (d, 3d)
    d_x = matmul(d_qkv, W_qkv)                                     # (T, d)
    return grads, d_x


################ The model

def init_params(vocab, d, hidden, max_len, seed):
    """Fresh parameters: a dict of 18 tensors, in a fixed order.

    One random.Random(seed) draws gauss(0.0, 0.02) for every entry of the random matrices,
    row by row, matrix by matrix in the order tok_emb, pos_emb, Wq, Wk, Wv, Wo, W1, W2, W_out;
    gains start at 1.0 and biases at 0.0. Same seed, same numbers, on every Python version.

    >>> p = init_params(96, 16, 64, 64, seed=3)
    >>> count_params(p), shape(p["tok_emb"]), shape(p["W1"])
    (7440, (96, 16), (16, 64))
    """
    for name, n in (("vocab", vocab), ("d", d), ("hidden", hidden), ("max_len", max_len)):
        if type(n) is not int:
            raise TypeError(f"{name} must be an int, not {type(n).__name__}")
        if n <= 0:
            raise ValueError(f"{name} must be a positive size, not {n}")
    if type(seed) is not int:   # None would draw fresh numbers each call; "3" others than 3
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if seed < 0:                # random.Random(-3) is random.Random(3): refuse, don't surprise
        raise ValueError(f"seed must be 0 or more, not {seed}")
    rng = random.Random(seed)

    def gauss(rows, cols):
        return [[rng.gauss(0.0, 0.02) for _ in range(cols)] for _ in range(rows)]

    def ones(n):
        return [1.0] * n

    def zero(n):
        return [0.0] * n

    # The random matrices are drawn in this order; the dict below gives the names' order.
    tok_emb, pos_emb = gauss(vocab, d), gauss(max_len, d)
    Wq, Wk, Wv, Wo = gauss(d, d), gauss(d, d), gauss(d, d), gauss(d, d)
    W1, W2 = gauss(d, hidden), gauss(hidden, d)
    W_out = gauss(d, vocab)
    return {
        "tok_emb": tok_emb,                        # (V, d)
        "pos_emb": pos_emb,                        # (max_len, d)
        "ln1_g": ones(d), "ln1_b": zero(d),        # (d), (d)
        "Wq": Wq, "Wk": Wk, "Wv": Wv, "Wo": Wo,    # (d, d) each
        "ln2_g": ones(d), "ln2_b": zero(d),        # (d), (d)
        "W1": W1, "b1": zero(hidden),              # (d, H), (H)
        "W2": W2, "b2": zero(d),                   # (H, d), (d)
        "lnf_g": ones(d), "lnf_b": zero(d),        # (d), (d)
        "W_out": W_out, "b_out": zero(vocab),      # (d, V), (V)
    }


def count_params(params):
    """How many numbers the parameters hold in all.

    >>> count_params({"W": [[0.0, 0.0], [0.0, 0.0]], "b": [0.0, 0.0]})
    6
    """
    if not isinstance(params, dict):
        raise TypeError(f"count_params takes the dict of parameters, not {type(params).__name__}")
    total = 0
    for value in params.values():
        dims = shape(value)
        total += dims[0] * (dims[1] if len(dims) == 2 else 1)
    return total


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


def check_params(p):
    """Refuse anything but init_params' 18 tensors of one model size, naming what is wrong.

    It reads the length of each tensor and of each of its rows, never the numbers themselves.
    """
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
        if len(want) == 2 and any(len(row) != want[1] for row in t):
            raise ValueError(f"parameter {name} has rows of different lengths; each row of "
                             f"{name} must hold {want[1]} numbers")


def forward(p, ids, use_positions=True):
    """Scores for every vocabulary token at every position: returns (logits, cache).

    logits[t][j] scores token j as the one that follows ids[0..t]. Position t only ever sees
    positions 0..t. With use_positions=False the position embeddings are left out.
    """
    check_params(p)
    if type(use_positions) is not bool:
        raise TypeError(f"use_positions must be True or False, "
                        f"not {type(use_positions).__name__}")
    vocab, max_len = len(p["tok_emb"]), len(p["pos_emb"])
    check_ids(ids, vocab)
    T = len(ids)
    if T == 0:
        raise ValueError("empty sequence")
    if T > max_len:
        raise ValueError(f"sequence of {T} tokens is longer than the {max_len} positions "
                         f"the model has")
    # 1. embeddings: one row per token, plus one row per position
    tok_emb, pos_emb = p["tok_emb"], p["pos_emb"]
    if use_positions:
        x0 = [[a + b for a, b in zip(tok_emb[i], pos_emb[t])] for t, i in enumerate(ids)]  # (T, d)
    else:
        x0 = [list(tok_emb[i]) for i in ids]                       # (T, d), a copy
    # 2. attention, with a skip path around it
    h1, ln1 = layernorm_forward(x0, p["ln1_g"], p["ln1_b"])       # (T, d)
    a, att = attention_forward(p, h1)                              # (T, d)
    x1 = add(x0, a)                                                # (T, d)
    # 3. the MLP, with a skip path around it
    h2, ln2 = layernorm_forward(x1, p["ln2_g"], p["ln2_b"])       # (T, d)
    pre = linear(h2, p["W1"], p["b1"])                             # (T, H)
    act = [[z if z > 0.0 else 0.0 for z in row] for row in pre]    # (T, H): relu
    m = [[v + bias for v, bias in zip(row, p["b2"])]             # (T, d): act · W2 + b2
         for row in matmul_skipping_zeros(act, p["W2"])]
    x2 = add(x1, m)                                                # (T, d)
    # 4. output scores
    hf, lnf = layernorm_forward(x2, p["lnf_g"], p["lnf_b"])       # (T, d)
    logits = linear(hf, p["W_out"], p["b_out"])                    # (T, V)
    cache = {"ids": list(ids), "use_positions": use_positions,
             "x0": x0, "ln1": ln1, "h1": h1, "att": att, "x1": x1,
             "ln2": ln2, "h2": h2, "act": act, "x2": x2, "lnf": lnf, "hf": hf}
    return logits, cache


def loss_and_dlogits(logits, targets):
    """The mean cross-entropy of the next tokens, and its gradient (softmax - one-hot) / T.

    >>> loss, d = loss_and_dlogits([[0.0, 0.0]], [1])
    >>> round(loss, 6), d
    (0.693147, [[0.5, -0.5]])
    """
    if not isinstance(logits, list) or not all(isinstance(r, list) for r in logits):
        raise TypeError("logits must be a list of rows (lists of floats)")
    T = len(logits)
    if T == 0:
        raise ValueError("empty sequence")
    vocab = len(logits[0])
    check_ids(targets, vocab, what="target IDs")
    if len(targets) != T:
        raise ValueError(f"{T} positions but {len(targets)} targets")
    losses, d_logits = [], []
    for row, target in zip(logits, targets):
        if len(row) != vocab:
            raise ValueError(f"logits rows must all have {vocab} scores, not {len(row)}")
        top = max(row)                                   # subtract the max: exp cannot overflow
        e = [exp(z - top) for z in row]
        total = fsum(e)
        if not math.isfinite(total):                     # an inf or nan among the scores
            raise ValueError(f"logits at position {len(losses)} are not all finite numbers")
        # -log softmax(row)[target] = top + log(total) - row[target], three terms: fsum
        losses.append(fsum((top, math.log(total), -row[target])))
        scale = total * T
        d_row = [z / scale for z in e]                   # softmax / T
        d_row[target] -= 1.0 / T                          # minus one-hot / T
        d_logits.append(d_row)
    return fsum(losses) / T, d_logits                    # d_logits: (T, V)


def backward(p, cache, d_logits):
    """Gradients of the loss for every parameter: a dict with the names and shapes of p.

    The forward steps 4, 3, 2, 1 walked back. At each skip path, x_next = x + f(x), the
    gradient reaches x twice: straight along the skip path, and back through f. The two are
    added where they meet.
    """
    check_params(p)
    needed = {"ids", "use_positions", "x0", "ln1", "att", "ln2", "h2", "act", "lnf", "hf"}
    if not isinstance(cache, dict) or not needed <= set(cache):
        raise TypeError("backward needs the cache that forward(p, ids) returned with the logits")
    ids = cache["ids"]
    T = len(ids)
    vocab = len(p["tok_emb"])
    check_ids(ids, vocab, what="the cache's token IDs")
    made = (len(cache["x0"][0]), len(cache["act"][0]))        # (d, H) of the forward pass
    if made != (len(p["b2"]), len(p["b1"])) or T > len(p["pos_emb"]):
        raise ValueError(f"the cache comes from a model of width {made[0]} and hidden {made[1]} "
                         f"on {T} positions, not from p (width {len(p['b2'])}, hidden "
                         f"{len(p['b1'])}, {len(p['pos_emb'])} positions)")
    if not isinstance(d_logits, list) or not all(isinstance(row, list) for row in d_logits):
        raise TypeError("d_logits must be a list of rows (lists of floats), as "
                        "loss_and_dlogits returns")
    if len(d_logits) != T or any(len(row) != vocab for row in d_logits):
        raise ValueError(f"d_logits must have shape ({T}, {vocab}) to match the forward pass, "
                         f"not {shape(d_logits)}")
    g = {}
    # 4. output scores: logits = hf · W_out + b_out, hf = LNF(x2)
    d_hf, g["W_out"], g["b_out"] = linear_backward(d_logits, cache["hf"], p["W_out"])
    d_x2, g["lnf_g"], g["lnf_b"] = layernorm_backward(d_hf, p["lnf_g"], cache["lnf"])
    # 3. x2 = x1 + m, m = act · W2 + b2, act = relu(pre), pre = h2 · W1 + b1, h2 = LN2(x1)
    d_m = d_x2                             # x2 = x1 + m: the MLP's output gets d_x2 as it is
    act = cache["act"]
    g["W2"] = matmul_skipping_zeros(transpose(act), d_m)          # (H, d): actᵀ · d_m
    g["b2"] = column_sums(d_m)                                     # (d)
    # relu: the gradient passes only where its input was > 0, that is where act > 0
    d_pre = masked_matmul(d_m, p["W2"], where=act)                 # (T, H): d_m · W2ᵀ, masked
    d_W1_T = matmul_skipping_zeros(transpose(d_pre), cache["h2"])  # (H, d): d_preᵀ · h2
    g["W1"] = [list(col) for col in zip(*d_W1_T)]                  # (d, H): h2ᵀ · d_pre
    g["b1"] = column_sums(d_pre)                                   # (H)
    # d_h2 = d_pre · W1ᵀ; matmul_skipping_zeros takes W1ᵀ by its rows, which are W1's columns
    d_h2 = matmul_skipping_zeros(d_pre, transpose(p["W1"]))        # (T, d)
    d_x1_mlp, g["ln2_g"], g["ln2_b"] = layernorm_backward(d_h2, p["ln2_g"], cache["ln2"])
    d_x1 = add(d_x2, d_x1_mlp)             # skip path: straight through, plus through the MLP
    # 2. x1 = x0 + a, a = Attention(h1), h1 = LN1(x0)
    d_a = d_x1                             # x1 = x0 + a: attention's output gets d_x1 as it is
    att_grads, d_h1 = attention_backward(p, cache["att"], d_a)
    g.update(att_grads)
    d_x0_att, g["ln1_g"], g["ln1_b"] = layernorm_backward(d_h1, p["ln1_g"], cache["ln1"])
    d_x0 = add(d_x1, d_x0_att)             # skip path: straight through, plus through attention
    # 1. x0[t] = tok_emb[ids[t]] + pos_emb[t]
    d_pos_emb = zeros(len(p["pos_emb"]), len(p["pos_emb"][0]))    # (max_len, d); past T: 0
    if cache["use_positions"]:
        d_pos_emb[:T] = d_x0
    g["pos_emb"] = d_pos_emb
    # a token that occurs several times collects the gradient of every position it is at
    positions = {}
    for t, i in enumerate(ids):
        positions.setdefault(i, []).append(d_x0[t])
    d_tok_emb = zeros(vocab, len(p["tok_emb"][0]))                 # (V, d)
    for i, rows in positions.items():
        d_tok_emb[i] = column_sums(rows) if len(rows) > 1 else list(rows[0])   # a copy: no
        # gradient row may be the same list as another (pos_emb's), or an update to one
        # would change both
    g["tok_emb"] = d_tok_emb
    return {name: g[name] for name in PARAM_NAMES}


def sequence_loss(p, ids, targets, use_positions=True):
    """The mean next-token cross-entropy of one sequence (forward and loss, no gradient)."""
    logits, _ = forward(p, ids, use_positions)
    return loss_and_dlogits(logits, targets)[0]
