"""A one-block transformer language model in plain Python, with its backward pass by hand.

    x0     = tok_emb[ids] + pos_emb[0:T]          token plus position embeddings
    x1     = x0 + Attention(LN1(x0))              pre-norm attention, a skip path around it
    x2     = x1 + MLP(LN2(x1))                    pre-norm MLP, a skip path around it
    logits = LNF(x2) · W_out + b_out              a score for every token at every position

Each backward walks its forward's steps in reverse; d_x1 is ∂loss/∂x1. Shapes: T positions
(P = 64 at most), width d (16), MLP width H (64), vocabulary V (96). A sum of more than two
floats is math.fsum, rounded once whatever the order of its terms and the Python version.
One sequence at a time, one attention head, no dropout, no tied embeddings.
"""
import math
import random
from itertools import chain, compress
from math import exp, fsum, log, sqrt
from operator import mul

SIZES = {"vocab": 96, "d": 16, "hidden": 64, "max_len": 64}   # the series' model
EPS = 1e-5          # added to the variance in layer norm, as torch.nn.LayerNorm does
PARAMETERS = {"tok_emb": "V d", "pos_emb": "P d", "ln1_g": "d", "ln1_b": "d",
              "Wq": "d d", "Wk": "d d", "Wv": "d d", "Wo": "d d", "ln2_g": "d", "ln2_b": "d",
              "W1": "d H", "b1": "H", "W2": "H d", "b2": "d", "lnf_g": "d", "lnf_b": "d",
              "W_out": "d V", "b_out": "V"}                    # the order init_params draws in


################ List helpers

def shape(nested_list, what="the matrix"):
    """The shape of a vector or a matrix (rows of one length) as a tuple; lists or tuples only.

    >>> shape([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), shape([0.5, 0.25])
    ((2, 3), (2,))
    """
    if not isinstance(nested_list, (list, tuple)):
        raise TypeError(f"{what} must be a list, not {nested_list!r:.20}")
    if not nested_list or not isinstance(nested_list[0], (list, tuple)):
        return (len(nested_list),)
    odd = [row for row in nested_list if not isinstance(row, (list, tuple))]
    if odd:
        raise TypeError(f"{what} holds a {type(odd[0]).__name__} among its rows")
    lengths = sorted({len(row) for row in nested_list})
    if len(lengths) > 1:
        raise ValueError(f"{what} is ragged: it has rows of lengths {lengths}")
    return (len(nested_list), lengths[0])


def transpose(m):
    """mᵀ: the columns of m, as rows: [[1, 2, 3], [4, 5, 6]] -> [[1, 4], [2, 5], [3, 6]]."""
    check("transpose(m: n k)", m)
    return [list(col) for col in zip(*m)]


def matmul(a, b):
    """a · b, (n, k) · (k, m) -> (n, m): each entry a dot product, rounded once.

    >>> matmul([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]])
    [[19.0, 22.0], [43.0, 50.0]]
    """
    check("matmul(a: n k, b: k m)", a, b)
    b_cols = list(zip(*b))
    b_finite = all(map(math.isfinite, chain.from_iterable(b)))   # 0 · inf is nan, not 0
    out = []
    for row in a:
        if b_finite and 0.0 in row:     # skip a's zeros, which add nothing: 4% fewer instructions
            nonzero = list(compress(row, row))          # compress(x, row): x where row is not 0
            out.append([fsum(map(mul, nonzero, compress(col, row))) for col in b_cols])
        else:                           # the plain line: what the zeros' skip must equal
            out.append([fsum(map(mul, row, col)) for col in b_cols])
    return out


def add(a, *others):
    """a plus the others, entry by entry: each entry's terms summed by fsum, rounded once.

    >>> add([[1.0, 2.0]], [[0.5, 0.25]], [[0.1, 0.2]])
    [[1.6, 2.45]]
    """
    for b in others:
        check("add(a: n k, b: n k)", a, b)
    return [[fsum(terms) for terms in zip(*rows)] for rows in zip(a, *others)]


def column_sums(m):
    """The sum of each column of a matrix, rounded once.

    >>> column_sums([[0.1, 1.0], [0.2, 2.0], [0.3, 3.0]])
    [0.6, 6.0]
    """
    check("column_sums(m: n k)", m)
    return [fsum(col) for col in zip(*m)]


################ Layer normalization

