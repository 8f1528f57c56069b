"""Megatron-LM arguments of a design: every flag exists in Megatron-LM, and the Markdown
shows exactly the JSON record's list."""

from __future__ import annotations

import shlex

import pytest

from moesim.hardware import get_gpu
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.plan.candidates import check_layout
from moesim.plan.megatron import MEGATRON_COMMIT, layer_freq, megatron_args
from moesim.plan.report import _megatron
from moesim.plan.spec import DesignSpec

MEGATRON_VERSION = ("NVIDIA/Megatron-LM", "000c4ac24f61159c138b0975def722c65245983c",
                    "megatron/training/arguments.py")
"""Where the flags were read (add_argument names of the groups network size,
training, mixed precision, distributed, MoE, MLA, tokenizer, data, Transformer-Engine)."""
FLAGS_TEXT = """
--num-layers --hidden-size --ffn-hidden-size --num-attention-heads --kv-channels
--group-query-attention --num-query-groups --max-position-embeddings
--position-embedding-type --normalization --swiglu --untie-embeddings-and-output-weights
--multi-latent-attention --mtp-num-layers --qk-layernorm --disable-bias-linear
--micro-batch-size --global-batch-size --recompute-granularity --recompute-method
--recompute-num-layers --recompute-modules --sequence-parallel --bf16 --fp16
--grad-reduce-in-bf16 --fp8-format --tensor-model-parallel-size
--pipeline-model-parallel-size --decoder-first-pipeline-num-layers
--decoder-last-pipeline-num-layers --num-layers-per-virtual-pipeline-stage
--overlap-grad-reduce --overlap-param-gather --use-distributed-optimizer
--context-parallel-size --expert-model-parallel-size --expert-tensor-parallel-size
--num-experts --moe-layer-freq --moe-ffn-hidden-size --moe-shared-expert-intermediate-size
--moe-grouped-gemm --moe-router-load-balancing-type --moe-router-score-function
--moe-router-topk --moe-router-num-groups --moe-router-group-topk
--moe-router-enable-expert-bias --moe-token-dispatcher-type --q-lora-rank --kv-lora-rank
--qk-head-dim --qk-pos-emb-head-dim --v-head-dim --vocab-size --seq-length
"""
MEGATRON_FLAGS = frozenset(FLAGS_TEXT.split())

CASES = [
    ("moe-1t", ParallelLayout(tp=2, pp=16, ep=8, dp=128), 4096, "bf16"),
    ("deepseek-v3", ParallelLayout(pp=16, ep=64, dp=128), 2048, "fp8"),
    ("mixtral-8x7b", ParallelLayout(pp=4, vpp=8, ep=8, dp=16), 64, "bf16"),
    ("qwen3-235b-a22b", ParallelLayout(tp=4, pp=8, ep=16, cp=2, dp=16), 1024, "bf16"),
]


def _args(name: str, layout: ParallelLayout, gpus: int, precision: str) -> list[str]:
    spec = DesignSpec(model=name, gpus=gpus, global_batch=1024, precision=precision)
    model = get_model(name)
    cand = check_layout(spec, model, get_gpu("H200"), layout)
    return megatron_args(model, cand, spec.seq_len, spec.micro_batch_size, precision)


@pytest.mark.parametrize("name, layout, gpus, precision", CASES)
def test_every_flag_is_megatron(name: str, layout: ParallelLayout, gpus: int,
                                precision: str) -> None:
    args = _args(name, layout, gpus, precision)
    flags = [a for a in args if a.startswith("--")]
    assert set(flags) <= MEGATRON_FLAGS, set(flags) - MEGATRON_FLAGS
    assert len(flags) == len(set(flags))  # no flag twice
    assert args[args.index("--num-layers") + 1] == str(get_model(name).num_layers)
    assert "--recompute-granularity" in args and "--use-distributed-optimizer" in args


def test_markdown_is_the_json_list() -> None:
    args = _args("moe-1t", ParallelLayout(tp=2, pp=16, ep=8, dp=128), 4096, "bf16")
    block = _megatron({"megatron_args": args, "megatron_commit": MEGATRON_COMMIT})
    code = block[block.index("```") + 1: block.index("```", block.index("```") + 1)]
    assert shlex.split(" ".join(line.rstrip("\\") for line in code)) == args
    assert MEGATRON_VERSION[1] == MEGATRON_COMMIT


def test_layer_freq_compresses_runs() -> None:
    assert layer_freq((False,) * 3 + (True,) * 58) == "([0]*3+[1]*58)"
    assert layer_freq((True, False, True)) == "([1]*1+[0]*1+[1]*1)"
