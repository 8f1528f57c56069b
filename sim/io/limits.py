"""Input limits: how big an input may be before moesim refuses it, checked before any work.

A value past its limit would not be a bigger answer, only a hang or a blown memory budget
(a billion layers, a million hosts, an alias bomb), so it is refused with one line naming the
field, the value and the limit. The table is documented in the README ("Limits and
guarantees"); :func:`limits_table` prints it.

Each limit is 8x or more the largest real case moesim ships or cites (DeepSeek-V3 and Kimi K2
have 61 layers and up to 384 experts; the largest shipped fabric has 4096 GPUs; the largest
shipped global batch is 16384 sequences; long-context training reaches 128K-token
sequences), so no real study meets one, while each stays small enough that the work it allows
fits in memory.

>>> check_limit("layers", 61, "model.num_hidden_layers")
61
>>> check_limit("layers", 10**9, "model.num_hidden_layers")
Traceback (most recent call last):
...
moesim.errors.ConfigError: model.num_hidden_layers: 1000000000 is over the limit of 4096 layers
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from moesim.errors import ConfigError


@dataclass(frozen=True)
class Limit:
    """The largest allowed value of one kind of input, its unit and what it guards."""

    value: int
    unit: str
    guards: str


LIMITS: dict[str, Limit] = {
    "file_bytes": Limit(1 << 20, "bytes", "one scenario, sweep or config.json file (1 MiB)"),
    "nesting_depth": Limit(32, "levels", "nested mappings/lists in a YAML or JSON file"),
    "yaml_aliases": Limit(64, "aliases", "YAML aliases (*name) in one file"),
    "yaml_nodes": Limit(100_000, "nodes", "YAML values once aliases are expanded"),
    "gpus": Limit(131_072, "GPUs", "GPUs in a fabric, a layout or a design"),
    "hosts": Limit(16_384, "hosts", "hosts (or racks, planes, leaves) in a fabric"),
    "fabric_ports": Limit(4096, "ports", "switch radix and ports per tier"),
    "layers": Limit(4096, "layers", "decoder layers of a model"),
    "experts": Limit(65_536, "experts", "routed experts per MoE layer"),
    "width": Limit(1 << 22, "elements", "hidden, FFN, head and vocabulary sizes"),
    "microbatches": Limit(4096, "micro-batches", "micro-batches per pipeline in one step"),
    "global_batch": Limit(1 << 24, "sequences", "sequences per step"),
    "micro_batch_size": Limit(1 << 16, "sequences", "sequences per micro-batch"),
    "seq_len": Limit(1 << 20, "tokens", "tokens per sequence"),
    "microbatch_tokens": Limit(1 << 21, "tokens", "tokens per micro-batch (size x seq_len)"),
    "tokens_per_rank": Limit(1 << 20, "tokens", "tokens per rank of a layer-stack scenario"),
    "seeds": Limit(100_000, "seeds", "seed replicas of one sweep"),
    "sweep_points": Limit(1_000_000, "points", "points of one sweep"),
    "jobs": Limit(1024, "processes", "local worker processes of a sweep (-j)"),
    "expression_ops": Limit(256, "operators", "+, * and ( in a moe_layer_freq expression"),
}


def check_limit(kind: str, value: object, field: str) -> object:
    """``value`` unchanged if it is within ``LIMITS[kind]``; else ConfigError naming ``field``.

    Only numbers are checked (a wrong type is the schema's job); NaN and infinities are
    refused here, since no limit can hold them.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(field, f"must be a finite number, got {value}")
    limit = LIMITS[kind]
    if value > limit.value:
        raise ConfigError(field, f"{value:g} is over the limit of {limit.value} {limit.unit}"
                          if isinstance(value, float) else
                          f"{value} is over the limit of {limit.value} {limit.unit}".rstrip())
    return value


def limits_table() -> str:
    """The limits as a Markdown table (the README's copy is checked against it)."""
    lines = ["| limit | value | what it bounds |", "|---|---|---|"]
    lines += [f"| `{name}` | {lim.value:,} {lim.unit} | {lim.guards} |".replace("  |", " |")
              for name, lim in LIMITS.items()]
    return "\n".join(lines)