def layernorm_forward(x, g, b):
    """Each row of x to mean 0 and variance (over d) about 1, times the gain g, plus the bias
    b, as in torch.nn.LayerNorm: y = (x - mean) / √(variance + EPS) · g + b. (y, cache)."""
    check("layernorm_forward(x: T d, g: d, b: d)", x, g, b)
    d = len(g)
    y, xhat, std = [], [], []
    for row in x:
        # 1. centre
        mean = fsum(row) / d
        centred = [x_j - mean for x_j in row]
        # 2. scale
        variance = fsum(c * c for c in centred) / d
        s = sqrt(variance + EPS)                # the cache's "std": EPS keeps it above 0
        xhat.append([c / s for c in centred])                   # (d)
        std.append(s)
        # 3. gain and bias
        y.append([xh * g_j + b_j for xh, g_j, b_j in zip(xhat[-1], g, b)])
    return y, {"xhat": xhat, "std": std}                        # y: (T, d)


def layernorm_backward(dy, g, cache):
    """Gradients of layer norm, given dy: returns (d_x, d_g, d_b), forward's steps 3, 2, 1
    walked back. With d_xhat = dy · g, and as the mean and std depend on all of the row:

        d_x = (d_xhat - mean(d_xhat) - xhat · mean(d_xhat · xhat)) / std
               term 1   term 2         term 3
    """
    xhat, std = cache["xhat"], cache["std"]
    check("layernorm_backward(xhat: T d, std: T, g: d, dy: T d)", xhat, std, g, dy)
    d = len(g)
    # 3. in the forward pass this was: y = xhat · g + b, row by row
    d_g = column_sums([list(map(mul, dy_t, xhat_t)) for dy_t, xhat_t in zip(dy, xhat)])
    d_b = column_sums(dy)                                       # (d)
    d_x = []
    for dy_t, xhat_t, s in zip(dy, xhat, std):                 # row t
        d_xhat = [dy_j * g_j for dy_j, g_j in zip(dy_t, g)]     # term 1
        # 2 and 1. xhat = (x - mean) / std; x also moves its row's mean (term 2) and std (term 3)
        mean_d_xhat = fsum(d_xhat) / d
        mean_d_xhat_xhat = fsum(map(mul, d_xhat, xhat_t)) / d
        # three terms, so fsum: term1 - term2 - term3 would round twice
        d_x.append([fsum((term1, -mean_d_xhat, -xhat_j * mean_d_xhat_xhat)) / s
                    for term1, xhat_j in zip(d_xhat, xhat_t)])
    return d_x, d_g, d_b                                        # d_x: (T, d)


################ Causal self-attention

