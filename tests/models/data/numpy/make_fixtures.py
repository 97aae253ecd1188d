#!/usr/bin/env python3
"""Writes the NumPy fixtures of tests/models/data/numpy_fixture_test.cc with NumPy itself, so the
readers are checked against files the real writer produced. Run from this folder; the values are
repeated in the test."""
import numpy as np

# A table: 4 rows x 3 float32 features, integer labels.
table = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.5) / 4
np.savez_compressed("table.npz", x=table, y=np.array([2, 0, 1, 2], dtype=np.int64))

# Images (N, H, W, C) = (2, 2, 3, 3) uint8 with value 100n + 30c + 4y + x, text labels.
n, h, w, c = np.meshgrid(np.arange(2), np.arange(2), np.arange(3), np.arange(3), indexing="ij")
images = (100 * n + 30 * c + 4 * h + w).astype(np.uint8)
np.savez("images.npz", pixels=images, names=np.array(["tumor", "benign"]))

# The same images as separate .npy files, channels first, float64 in [0, 1], uint8 labels.
np.save("images_nchw.npy", images.transpose(0, 3, 1, 2).astype(np.float64) / 255)
np.save("labels.npy", np.array([1, 0], dtype=np.uint8))
