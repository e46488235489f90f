"""ONNX mapping: TfIdfVectorizer-9, onto the IR op of the same name.

Semantics: https://onnx.ai/onnx/operators/onnx__TfIdfVectorizer.html. The IR has no string
dtype, so a pool of strings (``pool_strings``) is refused: the tokens must be integer ids.
"""

from __future__ import annotations

from typing import Any

from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import checked_attrs, required_input

ONNX = Framework.ONNX
_ATTRS = ("mode", "min_gram_length", "max_gram_length", "max_skip_count", "ngram_counts",
          "ngram_indexes", "pool_int64s", "weights")


@mapping(ONNX, "TfIdfVectorizer", since_opset=9)
def tfidf_vectorizer(node: OriginNode, g: MapContext) -> Any:
    if node.attrs.get("pool_strings"):
        raise g.unsupported(
            "pool_strings is not supported: opbridge's IR has no string dtype",
            hint="tokenize to integer ids before the vectorizer (a lookup table in the "
                 "application) and give the pool as pool_int64s")
    # the schema's required attributes are checked before the mapping runs
    attrs = checked_attrs(node, g, _ATTRS, ignored=("pool_strings",))
    return g.op("TfIdfVectorizer", [required_input(g, 0, "X")], **attrs)
