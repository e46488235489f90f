"""A lenient reader of Caffe's prototxt (protobuf text format).

Caffe's own reader needs every parameter block in the compiled ``caffe.proto``; fork and vendor
layers (SSD, YOLO, ShuffleNet, ...) then fail to parse. This reader tokenizes with protobuf's
own :class:`google.protobuf.text_format.Tokenizer` into a generic tree of :class:`TextBlock`
entries, and only then fills the fields our lite schema knows, with their declared types.
Fields it does not know stay generic: numbers, booleans, enum names as strings, nested blocks
as dicts, and a field given several times as a list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor as _desc
from google.protobuf import text_format

from ..errors import ModelFormatError

#: The deepest ``{ ... }`` nesting the reader accepts. Real nets nest 3-4 levels
#: (layer > convolution_param > weight_filler); the limit keeps a hostile file from
#: exhausting the Python stack in this reader and in everything that walks its tree.
MAX_DEPTH = 100


@dataclass
class TextScalar:
    """One scalar token: ``quoted`` for string literals, else the bare word (number, name)."""

    text: str
    quoted: bool
    line: int


@dataclass
class TextBlock:
    """A ``{ ... }`` block: its entries (name, value, line) in file order."""

    line: int
    entries: list[tuple[str, TextScalar | TextBlock, int]] = field(default_factory=list)
    #: Names written with the list syntax (``mask: [6]``): repeated fields, lists even with one
    #: value (or none: ``mask: []``), where no schema says so.
    lists: set[str] = field(default_factory=set)

    def get_all(self, name: str) -> list[TextScalar | TextBlock]:
        return [v for k, v, _ in self.entries if k == name]


def parse_text(text: str, source: str) -> TextBlock:
    """Tokenize prototxt ``text`` into a generic tree; syntax errors name ``source:line``."""
    lines = text.splitlines(keepends=True)
    tok = text_format.Tokenizer(lines)
    try:
        root = _parse_block(tok, source, end=None, line=1, depth=0)
    except text_format.ParseError as err:
        raise ModelFormatError(
            f"[caffe] {source}: malformed prototxt: {err}",
            hint="fix the text at that line (protobuf text format: name: value, name { ... })",
        ) from None
    return root


def _err(source: str, tok: text_format.Tokenizer, msg: str) -> ModelFormatError:
    line = tok._line + 1  # the tokenizer counts from 0
    near = tok.token or "end of file"
    return ModelFormatError(
        f"[caffe] {source}:{line}: malformed prototxt: {msg} (near {near!r})",
        hint="fix the text at that line (protobuf text format: name: value, name { ... })",
    )


def _parse_block(tok: text_format.Tokenizer, source: str, end: str | None, line: int,
                 depth: int) -> TextBlock:
    if depth > MAX_DEPTH:
        raise _err(source, tok, f"blocks nested deeper than {MAX_DEPTH} levels (this one opened at "
                                f"line {line})")
    block = TextBlock(line=line)
    while True:
        if end is None and tok.AtEnd():
            return block
        if end is not None:
            if tok.AtEnd():
                raise _err(source, tok, f"block opened at line {line} is not closed with '{end}'")
            if tok.TryConsume(end):
                return block
        if not _is_identifier(tok.token):
            raise _err(source, tok, "expected a field name")
        name = tok.token
        fline = tok._line + 1
        tok.NextToken()
        colon = tok.TryConsume(":")
        if tok.LookingAt("{") or tok.LookingAt("<"):
            close = "}" if tok.token == "{" else ">"
            tok.NextToken()
            block.entries.append((name, _parse_block(tok, source, close, fline, depth + 1), fline))
        elif not colon:
            raise _err(source, tok, f"expected ':' or '{{' after '{name}'")
        elif tok.TryConsume("["):
            block.lists.add(name)
            if not tok.TryConsume("]"):
                while True:
                    block.entries.append((name, _parse_scalar(tok, source), fline))
                    if tok.TryConsume("]"):
                        break
                    if not tok.TryConsume(","):
                        raise _err(source, tok, "expected ',' or ']' in a list")
        else:
            block.entries.append((name, _parse_scalar(tok, source), fline))
        tok.TryConsume(";") or tok.TryConsume(",")


def _is_identifier(token: str) -> bool:
    return bool(token) and (token[0].isalpha() or token[0] == "_")


def _parse_scalar(tok: text_format.Tokenizer, source: str) -> TextScalar:
    line = tok._line + 1
    if tok.token[:1] in ("'", '"'):
        return TextScalar(tok.ConsumeString(), True, line)
    token = tok.token
    if not token or token in "{}<>[]:,;":
        raise _err(source, tok, "expected a value")
    tok.NextToken()
    return TextScalar(token, False, line)


# -- typed values -----------------------------------------------------------------------------

_INT_TYPES = {
    _desc.FieldDescriptor.TYPE_INT32, _desc.FieldDescriptor.TYPE_INT64,
    _desc.FieldDescriptor.TYPE_UINT32, _desc.FieldDescriptor.TYPE_UINT64,
    _desc.FieldDescriptor.TYPE_SINT32, _desc.FieldDescriptor.TYPE_SINT64,
    _desc.FieldDescriptor.TYPE_FIXED32, _desc.FieldDescriptor.TYPE_FIXED64,
    _desc.FieldDescriptor.TYPE_SFIXED32, _desc.FieldDescriptor.TYPE_SFIXED64,
}
_INT_RANGES = {
    **dict.fromkeys((_desc.FieldDescriptor.TYPE_INT32, _desc.FieldDescriptor.TYPE_SINT32,
                     _desc.FieldDescriptor.TYPE_SFIXED32), (-(1 << 31), (1 << 31) - 1)),
    **dict.fromkeys((_desc.FieldDescriptor.TYPE_UINT32, _desc.FieldDescriptor.TYPE_FIXED32),
                    (0, (1 << 32) - 1)),
    **dict.fromkeys((_desc.FieldDescriptor.TYPE_INT64, _desc.FieldDescriptor.TYPE_SINT64,
                     _desc.FieldDescriptor.TYPE_SFIXED64), (-(1 << 63), (1 << 63) - 1)),
    **dict.fromkeys((_desc.FieldDescriptor.TYPE_UINT64, _desc.FieldDescriptor.TYPE_FIXED64),
                    (0, (1 << 64) - 1)),
}
_FLOAT_TYPES = {_desc.FieldDescriptor.TYPE_FLOAT, _desc.FieldDescriptor.TYPE_DOUBLE}
_TRUE = {"true", "True", "t", "1"}
_FALSE = {"false", "False", "f", "0"}


def _parse_number(text: str) -> int | float | None:
    t = text.rstrip("fF") if not text.lower().startswith(("0x", "inf", "-inf")) else text
    try:
        return int(t, 0)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return None


def generic_value(v: TextScalar | TextBlock) -> Any:
    """A value whose field the schema does not know: number, bool, string, or dict."""
    if isinstance(v, TextBlock):
        return generic_block(v)
    if v.quoted:
        return v.text
    num = _parse_number(v.text)
    if num is not None:
        return num
    if v.text in ("true", "True"):
        return True
    if v.text in ("false", "False"):
        return False
    return v.text


def generic_block(block: TextBlock) -> dict[str, Any]:
    """A block the schema does not know: a dict; a name given several times becomes a list."""
    out: dict[str, Any] = {}
    for name, value, _ in block.entries:
        _add_generic(out, name, generic_value(value), block.lists)
    out.update({name: [] for name in block.lists if name not in out})
    return out


def _add_generic(out: dict[str, Any], name: str, val: Any, lists: set[str]) -> None:
    """Add a value of a field no schema describes: a second value, or the list syntax, makes a
    list."""
    if name in out:
        prev = out[name]
        out[name] = (prev if isinstance(prev, list) else [prev]) + [val]
    else:
        out[name] = [val] if name in lists else val


def typed_scalar(fd: _desc.FieldDescriptor, v: TextScalar, where: str) -> Any:
    """Convert a scalar token to the declared type of field ``fd``; errors name ``where``."""
    bad = ModelFormatError(
        f"{where} field '{fd.name}' = {v.text!r} (line {v.line}): not a valid "
        f"{_type_name(fd)}",
        hint=f"give '{fd.name}' a {_type_name(fd)} value",
    )
    t = fd.type
    if t in (_desc.FieldDescriptor.TYPE_STRING, _desc.FieldDescriptor.TYPE_BYTES):
        return v.text
    if v.quoted:
        raise bad
    if t == _desc.FieldDescriptor.TYPE_BOOL:
        if v.text in _TRUE:
            return True
        if v.text in _FALSE:
            return False
        raise bad
    if t == _desc.FieldDescriptor.TYPE_ENUM:
        et = fd.enum_type
        if v.text in et.values_by_name:
            return v.text
        num = _parse_number(v.text)
        if isinstance(num, int) and num in et.values_by_number:
            return et.values_by_number[num].name
        raise ModelFormatError(
            f"{where} field '{fd.name}' = {v.text!r} (line {v.line}): not a value of "
            f"{et.name}",
            hint=f"use one of {', '.join(et.values_by_name)}",
        )
    num = _parse_number(v.text)
    if t in _INT_TYPES:
        if isinstance(num, float) and num.is_integer():
            num = int(num)
        if not isinstance(num, int):
            raise bad
        low, high = _INT_RANGES[t]
        if not low <= num <= high:
            raise ModelFormatError(
                f"{where} field '{fd.name}' = {v.text} (line {v.line}): out of the range of "
                f"{_type_name(fd)} ({low} .. {high})",
                hint=f"give '{fd.name}' a value in that range",
            )
        return num
    if t in _FLOAT_TYPES:
        if num is None:
            raise bad
        return float(num)
    raise bad  # pragma: no cover - no other scalar types in the schema


def _type_name(fd: _desc.FieldDescriptor) -> str:
    if fd.type == _desc.FieldDescriptor.TYPE_ENUM:
        return f"enum {fd.enum_type.name}"
    names = {v: k[5:].lower() for k, v in vars(_desc.FieldDescriptor).items() if k.startswith("TYPE_")}
    return names.get(fd.type, "value")


def typed_block(block: TextBlock, desc: _desc.Descriptor, where: str,
                unknown: list[str] | None = None, *, nested: bool = False) -> dict[str, Any]:
    """The fields set in ``block``, typed by message ``desc``; unknown fields kept generic.

    Repeated fields are lists, singular fields scalars, messages dicts, enums their names.
    A singular known field given twice is an error (as in protobuf). The names of unknown
    fields found inside known messages nested in ``block`` are appended to ``unknown`` as
    ``Message.field`` (the top level's own unknown fields are the caller's business).
    """
    out: dict[str, Any] = {}
    seen_line: dict[str, int] = {}
    for name, value, line in block.entries:
        fd = desc.fields_by_name.get(name)
        if fd is None:
            if unknown is not None and nested:
                unknown.append(f"{desc.name}.{name}")
            _add_generic(out, name, generic_value(value), block.lists)
            continue
        if fd.type == _desc.FieldDescriptor.TYPE_MESSAGE:
            if not isinstance(value, TextBlock):
                raise ModelFormatError(
                    f"{where} field '{name}' (line {line}): expected a block {{ ... }}",
                    hint=f"write {name} {{ ... }}",
                )
            val = typed_block(value, fd.message_type, f"{where} {name}", unknown, nested=True)
        else:
            if isinstance(value, TextBlock):
                raise ModelFormatError(
                    f"{where} field '{name}' (line {line}): expected a value, got a block",
                    hint=f"write {name}: VALUE",
                )
            val = typed_scalar(fd, value, where)
        if fd.is_repeated:
            out.setdefault(name, []).append(val)
        else:
            if name in out:
                raise ModelFormatError(
                    f"{where} field '{name}' given twice (lines {seen_line[name]} and {line})",
                    hint=f"'{name}' is not repeated: keep one",
                )
            out[name] = val
            seen_line[name] = line
    out.update({n: [] for n in block.lists if n not in out and n not in desc.fields_by_name})
    return out


def field_defaults(desc: _desc.Descriptor) -> dict[str, Any]:
    """The schema defaults of a message's singular scalar fields (enums by name)."""
    out: dict[str, Any] = {}
    for fd in desc.fields:
        if fd.is_repeated or fd.type == _desc.FieldDescriptor.TYPE_MESSAGE:
            continue
        dv = fd.default_value
        if fd.type == _desc.FieldDescriptor.TYPE_ENUM:
            dv = fd.enum_type.values_by_number[dv].name
        out[fd.name] = dv
    return out
