#!/usr/bin/env python3
"""bench/gpu/attention-tolerance.py: what compare.py --magnitude accepts, on a
NumPy model of bench/gpu/attention.loom's causal attention (2 x 3 heads,
S = 200, E = 64, standard normal bf16 inputs; not the seed's values).

For each way of computing the attention it prints how many outputs are more
than 1 bf16 ulp from the exact result rounded once, the largest of their
distances as a fraction of the terms' magnitude (Σ p·|v|), and how many of
them the check rejects (beyond --relative, 2^-12). Correct computations in
another order must be accepted; a lost precision that a kernel could really
have (P rounded to bf16 once) must not. Needs the virtual environment
(numpy, ml_dtypes): .venv/bin/python bench/gpu/attention-tolerance.py
"""
import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
RELATIVE = 2.0 ** -12
rng = np.random.default_rng(0)
B, H, S, E = 2, 3, 200, 64


def normal(*shape):
    return rng.standard_normal(shape).astype(BF16).astype(np.float64)


q, k, v = normal(B, H, S, E), normal(B, H, S, E), normal(B, H, S, E)
scores = np.einsum("bhie,bhje->bhij", q, k) / np.sqrt(E)
scores[..., np.triu(np.ones((S, S), bool), 1)] = -np.inf
p = np.exp(scores - scores.max(-1, keepdims=True))
p /= p.sum(-1, keepdims=True)
reference = (p @ v).astype(BF16)
magnitude = p @ np.abs(v)


def ordered(x):
    bits = x.astype(BF16).view(np.uint16).astype(np.int64)
    return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)


def check(name, result):
    ulps = np.abs(ordered(result) - ordered(reference))
    gap = np.abs(result.astype(BF16).astype(np.float64) - reference.astype(np.float64)) / magnitude
    far = ulps > 1
    worst = gap[far].max() if far.any() else 0.0
    print(f"{name:44s} beyond 1 ulp: {far.sum():5d}  worst: {worst:.2e} of the magnitude  "
          f"rejected: {(far & (gap > RELATIVE)).sum()}")


order = rng.permutation(S)
f32 = np.zeros(reference.shape, np.float32)
for j in order:
    f32 += p[..., :, j:j + 1].astype(np.float32) * v[..., j:j + 1, :].astype(np.float32)
check("f32 sums in a shuffled order", f32.astype(np.float64))
inexact = np.zeros(reference.shape)
for j in order:
    inexact = (inexact + p[..., :, j:j + 1] * v[..., j:j + 1, :]) * (
        1 + rng.uniform(-2.0 ** -22, 2.0 ** -22, inexact.shape))
check("a relative error of 2^-22 at each addition", inexact)
check("P rounded to bf16 once (wrong)", p.astype(BF16).astype(np.float64) @ v)
