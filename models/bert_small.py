"""BERT-Small encoder (Devlin et al., "BERT", NAACL 2019; the L=4, H=512, A=8 model of Turc et
al., "Well-Read Students Learn Better", 2019) with a sequence-classification head, and the
width/depth sub-networks of DynaBERT (Hou et al., "DynaBERT: Dynamic BERT with Adaptive Width
and Depth", NeurIPS 2020).

Input: ``INPUT_SIZE`` (128) int32 token ids of a single segment without padding (so no
attention mask and no token-type embedding). Embeddings (word, learned absolute position,
LayerNorm, dropout); ``depth`` x 4 post-LN encoder layers (multi-head self-attention with 64-d
heads, dropout, add, LayerNorm; GELU (tanh form) FFN, dropout, add, LayerNorm); pooler
(first token, tanh dense); dropout and a 2-way classifier (``BertForSequenceClassification``,
e.g. SST-2).

DynaBERT width ``w`` keeps ``round(8 w)`` attention heads and ``round(2048 w)`` FFN units
(hidden size stays 512); depth ``d`` keeps ``round(4 d)`` layers. ``vocab_size`` sets the word
embedding's rows (a tokenizer of another vocabulary; default 30,522, BERT's WordPiece): the same
layers and MACs, fewer embedding parameters.

Reference checked: Turc et al.'s BERT-Small has 29.1 M params (with the pre-training heads);
this encoder has 28.8 M (embeddings 15.9 M, 3.15 M per layer, pooler 0.26 M). MACs at 128
tokens: 1.68 G = 4 layers x (4 x 128 x 512^2 projections + 8 x 128^2 x 128 attention +
2 x 128 x 512 x 2048 FFN) + pooler and classifier.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from models._common import check_size, check_variant

NAME = "bert_small"
TASK = "nlp"
INPUT_SIZE = 128
REFERENCE = {"macs": 1.678e9, "params": 29.1e6,
             "source": "Turc et al. 2019 (BERT-Small L=4 H=512 A=8: 29.1 M params incl. pre-"
                       "training heads); MACs computed from the architecture at 128 tokens"}
PREPROCESS = {"kind": "tokens", "vocab_size": 30522}
VOCAB_SIZE, MAX_POSITIONS, HIDDEN, HEADS, HEAD_DIM, FFN, LAYERS = 30522, 512, 512, 8, 64, 2048, 4
NUM_LABELS = 2
WIDTHS = (0.25, 0.5, 0.75, 1.0)
DEPTHS = (0.5, 0.75, 1.0)


@lru_cache(maxsize=1)
def position_embedding_class() -> type:
    """The ``PositionEmbedding`` Keras layer (registered as ``dnnplan>PositionEmbedding``):
    adds a learned ``[max_positions, hidden]`` table's first ``seq_len`` rows to its input."""
    from optimizer.lazy import keras as _keras

    keras = _keras()

    @keras.saving.register_keras_serializable(package="dnnplan")
    class PositionEmbedding(keras.layers.Layer):
        def __init__(self, max_positions: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.max_positions = max_positions

        def build(self, input_shape: tuple[int | None, ...]) -> None:
            self.table = self.add_weight(
                shape=(self.max_positions, int(input_shape[-1])), name="embeddings",
                initializer=keras.initializers.TruncatedNormal(stddev=0.02))

        def call(self, x: Any) -> Any:
            return x + self.table[None, : x.shape[1], :]

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "max_positions": self.max_positions}

    return PositionEmbedding


@lru_cache(maxsize=1)
def gelu_tanh() -> Any:
    """BERT's GELU, tanh approximation (as in google-research/bert ``modeling.gelu``),
    registered as ``dnnplan>gelu_tanh``; the exact erf form exports to ONNX as the
    non-standard ``Erfc``."""
    from optimizer.lazy import keras as _keras

    keras = _keras()

    @keras.saving.register_keras_serializable(package="dnnplan")
    def gelu_tanh(x: Any) -> Any:
        return keras.activations.gelu(x, approximate=True)

    return gelu_tanh


def build(input_size: int = INPUT_SIZE, **variant: Any) -> Any:
    """BERT-Small classifier over ``input_size`` tokens; variants ``width``, ``depth``,
    ``vocab_size``."""
    from optimizer.lazy import keras as _keras

    keras = _keras()
    L = keras.layers
    check_variant(NAME, variant, {"width": WIDTHS, "depth": DEPTHS, "vocab_size": ()})
    check_size(NAME, input_size, 2)
    vocab = variant.get("vocab_size", VOCAB_SIZE)
    if not isinstance(vocab, int) or isinstance(vocab, bool):
        from optimizer.errors import ConfigError

        raise ConfigError(f"{NAME}: vocab_size={vocab!r} must be a positive integer (BERT's: {VOCAB_SIZE})")
    if input_size > MAX_POSITIONS:
        from optimizer.errors import ConfigError

        raise ConfigError(f"{NAME}: input_size={input_size} exceeds the {MAX_POSITIONS} "
                          "learned positions; use at most 512 tokens")
    width, depth = variant.get("width", 1.0), variant.get("depth", 1.0)
    heads, ffn, layers = round(HEADS * width), round(FFN * width), round(LAYERS * depth)

    ids = keras.Input((input_size,), dtype="int32", name="input_ids")
    x = L.Embedding(vocab, HIDDEN, name="embeddings_word")(ids)
    x = position_embedding_class()(MAX_POSITIONS, name="embeddings_position")(x)
    x = L.LayerNormalization(epsilon=1e-12, name="embeddings_LayerNorm")(x)
    x = L.Dropout(0.1, name="embeddings_dropout")(x)
    for i in range(layers):
        p = f"encoder_layer_{i}_"
        a = L.MultiHeadAttention(heads, HEAD_DIM, dropout=0.1, name=p + "attention")(x, x)
        a = L.Dropout(0.1, name=p + "attention_dropout")(a)
        x = L.Add(name=p + "attention_add")([x, a])
        x = L.LayerNormalization(epsilon=1e-12, name=p + "attention_LayerNorm")(x)
        f = L.Dense(ffn, activation=gelu_tanh(), name=p + "intermediate")(x)
        f = L.Dense(HIDDEN, name=p + "output")(f)
        f = L.Dropout(0.1, name=p + "output_dropout")(f)
        x = L.Add(name=p + "output_add")([x, f])
        x = L.LayerNormalization(epsilon=1e-12, name=p + "output_LayerNorm")(x)
    x = L.Cropping1D((0, input_size - 1), name="pooler_first_token")(x)
    x = L.Flatten(name="pooler_flatten")(x)
    x = L.Dense(HIDDEN, activation="tanh", name="pooler_dense")(x)
    x = L.Dropout(0.1, name="classifier_dropout")(x)
    out = L.Dense(NUM_LABELS, name="classifier")(x)
    return keras.Model(ids, out, name=NAME)


_LAYER = re.compile(r"encoder_layer_(\d+)_")


def block_of(layer_name: str) -> str:
    """``embeddings``, ``encoder.layer.N``, ``pooler``, ``classifier`` (dropout included)."""
    m = _LAYER.match(layer_name)
    if m:
        return f"encoder.layer.{m.group(1)}"
    for prefix in ("embeddings", "pooler", "classifier"):
        if layer_name.startswith(prefix):
            return prefix
    return layer_name
