"""ONNX mapping: TfIdfVectorizer-9, onto the IR op of the same name.

Semantics: https://onnx.ai/onnx/operators/onnx__TfIdfVectorizer.html. The IR has no string
dtype, so a pool of strings (``pool_strings``) is refused: the tokens must be integer ids. A
string-token model's input is a string tensor too; the converter refuses such an input where a
node reads it, after that node's mapping, so the user reads this refusal, which says how to
turn the model into one of ids.
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
            "a pool of string tokens (pool_strings) is not supported: opbridge's IR has no string "
            "dtype; integer token ids (an int32 / int64 input with pool_int64s) are",
            hint="give every distinct string of pool_strings one integer id (the same id wherever "
                 "it appears in the pool), store the ids as pool_int64s instead of pool_strings "
                 "(onnx.helper.make_attribute), declare the input int64, and feed the ids of the "
                 "tokens instead of the strings (a token outside the pool takes an id not in it, "
                 "such as -1): the output is the same")
    # the schema's required attributes are checked before the mapping runs
    attrs = checked_attrs(node, g, _ATTRS, ignored=("pool_strings",))
    return g.op("TfIdfVectorizer", [required_input(g, 0, "X")], **attrs)
