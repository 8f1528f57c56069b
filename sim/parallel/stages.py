"""Which decoder layers each (virtual) pipeline stage holds: Megatron-LM's stage-split options.

Virtual stage ``v = c * pp + s`` is chunk ``c`` of pipeline rank ``s``; layers are numbered in
virtual-stage order (Megatron-Core ``get_transformer_layer_offset``: all of chunk 0's stages,
then chunk 1's, ...). Megatron-Core (``megatron/core/transformer/transformer_block.py``
``get_num_layers_to_build``, ``transformer_layer.py`` ``get_transformer_layer_offset``,
``pipeline_parallel_layer_layout.py``; user guide "Custom Pipeline Model Parallel Layout")
offers four ways, named here as its ``TransformerConfig`` fields:

* none set: moesim's default split (:meth:`ParallelLayout.stage_layers`; Megatron itself
  requires ``pp * vpp`` to divide the layers there).
* ``num_layers_in_first_pipeline_stage`` / ``num_layers_in_last_pipeline_stage``
  (``--decoder-first/last-pipeline-num-layers``): those stages hold that many; the other
  stages share the rest evenly (it must divide); with vpp each stage's count must divide by
  vpp, each chunk holding count / vpp. Megatron refuses them together with the two below.
* ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``: the
  embedding (loss) counts as one layer: ``num_layers + e + l`` must divide by pp, and each
  stage's share by vpp; every virtual stage gets share / vpp slots, and the first (last)
  virtual stage builds one decoder layer fewer, holding the embedding (the loss) in its place.
* ``pipeline_model_parallel_layout`` (``--pipeline-model-parallel-layout``): a string of
  ``pp * vpp`` virtual stages split by ``|``, in virtual-stage order; ``E`` embedding, ``t``
  decoder layer, ``m`` MTP layer, ``L`` loss (output layer + loss); ``x*n`` and ``(...)*n``
  repeat, commas are cosmetic, stages may be empty ("E||t|L"). ``E`` must come first and
  ``L`` last, once each; decoder layers must precede MTP layers; the ``t`` count must be the
  model's layer count. E.g. ``"Et*3|(tt|)*29,m|L"`` on pp 16: vpp 2, 61 decoder layers.

The embedding is always on virtual stage 0 and the LM head (output layer, loss) on the last in
every option (Megatron requires ``E`` first and ``L`` last): the options only move decoder
layers. The step runs the LM-head GEMMs on the last virtual stage; the embedding lookup and the
cross-entropy kernels are not simulated (no option changes that). MTP modules run when the
workload's ``mtp_layers`` asks for them, always on the last virtual stage beside the head
(:mod:`moesim.step.mtp`), wherever a layout writes ``m``: here ``m`` only checks the order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from moesim.errors import ConfigError

LAYOUT_FIELD = "layout.pipeline_model_parallel_layout"
LAYOUT_LETTERS = "EtmL"
MAX_LAYOUT_CHARS = 100_000
"""Most characters a layout string may unroll to (``t*99999999`` is refused, not built)."""

_REPEATS = (re.compile(r"\(([^()]+)\)\*(\d+)"), re.compile(r"(.)\*(\d+)"))


def parse_layout(text: str) -> tuple[str, ...]:
    """The virtual stages of a layout string, each as its letters (Megatron's
    ``PipelineParallelLayerLayout.parse_str_to_list``: commas dropped, ``(...)*n`` then ``x*n``
    unrolled, split at ``|``)."""
    flat = text.replace(",", "")
    for pattern in _REPEATS:
        flat = _unroll(pattern, flat)
    for letter in flat:
        if letter not in LAYOUT_LETTERS + "|":
            raise ConfigError(LAYOUT_FIELD, f"unknown letter {letter!r} in {text!r}; allowed: "
                              "E (embedding), t (decoder layer), m (MTP), L (loss), | (stage "
                              "break), x*n and (...)*n repeats, commas")
    return tuple(flat.split("|"))


def _unroll(pattern: re.Pattern[str], text: str) -> str:
    out: list[str] = []
    end = 0
    for match in pattern.finditer(text):
        done = sum(len(part) for part in out)
        out += [text[end:match.start()], match.group(1) * _repeat(match.group(2), match.group(1),
                                                                 done)]
        end = match.end()
    return "".join([*out, text[end:]])


def _repeat(count: str, what: str, so_far: int) -> int:
    n = int(count) if len(count) <= 6 else MAX_LAYOUT_CHARS + 1
    if so_far + n * len(what) > MAX_LAYOUT_CHARS:
        raise ConfigError(LAYOUT_FIELD, f"unrolls to more than {MAX_LAYOUT_CHARS} letters")
    return n


def check_layout_stages(stages: Sequence[str], pp: int, vpp: int) -> None:
    """The layout string's structure: ``pp * vpp`` stages, E first and L last once each,
    decoder layers before MTP layers (Megatron's ``validate_layer_layout``)."""
    if len(stages) != pp * vpp:
        raise ConfigError(LAYOUT_FIELD, f"has {len(stages)} stages; pp * vpp = {pp} * {vpp} = "
                          f"{pp * vpp} needed (vpp = stages / pp: set layout.vpp to match)")
    flat = "".join(stages)
    if flat.count("E") != 1 or not flat.startswith("E"):
        raise ConfigError(LAYOUT_FIELD, "must start with E (the embedding), once")
    if flat.count("L") != 1 or not flat.endswith("L"):
        raise ConfigError(LAYOUT_FIELD, "must end with L (the loss), once")
    if "m" in flat and "t" in flat[flat.index("m"):]:
        raise ConfigError(LAYOUT_FIELD, "decoder layers (t) must come before MTP layers (m)")


def split_counts(num_layers: int, pp: int, vpp: int, first: int, last: int,
                 embedding: bool, loss: bool) -> tuple[int, ...]:
    """Decoder layers per virtual stage (index ``c * pp + s``) for the first/last-stage and
    account-for-embedding/loss options (at least one set)."""
    if first or last:
        fixed = {0: first, pp - 1: last} if first and last else (
            {0: first} if first else {pp - 1: last})
        middle = pp - len(fixed)
        rest = num_layers - sum(fixed.values())
        if rest < 0 or (middle == 0 and rest) or (middle and rest % middle):
            raise ConfigError("layout.num_layers_in_first_pipeline_stage",
                              f"the {rest} layers left by the first/last stages must divide "
                              f"evenly over the {middle} other stages ({num_layers} layers, "
                              f"pp={pp})")
        per_stage = [fixed.get(s, rest // middle if middle else 0) for s in range(pp)]
    else:
        slots = num_layers + int(embedding) + int(loss)
        if slots % pp:
            raise ConfigError("layout.account_for_embedding_in_pipeline_split",
                              f"{num_layers} layers + embedding/loss = {slots} must divide by "
                              f"pp={pp}")
        per_stage = [slots // pp] * pp
    for s, n in enumerate(per_stage):
        if n % vpp:
            raise ConfigError("layout.vpp", f"pipeline stage {s} holds {n} layer slots, not "
                              f"divisible by vpp={vpp} (Megatron splits a stage's layers evenly "
                              "over its virtual stages)")
    counts = [per_stage[v % pp] // vpp for v in range(pp * vpp)]
    for v, taken, what in ((0, embedding, "first"), (-1, loss, "last")):
        counts[v] -= int(taken)
        if counts[v] < 0:
            raise ConfigError("layout.account_for_embedding_in_pipeline_split",
                              f"the {what} virtual stage has no slot left for the "
                              f"{'embedding' if v == 0 else 'loss'}")
    return tuple(counts)