def softmax(scores):
    """Each row's softmax exp(z) / Σ exp(z), computed as exp(z - max) / Σ exp(z - max) so
    that exp cannot overflow. A score of -inf weighs exactly 0.

    >>> softmax([[3.0, -math.inf], [1.0, 1.0]])
    [[1.0, 0.0], [0.5, 0.5]]
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
    """Gradient of the scores, given d_weights, of weights = softmax(scores): the weights of
    a row sum to 1, so each one moves all the others: d_z_j = w_j · (d_w_j - Σ_k w_k · d_w_k).

    >>> softmax_backward([[0.5, 0.5, 0.0]], [[1.0, 0.0, 7.0]])
    [[0.25, -0.25, 0.0]]
    """
    check("softmax_backward(weights: T n, d_weights: T n)", weights, d_weights)
    d_scores = []
    for w, d_w in zip(weights, d_weights):
        average = fsum(map(mul, w, d_w))         # d_w averaged with the weights w
        d_scores.append([w_j * (d_w_j - average) for w_j, d_w_j in zip(w, d_w)])
    return d_scores


def attention_forward(p, x):
    """One head of causal self-attention over the rows of x: position i mixes the values of
    the positions j ≤ i, weighted by how well its query fits their keys. (out, cache)."""
    check("attention_forward(x: T d, Wq: d d, Wk: d d, Wv: d d, Wo: d d)",
          x, p["Wq"], p["Wk"], p["Wv"], p["Wo"])
    sqrt_d = sqrt(len(x[0]))
    # 1. queries, keys, values
    q = matmul(x, p["Wq"])                                      # (T, d)
    k = matmul(x, p["Wk"])                                      # (T, d)
    v = matmul(x, p["Wv"])                                      # (T, d)
    # 2. scores q_i · k_j / √d, and the causal mask: a later position j > i gets -inf
    scores = []
    for i, row in enumerate(matmul(q, transpose(k))):          # (T, T)
        scores.append([s / sqrt_d if j <= i else -math.inf for j, s in enumerate(row)])
    # 3. weights: each row's softmax (a weight of exactly 0 where the score is -inf)
    weights = softmax(scores)                                   # (T, T)
    # 4. mix: mixed_i = Σ_j weights[i][j] · v_j
    mixed = matmul(weights, v)                                  # (T, d)
    # 5. projection
    out = matmul(mixed, p["Wo"])                                # (T, d)
    return out, {"x": x, "q": q, "k": k, "v": v, "scores": scores, "weights": weights,
                 "mixed": mixed}


def attention_backward(p, cache, d_out):
    """Gradients of attention, given d_out: returns ({"Wq", "Wk", "Wv", "Wo"} gradients, d_x)."""
    x, weights, mixed = cache["x"], cache["weights"], cache["mixed"]
    q, k, v = cache["q"], cache["k"], cache["v"]
    check("attention_backward(x: T d, Wo: d d, d_out: T d)", x, p["Wo"], d_out)
    sqrt_d = sqrt(len(x[0]))
    # 5. in the forward pass this was: out = mixed · Wo
    d_Wo = matmul(transpose(mixed), d_out)                      # (d, d)
    d_mixed = matmul(d_out, transpose(p["Wo"]))                 # (T, d)
    # 4. mixed = weights · v
    d_weights = matmul(d_mixed, transpose(v))                   # (T, T)
    d_v = matmul(transpose(weights), d_mixed)                   # (T, d)
    # 3. weights = softmax(scores): w = 0 where masked, so d_scores = 0 there
    d_scores = softmax_backward(weights, d_weights)             # (T, T)
    # 2. scores = q · kᵀ / √d, so d_q = d_scores · k / √d and d_k = d_scoresᵀ · q / √d
    d_q = [[e / sqrt_d for e in row] for row in matmul(d_scores, k)]             # (T, d)
    d_k = [[e / sqrt_d for e in row] for row in matmul(transpose(d_scores), q)]  # (T, d)
    # 1. q = x · Wq, k = x · Wk, v = x · Wv: x fed all three, so d_x has three parts
    x_T = transpose(x)
    grads = {"Wq": matmul(x_T, d_q), "Wk": matmul(x_T, d_k), "Wv": matmul(x_T, d_v),
             "Wo": d_Wo}                                                # each (d, d)
    d_x = add(matmul(d_q, transpose(p["Wq"])), matmul(d_k, transpose(p["Wk"])),
              matmul(d_v, transpose(p["Wv"])))                  # (T, d)
    return grads, d_x


################ The model

def linear(x, W, b):
    """y = x · W + b for every row of x, (T, n) · (n, m) + (m) -> (T, m); the bias is added
    to a dot product already rounded, a sum of two terms."""
    check("linear(x: T n, W: n m, b: m)", x, W, b)
    return [[xw + b_j for xw, b_j in zip(row, b)] for row in matmul(x, W)]


def linear_backward(d_y, x, W):
    """Gradients of y = x · W + b, given d_y: returns (d_x, d_W, d_b)."""
    check("linear_backward(W: n m, x: T n, d_y: T m)", W, x, d_y)
    d_x = matmul(d_y, transpose(W))     # (T, n): each x reaches every y through W
    d_W = matmul(transpose(x), d_y)     # (n, m): a sum over the positions
    d_b = column_sums(d_y)              # (m): b is added at every position
    return d_x, d_W, d_b


def init_params(vocab, d, hidden, max_len, seed):
    """Fresh parameters, PARAMETERS in order: one random.Random(seed) draws gauss(0.0, 0.02)
    for each entry of the matrices, in turn, row by row; gains 1.0, biases 0.0."""
    check_seed(seed)
    sizes = {"V": vocab, "P": max_len, "d": d, "H": hidden}
    rng = random.Random(seed)
    p = {}
    for name, letters in PARAMETERS.items():
        dims = [sizes[letter] for letter in letters.split()]
        if len(dims) == 2:                      # a matrix (rows, columns), row by row
            p[name] = [[rng.gauss(0.0, 0.02) for _ in range(dims[1])] for _ in range(dims[0])]
        else:                                   # a gain starts at 1, a bias at 0
            p[name] = [1.0 if name.endswith("_g") else 0.0] * dims[0]
    return p


def count_params(params):
    """How many numbers the parameters hold in all."""
    return sum(math.prod(shape(t)) for t in params.values())


def forward(p, ids, use_positions=True):
    """(logits, cache): logits[t][j] scores token j as the one after ids[:t + 1], from those
    positions only. use_positions=False leaves the position embeddings out."""
    check_forward(p, ids, use_positions)
    # 1. embeddings: a row per token, plus a row per position
    x0 = [list(p["tok_emb"][i]) for i in ids]                   # (T, d)
    if use_positions:
        x0 = add(x0, p["pos_emb"][:len(ids)])                   # (T, d)
    # 2. attention, pre-norm, with a skip path around it
    h1, ln1 = layernorm_forward(x0, p["ln1_g"], p["ln1_b"])     # (T, d)
    a, att = attention_forward(p, h1)                           # (T, d)
    x1 = add(x0, a)                                             # (T, d)
    # 3. the MLP, pre-norm, with a skip path around it (the relu, max(z, 0.0), passes a nan on)
    h2, ln2 = layernorm_forward(x1, p["ln2_g"], p["ln2_b"])     # (T, d)
    pre = linear(h2, p["W1"], p["b1"])                          # (T, H)
    act = [[max(z, 0.0) for z in row] for row in pre]           # (T, H): relu, mlp_hidden
    m = linear(act, p["W2"], p["b2"])                           # (T, d)
    x2 = add(x1, m)                                             # (T, d)
    # 4. output scores, after one more layer norm
    hf, lnf = layernorm_forward(x2, p["lnf_g"], p["lnf_b"])     # (T, d)
    logits = linear(hf, p["W_out"], p["b_out"])                 # (T, V)
    return logits, {"ids": list(ids), "use_positions": use_positions, "x0": x0, "ln1": ln1,
                    "h1": h1, "att": att, "x1": x1, "ln2": ln2, "h2": h2, "pre": pre,
                    "act": act, "x2": x2, "lnf": lnf, "hf": hf}


def loss_and_dlogits(logits, targets):
    """The mean cross-entropy of the next tokens, and its gradient, softmax / T - one-hot / T."""
    check_loss(logits, targets)
    T = len(logits)
    losses, d_logits = [], []
    for row, target in zip(logits, targets):
        top = max(row)                          # subtract the max: exp cannot overflow
        e = [exp(z - top) for z in row]
        total = fsum(e)
        # -log softmax(row)[target] = top + log(total) - row[target]: three terms, fsum
        losses.append(fsum((top, log(total), -row[target])))
        d_row = [e_j / (total * T) for e_j in e]            # softmax / T
        d_row[target] -= 1.0 / T                            # minus one-hot / T
        d_logits.append(d_row)
    return fsum(losses) / T, d_logits                       # d_logits: (T, V)


def backward(p, cache, d_logits):
    """Gradients of the loss for every parameter, p unchanged since forward: a dict with the
    names and shapes of p, forward's steps 4, 3, 2, 1 walked back. At a skip path, x + f(x),
    the gradient reaches x twice, along the path and back through f, and the two are added."""
    check("backward(x0: T d, W_out: d V, d_logits: T V)", cache["x0"], p["W_out"], d_logits)
    grads = {}
    # 4. in the forward pass: hf = LNF(x2), then logits = hf · W_out + b_out
    d_hf, grads["W_out"], grads["b_out"] = linear_backward(d_logits, cache["hf"], p["W_out"])
    d_x2, grads["lnf_g"], grads["lnf_b"] = layernorm_backward(d_hf, p["lnf_g"], cache["lnf"])
    # 3. in the forward pass: h2 = LN2(x1), pre = h2 · W1 + b1, act = relu(pre),
    #    m = act · W2 + b2, then x2 = x1 + m
    d_m = d_x2                          # x2 = x1 + m: m gets d_x2 as it is
    d_act, grads["W2"], grads["b2"] = linear_backward(d_m, cache["act"], p["W2"])
    # the relu lets the gradient through only where pre > 0
    d_pre = [[d_j if z > 0.0 else 0.0 for d_j, z in zip(d_row, pre_row)]
             for d_row, pre_row in zip(d_act, cache["pre"])]    # (T, H)
    d_h2, grads["W1"], grads["b1"] = linear_backward(d_pre, cache["h2"], p["W1"])
    d_x1_mlp, grads["ln2_g"], grads["ln2_b"] = layernorm_backward(d_h2, p["ln2_g"], cache["ln2"])
    d_x1 = add(d_x2, d_x1_mlp)          # skip path: straight along it, plus through the MLP
    # 2. in the forward pass: h1 = LN1(x0), a = Attention(h1), then x1 = x0 + a
    d_a = d_x1                          # x1 = x0 + a: a gets d_x1 as it is
    att_grads, d_h1 = attention_backward(p, cache["att"], d_a)
    grads.update(att_grads)
    d_x0_att, grads["ln1_g"], grads["ln1_b"] = layernorm_backward(d_h1, p["ln1_g"], cache["ln1"])
    d_x0 = add(d_x1, d_x0_att)          # skip path: straight along it, plus through attention
    # 1. in the forward pass: x0 = tok_emb[ids] + pos_emb[0:T]. pos_emb's rows past T
    #    were not used; a token at several positions collects the gradient of each
    grads["pos_emb"] = [[0.0] * len(row) for row in p["pos_emb"]]     # (P, d)
    if cache["use_positions"]:
        grads["pos_emb"][:len(d_x0)] = d_x0
    grads["tok_emb"] = [[0.0] * len(row) for row in p["tok_emb"]]     # (V, d)
    for token in set(cache["ids"]):
        rows = [d_row for i, d_row in zip(cache["ids"], d_x0) if i == token]
        grads["tok_emb"][token] = column_sums(rows)
    return {name: grads[name] for name in PARAMETERS}


def sequence_loss(p, ids, targets, use_positions=True):
    """The mean next-token cross-entropy of one sequence (forward and loss, no gradient)."""
    return loss_and_dlogits(forward(p, ids, use_positions)[0], targets)[0]


################ Input checks (you can skip this section)

def check(signature, *args):
    """The letters' sizes in args ("x: T d"), or a refusal; a letter's first arg fixes its size."""
    who, _, fields = signature.rstrip(")").partition("(")
    sizes, seen_in = {}, {}
    for field, value in zip(fields.split(", "), args):
        name, *letters = field.replace(":", "").split()
        found = shape(value, f"{who}: {name}")
        if found == (0,) and letters[0] == "T":     # T, a sequence's length, is at least 1
            raise ValueError("empty sequence")
        wanted = ", ".join(letters) + ("," if len(letters) == 1 else "")
        if len(found) != len(letters):
            raise ValueError(f"{who}: {name} has shape {found}, but it must be ({wanted})")
        for letter, n in zip(letters, found):
            if letter not in sizes:
                sizes[letter] = n
                seen_in[letter] = f"{name}, of shape {found}"
            elif n != sizes[letter]:
                raise ValueError(f"{who}: {name} has shape {found}, but it must be ({wanted}) "
                                 f"with {letter} = {sizes[letter]}, as in {seen_in[letter]}")
    return sizes


def check_seed(seed):
    if type(seed) is not int:   # None draws other numbers on each call, "3" others than 3's
        raise TypeError(f"init_params: seed must be an int, not {seed!r:.20}")


def check_ids(ids, vocab, what):
    wrong = [i for i in ids if type(i) is not int]     # True and 1.0 are refused
    if wrong:
        raise TypeError(f"{what} must be a list of ints, not one holding {wrong[0]!r:.20}")
    outside = list(dict.fromkeys(i for i in ids if not 0 <= i < vocab))
    if outside:
        raise ValueError(f"{what} outside the vocabulary of size {vocab}: {outside[:5]}")


def check_forward(p, ids, use_positions):
    if not isinstance(use_positions, bool):
        raise TypeError(f"forward: use_positions must be True or False, not {use_positions!r}")
    missing = [name for name in PARAMETERS if name not in p]
    if missing:
        raise ValueError(f"forward: the parameters lack {', '.join(missing)}")
    signature = ", ".join(f"{name}: {letters}" for name, letters in PARAMETERS.items())
    sizes = check(f"forward({signature})", *(p[name] for name in PARAMETERS))
    check("forward(ids: T)", ids)
    check_ids(ids, sizes["V"], "token IDs")
    if len(ids) > sizes["P"]:
        raise ValueError(f"sequence of {len(ids)} tokens is longer than the {sizes['P']} "
                         f"positions the model has")


def check_loss(logits, targets):
    sizes = check("loss_and_dlogits(logits: T V)", logits)
    shape(targets, "loss_and_dlogits: targets")     # a list; check_ids checks its IDs
    check_ids(targets, sizes["V"], "target IDs")
    if len(targets) != len(logits):
        raise ValueError(f"{len(logits)} positions but {len(targets)} targets")
    for t, row in enumerate(logits):
        if not all(map(math.isfinite, row)):
            raise ValueError(f"loss_and_dlogits: logits row {t} holds inf or nan")


def check_scores(scores):
    check("softmax(scores: T n)", scores)
    for i, row in enumerate(scores):
        if not all(z < math.inf for z in row):      # nan or +inf: exp cannot weigh it
            raise ValueError(f"softmax: row {i} holds nan or +inf")
        if max(row) == -math.inf:
            raise ValueError(f"softmax: row {i} is all -inf: every score masked, or overflowed")
