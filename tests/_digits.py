"""A small CNN trained on scikit-learn's 8x8 digits (data that ships inside a package): the
trained model the quantization tests measure accuracy on."""

from __future__ import annotations

from typing import Any

import numpy as np


def train_digits_cnn() -> tuple[Any, dict[str, np.ndarray]]:
    """The trained Keras model (seeded) and its splits ``xtr, xte, ytr, yte``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from optimizer import lazy

    keras = lazy.keras()
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 8, 8, 1)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((8, 8, 1), name="digits"),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.DepthwiseConv2D(3, padding="same", activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ], name="digits_cnn")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(xtr, ytr, epochs=12, batch_size=32, verbose=0)
    return model, {"xtr": xtr, "xte": xte, "ytr": ytr, "yte": yte}
