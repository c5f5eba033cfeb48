#!/usr/bin/env python3
"""Writes the inputs of examples/mlp.axir and NumPy's answer, examples/mlp/expected.npy.

Run once with a Python that has NumPy (Debian's: /usr/bin/python3); the outputs are committed.
"""
import os
import numpy as np

out = os.path.join(os.path.dirname(__file__), "..", "examples", "mlp")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(20261130)
x = rng.standard_normal((4, 8)).astype(np.float32)
w1 = (rng.standard_normal((8, 16)) / np.sqrt(8)).astype(np.float32)
b1 = (0.1 * rng.standard_normal(16)).astype(np.float32)
w2 = (rng.standard_normal((16, 3)) / 4).astype(np.float32)
b2 = (0.1 * rng.standard_normal(3)).astype(np.float32)
# The reference in float64, rounded once: the closest float32 answer.
h = np.maximum(x.astype(np.float64) @ w1.astype(np.float64) + b1, 0.0)
y = (h @ w2.astype(np.float64) + b2).astype(np.float32)
for name, a in dict(x=x, w1=w1, b1=b1, w2=w2, b2=b2, expected=y).items():
    np.save(os.path.join(out, name + ".npy"), a)
print("wrote", out)
