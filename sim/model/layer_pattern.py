"""Which decoder layers are MoE layers: parse and normalise the ways configs say it.

Configs in the wild spell the dense/MoE pattern four ways (conventions.md):

* DeepSeek-V3 / Kimi K2 (Hugging Face): ``first_k_dense_replace`` dense layers first, then a
  layer ``i`` is MoE when ``i % moe_layer_freq == 0``
  (``modeling_deepseek.py``: ``layer_idx >= first_k_dense_replace and layer_idx %
  moe_layer_freq == 0``).
* Qwen2/3-MoE (Hugging Face): layer ``i`` is MoE when ``i not in mlp_only_layers`` and
  ``(i + 1) % decoder_sparse_step == 0`` (``modeling_qwen3_moe.py``).
* Megatron-Core ``--moe-layer-freq``: an int N (layer ``i`` is MoE when ``i % N == 0``), or a
  Python-list *expression* such as ``"([0]*3+[1]*58)"`` or ``"[1,0]*4"`` (1 = MoE).
  Megatron ``eval``s that string; here it is parsed by :func:`parse_layer_freq`, which walks the
  syntax tree and accepts only list/tuple displays of 0/1, integer constants, ``+`` and ``*``.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from moesim.errors import ConfigError
from moesim.io import LIMITS, short

#: Longest pattern the parser will build (guards ``"[1]*10**12"``-style memory bombs).
MAX_PATTERN_LEN = 100_000
MAX_EXPR_CHARS = 10_000
MAX_EXPR_OPS = LIMITS["expression_ops"].value  # '+', '*' and '(': a real one has a handful

_Value = int | list[int]


def parse_layer_freq(text: str, field: str = "moe_layer_freq") -> int | list[int]:
    """Parse a Megatron ``--moe-layer-freq`` string into an int or a list of 0/1 flags.

    Never evaluates code: only list/tuple displays, integer constants, ``+`` and ``*``.

    >>> parse_layer_freq("([0]*3+[1]*5)")
    [0, 0, 0, 1, 1, 1, 1, 1]
    >>> parse_layer_freq("[1,0]*2")
    [1, 0, 1, 0]
    >>> parse_layer_freq("2")
    2
    """
    if len(text) > MAX_EXPR_CHARS:
        raise ConfigError(field, f"expression longer than {MAX_EXPR_CHARS} characters")
    ops = sum(text.count(c) for c in "+*(")
    if ops > MAX_EXPR_OPS:
        raise ConfigError(field, f"expression has {ops} operators and brackets; at most "
                          f"{MAX_EXPR_OPS} are allowed")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (RecursionError, MemoryError):
        raise ConfigError(field, "expression nested too deeply") from None
    except SyntaxError as exc:
        raise ConfigError(
            field, f"cannot parse {short(text)}: {exc.msg}; allowed: an int or a list "
            "expression such as '([0]*3+[1]*58)'"
        ) from None
    value = _walk(tree.body, field, text)
    if isinstance(value, list):
        bad = [v for v in value if v not in (0, 1)]
        if bad:
            raise ConfigError(field, f"list entries must be 0 or 1 (1 = MoE), got {short(bad[0])}")
    return value


def _walk(node: ast.AST, field: str, text: str) -> _Value:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        items = [_walk(elt, field, text) for elt in node.elts]
        if any(isinstance(item, list) for item in items):
            raise ConfigError(field, f"nested lists are not allowed in {short(text)}")
        return [int(item) for item in items]  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mult):
        return _binop(node.op, _walk(node.left, field, text), _walk(node.right, field, text),
                      field)
    raise ConfigError(
        field, f"{type(node).__name__} is not allowed in {short(text)}; allowed: integer "
        "constants, lists of 0/1, '+' and '*'"
    )


def _binop(op: ast.operator, left: _Value, right: _Value, field: str) -> _Value:
    if isinstance(op, ast.Add):
        if isinstance(left, list) != isinstance(right, list):
            raise ConfigError(field, "cannot add a list and an int")
        result: _Value = left + right  # type: ignore[operator]
    elif isinstance(left, list) and isinstance(right, list):
        raise ConfigError(field, "cannot multiply two lists")
    elif isinstance(left, list) or isinstance(right, list):
        seq, count = (left, right) if isinstance(left, list) else (right, left)
        assert isinstance(seq, list) and isinstance(count, int)
        if count < 0 or len(seq) * count > MAX_PATTERN_LEN:
            raise ConfigError(field, f"repetition count {count} out of range")
        result = seq * count
    else:
        assert isinstance(left, int) and isinstance(right, int)
        result = left * right
    if isinstance(result, list) and len(result) > MAX_PATTERN_LEN:
        raise ConfigError(field, f"pattern longer than {MAX_PATTERN_LEN} layers")
    if isinstance(result, int) and abs(result) > MAX_PATTERN_LEN:
        raise ConfigError(field, f"integer {result} out of range")
    return result


def moe_layers_from_freq(
    freq: int | str | Sequence[int | bool],
    num_layers: int,
    *,
    first_k_dense: int = 0,
    field: str = "moe_layer_freq",
) -> tuple[bool, ...]:
    """MoE flags per layer from a Megatron/DeepSeek ``moe_layer_freq`` (+ ``first_k_dense``).

    An int N marks layer ``i`` MoE when ``i % N == 0``; a list (or list expression) must have
    one 0/1 entry per layer. The first ``first_k_dense`` layers are dense in any case.
    """
    if isinstance(freq, str):
        freq = parse_layer_freq(freq, field)
    if isinstance(freq, bool) or not isinstance(freq, int | list | tuple):
        raise ConfigError(field, f"expected an int, a list of 0/1 or a list expression, got "
                          f"{type(freq).__name__}")
    if isinstance(freq, int):
        if freq < 1:
            raise ConfigError(field, f"must be >= 1 (every N-th layer is MoE), got {freq}")
        flags = [i % freq == 0 for i in range(num_layers)]
    else:
        flags = _flags_from_list(freq, num_layers, field)
    return tuple(flag and i >= first_k_dense for i, flag in enumerate(flags))


def _flags_from_list(items: Sequence[object], num_layers: int, field: str) -> list[bool]:
    if len(items) != num_layers:
        raise ConfigError(field, f"pattern has {len(items)} entries; need one per layer "
                          f"({num_layers})")
    flags = []
    for item in items:
        if item not in (0, 1) or not isinstance(item, int):
            raise ConfigError(field, f"list entries must be 0/1 or booleans, got {short(item)}")
        flags.append(bool(item))
    return flags


def moe_layers_qwen(
    num_layers: int, *, decoder_sparse_step: int = 1, mlp_only_layers: Sequence[int] = ()
) -> tuple[bool, ...]:
    """Qwen-MoE rule: MoE unless in ``mlp_only_layers``, and only every ``step``-th layer."""
    if isinstance(decoder_sparse_step, bool) or not isinstance(decoder_sparse_step, int) \
            or decoder_sparse_step < 1:
        raise ConfigError("model.decoder_sparse_step", f"must be an int >= 1, got "
                          f"{short(decoder_sparse_step)}")
    dense = set()
    for idx in mlp_only_layers:
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < num_layers:
            raise ConfigError("model.mlp_only_layers", f"entries must be layer indices in "
                              f"[0, {num_layers}), got {short(idx)}")
        dense.add(idx)
    return tuple(
        i not in dense and (i + 1) % decoder_sparse_step == 0 for i in range(num_layers)
    )
