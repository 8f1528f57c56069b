"""The malformed-input corpus: a generator of inputs moesim must refuse, with expected answers.

Each :class:`Case` is a command line (``{d}`` stands for the case's own folder), the files it
reads, and the **field** its one-line error must name: for moesim's own errors the line must
start ``moesim: <field>`` (``ConfigError`` puts the field first), for click's flag errors it
must quote the flag (``'--tp'``). The corpus mutates valid inputs of every entry point:
layer-stack scenarios (``run``), step scenarios (``step``), sweep specs (``sweep``), Hugging
Face ``config.json`` files (``plan accounting`` / ``design --model``), fabric settings, and
flags of every command; plus hostile files for every reader (binary, UTF-16, Latin-1, alias
bombs, deep nesting, oversized, ``/dev/zero``, a FIFO, a folder).

``python tests/malformed_corpus.py`` prints the count per entry point.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

SCENARIO: dict[str, Any] = {
    "name": "ep8-hot",
    "description": "corpus base",
    "seed": 1,
    "model": "mixtral-8x7b",
    "gpu": "H100",
    "fabric": {"preset": "hgx-h100"},
    "workload": {
        "ep": 8,
        "layers": 1,
        "tokens_per_rank": 512,
        "seq_len": 4096,
        "dispatch_dtype": "bf16",
        "combine_dtype": "bf16",
        "backward": False,
    },
    "router": {"kind": "hot", "hot_experts": 1, "hot_factor": 6.0},
}
STEP: dict[str, Any] = {
    "name": "mixtral-step",
    "seed": 0,
    "model": "mixtral-8x7b",
    "gpu": "H100",
    "fabric": {"preset": "rail-h100-64", "multipath": "dmodk"},
    "layout": {"tp": 1, "pp": 4, "vpp": 8, "ep": 8, "dp": 16},
    "schedule": "interleaved",
    "global_batch": 256,
    "micro_batch_size": 1,
    "seq_len": 4096,
    "router": {"kind": "uniform"},
    "mode": "fast",
}
SWEEP: dict[str, Any] = {
    "name": "s",
    "base": "ep8-hot-expert",
    "set": {"workload.layers": 1, "workload.backward": False},
    "grid": {"router.hot_factor": [1.0, 2.0]},
    "seeds": {"count": 2},
}
HF: dict[str, Any] = {  # a subset of DeepSeek-V3's config.json (huggingface.co/deepseek-ai)
    "first_k_dense_replace": 3,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "tie_word_embeddings": False,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "v_head_dim": 128,
    "vocab_size": 129280,
}
DROP = object()  # a mutation that removes the key
BIG = 10**9
INF, NAN = float("inf"), float("nan")


@dataclass(frozen=True)
class Case:
    """One malformed input: argv (``{d}``: the case's folder), its files, the expected field."""

    id: str
    argv: tuple[str, ...]
    field: str
    files: dict[str, bytes] = field(default_factory=dict)
    special: str = ""  # "fifo:NAME" | "lock:NAME" | "symlink:LINK->TARGET"
    hostile: bool = False  # run where a hang or a blow-up cannot hurt (limited subprocess)


def _yaml(data: object) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


def _set(base: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    data = copy.deepcopy(base)
    node = data
    keys = path.split(".")
    for key in keys[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    if value is DROP:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value
    return data


# (dotted path, bad value, the field the error must name)
SCENARIO_MUTATIONS: list[tuple[str, object, str]] = [
    ("bogus", 1, "scenario.bogus"),
    ("name", 5, "scenario.name"),
    ("name", [1], "scenario.name"),
    ("description", {"a": 1}, "scenario.description"),
    ("seed", "x", "scenario.seed"),
    ("seed", 1.5, "scenario.seed"),
    ("seed", -1, "scenario.seed"),
    ("seed", True, "scenario.seed"),
    ("model", 5, "scenario.model"),
    ("model", "no-such-model", "model"),
    ("model", [1, 2], "scenario.model"),
    ("gpu", "Z100", "gpu"),
    ("gpu", 5, "scenario.gpu"),
    ("fabric", "x", "fabric"),
    ("fabric.preset", "no-such-fabric", "fabric.preset"),
    ("fabric.preset", 5, "fabric.preset"),
    ("fabric.params", [1], "fabric.params"),
    ("fabric.params.hosts", 1_000_000, "fabric.params.hosts"),
    ("fabric.params.hosts", 0, "fabric.params.hosts"),
    ("fabric.params.hosts", "x", "fabric.params.hosts"),
    ("fabric.params.bogus", 1, "fabric.params.bogus"),
    ("fabric.multipath", "x", "fabric.multipath"),
    ("fabric.batch_window_rel", 1.0, "fabric.batch_window_rel"),
    ("fabric.batch_window_rel", -1.0, "fabric.batch_window_rel"),
    ("fabric.batch_window_rel", NAN, "fabric.batch_window_rel"),
    ("fabric.batch_window_rel", "x", "fabric.batch_window_rel"),
    ("fabric.pxn", "yes", "fabric.pxn"),
    ("fabric.derate", 3, "fabric.derate"),
    ("fabric.faults", "x", "fabric.faults"),
    ("fabric.faults", [1], "fabric.faults"),
    ("fabric.bogus", 1, "fabric.bogus"),
    ("fabric.faults", [{"link": ["gpu0", "nowhere"], "kind": "down"}], "fabric.faults[0].link"),
    ("fabric.faults", [{"link": ["gpu0", "nvs0"], "kind": "melt"}], "fabric.faults[0].kind"),
    ("workload", "x", "workload"),
    ("workload.ep", 0, "workload.ep"),
    ("workload.ep", 3, "workload.ep"),
    ("workload.ep", -1, "workload.ep"),
    ("workload.ep", BIG, "workload.ep"),
    ("workload.ep", "8", "workload.ep"),
    ("workload.layers", 0, "workload.layers"),
    ("workload.layers", 100, "workload.layers"),
    ("workload.layers", BIG, "workload.layers"),
    ("workload.tokens_per_rank", 0, "workload.tokens_per_rank"),
    ("workload.tokens_per_rank", 10**12, "workload.tokens_per_rank"),
    ("workload.tokens_per_rank", 1.5, "workload.tokens_per_rank"),
    ("workload.seq_len", 0, "workload.seq_len"),
    ("workload.seq_len", 10**12, "workload.seq_len"),
    ("workload.dispatch_dtype", "fp4", "workload.dispatch_dtype"),
    ("workload.combine_dtype", 5, "workload.combine_dtype"),
    ("workload.dedup", "x", "workload.dedup"),
    ("workload.backward", 2, "workload.backward"),
    ("workload.first_gpu", -1, "workload.first_gpu"),
    ("workload.first_gpu", 1_000_000, "workload.first_gpu"),
    ("workload.gpu_stride", 0, "workload.gpu_stride"),
    ("workload.gpu_stride", 100, "workload.gpu_stride"),
    ("workload.bogus", 1, "workload.bogus"),
    ("router", "x", "router"),
    ("router.kind", "zzz", "router.kind"),
    ("router.alpha", -1.0, "router.alpha"),
    ("router.alpha", NAN, "router.alpha"),
    ("router.alpha", INF, "router.alpha"),
    ("router.alpha", "x", "router.alpha"),
    ("router.hot_experts", 0, "router.hot_experts"),
    ("router.hot_experts", -1, "router.hot_experts"),
    ("router.hot_experts", 100, "router.hot_experts"),
    ("router.hot_factor", 0.0, "router.hot_factor"),
    ("router.hot_factor", INF, "router.hot_factor"),
    ("router.concentration", 0.0, "router.concentration"),
    ("router.bias_std", NAN, "router.bias_std"),  # < 0 is Megatron's per-layer bias
    ("router.resample", "x", "router.resample"),
    ("router.drift_steps", -1, "router.drift_steps"),
    ("router.capacity_factor", 0.0, "router.capacity_factor"),
    ("router.capacity_factor", "x", "router.capacity_factor"),
    ("router.placement", "x", "router.placement"),
    ("router.redundant_experts", -1, "router.redundant_experts"),
    ("router.redundant_experts", 10**6, "router.redundant_experts"),
    ("router.bogus", 1, "router.bogus"),
    ("slow_gpus", "x", "scenario.slow_gpus"),
    ("slow_gpus", [1], "scenario.slow_gpus"),
    ("slow_gpus", {"x": 2.0}, "slow_gpus"),
    ("slow_gpus", {0: 0.5}, "slow_gpus.0"),
    ("slow_gpus", {0: INF}, "slow_gpus.0"),
    ("slow_gpus", {0: NAN}, "slow_gpus.0"),
    ("slow_gpus", {100: 2.0}, "slow_gpus.100"),
    ("slow_gpus", {-1: 2.0}, "slow_gpus.-1"),
    ("slow_gpus", {0: "x"}, "slow_gpus.0"),
]
MODEL_MUTATIONS: list[tuple[str, object, str]] = [  # on an inline model mapping
    ("hidden_size", 0, "model.hidden_size"),
    ("hidden_size", -1, "model.hidden_size"),
    ("hidden_size", "x", "model.hidden_size"),
    ("hidden_size", 1e30, "model.hidden_size"),
    ("hidden_size", 10**12, "model.hidden_size"),
    ("num_layers", BIG, "model.num_layers"),
    ("num_layers", 0, "model.num_layers"),
    ("top_k", 100, "model.top_k"),
    ("num_attention_heads", 0, "model.num_attention_heads"),
    ("bogus", 1, "model.bogus"),
    ("n_routed_experts", 10**7, "model.n_routed_experts"),
    ("vocab_size", 10**12, "model.vocab_size"),
    ("name", DROP, "model.name"),
    ("moe_layers", "x", "model.moe_layers"),
]
INLINE_MODEL = {
    "name": "m",
    "hidden_size": 4096,
    "num_layers": 4,
    "vocab_size": 32000,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "attention": "gqa",
    "intermediate_size": 14336,
    "n_routed_experts": 8,
    "moe_intermediate_size": 14336,
    "top_k": 2,
}
STEP_MUTATIONS: list[tuple[str, object, str]] = [
    ("layout", "x", "layout"),
    ("layout.tp", 0, "layout.tp"),
    ("layout.tp", -1, "layout.tp"),
    ("layout.tp", "x", "layout.tp"),
    ("layout.tp", BIG, "layout.tp"),
    ("layout.pp", 0, "layout.pp"),
    ("layout.pp", 3, "step.global_batch"),
    ("layout.ep", 3, "layout.ep"),
    ("layout.etp", 0, "layout.etp"),
    ("layout.cp", 0, "layout.cp"),
    ("layout.dp", 0, "layout.dp"),
    ("layout.dp", BIG, "layout.dp"),
    ("layout.dp", 32, "layout"),
    ("layout.bogus", 1, "layout.bogus"),
    ("layout.vpp", 0, "layout.vpp"),
    ("schedule", "zzz", "schedule"),
    ("schedule", 5, "step.schedule"),
    ("global_batch", 0, "step.global_batch"),
    ("global_batch", -16, "step.global_batch"),
    ("global_batch", 1.6e11, "step.global_batch"),
    ("global_batch", 160_000_000_000, "step.global_batch"),
    ("global_batch", 255, "step.global_batch"),
    ("global_batch", "x", "step.global_batch"),
    ("global_batch", INF, "step.global_batch"),
    ("micro_batch_size", 0, "step.micro_batch_size"),
    ("micro_batch_size", -1, "step.micro_batch_size"),
    ("micro_batch_size", "x", "step.micro_batch_size"),
    ("micro_batch_size", BIG, "step.micro_batch_size"),
    ("seq_len", 0, "step.seq_len"),
    ("seq_len", -1, "step.seq_len"),
    ("seq_len", 10**12, "step.seq_len"),
    ("seq_len", "x", "step.seq_len"),
    ("dispatch_dtype", "fp4", "step.dispatch_dtype"),
    ("combine_dtype", "x", "step.combine_dtype"),
    ("grad_reduce_dtype", "int3", "step.grad_reduce_dtype"),
    ("compute_dtype", "fp64", "step.compute_dtype"),
    ("dispatcher", "x", "step.dispatcher"),
    ("dedup", "x", "step.dedup"),
    ("lm_head", 2, "step.lm_head"),
    ("dp_overlap", None, "step.dp_overlap"),
    ("fb_overlap", "yes", "step.fb_overlap"),
    ("slow_gpus", {0: INF}, "slow_gpus.0"),
    ("slow_gpus", {100_000: 2.0}, "slow_gpus.100000"),
    ("slow_gpus", {0: 0.5}, "slow_gpus.0"),
    ("slow_gpus", {0: NAN}, "slow_gpus.0"),
    ("slow_gpus", {-3: 2.0}, "slow_gpus.-3"),
    ("mode", "x", "mode"),
    ("mode", 5, "step.mode"),
    ("seed", -1, "step.seed"),
    ("seed", "x", "step.seed"),
    ("fabric.params.hosts", 1_000_000, "fabric.params.hosts"),
    ("fabric.preset", "zzz", "fabric.preset"),
    ("fabric.params.hosts", 1, "layout"),
    ("fabric.multipath", "x", "fabric.multipath"),
    ("model", "zzz", "model"),
    ("model", 5, "scenario.model"),
    ("gpu", "Z100", "gpu"),
    ("router.kind", "zzz", "router.kind"),
    ("name", 5, "step.name"),
    ("bogus", 1, "step.bogus"),
    ("description", [1], "step.description"),
]
SWEEP_MUTATIONS: list[tuple[str, object, str]] = [
    ("bogus", 1, "sweep.bogus"),
    ("base", DROP, "sweep.base"),
    ("base", 5, "sweep.base"),
    ("base", "no-such-scenario", "sweep.base"),
    ("base", "missing.yaml", "sweep.base"),
    ("set", "x", "sweep.set"),
    ("set", {"router.zzz": 1}, "router.zzz"),
    ("set", {"workload.ep": 0}, "workload.ep"),
    ("set", {"zzz": 1}, "zzz"),
    ("grid", "x", "sweep.grid"),
    ("grid", {"router.zzz": [1]}, "router.zzz"),
    ("grid", {"router.hot_factor": 2.0}, "sweep.grid.router.hot_factor"),
    ("grid", {"router.hot_factor": []}, "sweep.grid.router.hot_factor"),
    ("grid", {"workload.layers": [1, 2]}, "workload.layers"),
    ("grid", {"router.hot_factor": [1.0, 1.0]}, "sweep"),
    ("zip", {"router.alpha": [1, 2], "router.hot_factor": [1.0]}, "sweep.zip"),
    ("zip", "x", "sweep.zip"),
    ("seeds", [-1, 2], "sweep.seeds"),
    ("seeds", {"count": -1}, "sweep.seeds"),
    ("seeds", {"count": 1_000_000_000}, "sweep.seeds"),
    ("seeds", {"count": 1e9}, "sweep.seeds"),
    ("seeds", {"count": 2, "start": -5}, "sweep.seeds"),
    ("seeds", [1.5], "sweep.seeds"),
    ("seeds", "x", "sweep.seeds"),
    ("seeds", [], "sweep.seeds"),
    ("seeds", {"count": 2, "start": "x"}, "sweep.seeds"),
    ("seeds", {"bogus": 1}, "sweep.seeds"),
    ("name", [1], "sweep.name"),
    ("description", {"a": 1}, "sweep.description"),
    ("grid", {"router.hot_factor": [-1.0, -2.0]}, "router.hot_factor"),
    (
        "grid",
        {"router.hot_factor": list(range(1, 1001)), "router.alpha": list(range(1001))},
        "sweep",
    ),
]
HF_MUTATIONS: list[tuple[str, object, str]] = [
    *(
        (key, DROP, f"model.{key}")
        for key in (
            "hidden_size",
            "num_hidden_layers",
            "vocab_size",
            "num_attention_heads",
            "moe_intermediate_size",
            "num_experts_per_tok",
        )
    ),
    *(
        (key, bad, f"model.{key}")
        for key in (
            "hidden_size",
            "num_hidden_layers",
            "vocab_size",
            "num_attention_heads",
            "n_routed_experts",
        )
        for bad in ("x", 1.5, True, -1)
    ),
    ("num_hidden_layers", 1_000_000_000, "model.num_hidden_layers"),
    ("num_hidden_layers", 0, "model.num_hidden_layers"),
    ("hidden_size", 10**15, "model.hidden_size"),
    ("n_routed_experts", 10**8, "model.n_routed_experts"),
    ("first_k_dense_replace", -1, "model.first_k_dense_replace"),
    ("first_k_dense_replace", "x", "model.first_k_dense_replace"),
    ("first_k_dense_replace", 1000, "model.first_k_dense_replace"),
    ("moe_layer_freq", "+".join(["1"] * 5000), "model.moe_layer_freq"),
    ("moe_layer_freq", "*".join(["[1]"] + ["2"] * 3000), "model.moe_layer_freq"),
    ("moe_layer_freq", "(" * 3000 + "1" + ")" * 3000, "model.moe_layer_freq"),
    ("moe_layer_freq", "[1]*10**12", "model.moe_layer_freq"),
    ("moe_layer_freq", "__import__('os').system('true')", "model.moe_layer_freq"),
    ("moe_layer_freq", "[[1]]", "model.moe_layer_freq"),
    ("moe_layer_freq", 0, "model.moe_layer_freq"),
    ("moe_layer_freq", -1, "model.moe_layer_freq"),
    ("moe_layer_freq", True, "model.moe_layer_freq"),
    ("moe_layer_freq", {"a": 1}, "model.moe_layer_freq"),
    ("moe_layer_freq", "([0]*3+[1]*50)", "model.moe_layer_freq"),
    ("moe_layer_freq", "[2]*61", "model.moe_layer_freq"),
    ("moe_layer_freq", "1 +", "model.moe_layer_freq"),
    ("n_group", 0, "model.n_group"),
    ("n_group", 3, "model.n_group"),
    ("topk_group", 99, "model.topk_group"),
    ("num_experts_per_tok", 1000, "model.num_experts_per_tok"),
    ("num_experts_per_tok", 0, "model.num_experts_per_tok"),
    ("kv_lora_rank", "x", "model.kv_lora_rank"),
    ("text_config", 5, "model.text_config"),
    ("tie_word_embeddings", "yes", "model.tie_word_embeddings"),
    ("topk_method", 5, "model.topk_method"),
    ("num_nextn_predict_layers", -1, "model.num_nextn_predict_layers"),
    ("num_nextn_predict_layers", BIG, "model.num_nextn_predict_layers"),
    ("q_lora_rank", -5, "model.q_lora_rank"),
    ("qk_rope_head_dim", 0, "model.qk_rope_head_dim"),
]
QWEN_MUTATIONS: list[tuple[str, object, str]] = [
    ("mlp_only_layers", "x", "model.mlp_only_layers"),
    ("mlp_only_layers", [999], "model.mlp_only_layers"),
    ("decoder_sparse_step", 0, "model.decoder_sparse_step"),
    ("decoder_sparse_step", "x", "model.decoder_sparse_step"),
]

# hostile files for every reader: name -> (bytes, expected problem is the reader's field)
_BOMB = (
    "\n".join(
        ["l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
        + [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    )
    + "\n"
)
YAML_FILES: dict[str, bytes] = {
    "binary": bytes(range(256)) * 4,
    "utf16": "name: x\nseed: 1\n".encode("utf-16"),
    "latin1": "name: café\n".encode("latin-1"),
    "empty": b"",
    "list": b"- 1\n- 2\n",
    "scalar": b"just words\n",
    "syntax": b"name: [unclosed\n",
    "tabs": b"a:\n\t- 1\n",
    "bomb": _BOMB.encode(),
    "recursive": b"a: &a [1, *a]\n",
    "deep": b"[" * 5000 + b"]" * 5000,
    "deep_blocks": "".join("  " * i + f"k{i}:\n" for i in range(60)).encode() + b"  " * 60 + b"x\n",
    "big": b"# " + b"x" * (2 << 20) + b"\n",
    "nul": b"name: a\0b\n",
    "aliases": ("a: &a 1\nb: [" + ", ".join(["*a"] * 200) + "]\n").encode(),
}
JSON_FILES: dict[str, bytes] = {
    "binary": bytes(range(256)) * 4,
    "utf16": json.dumps(HF).encode("utf-16"),
    "latin1": b'{"model_type": "caf\xe9"}',
    "empty": b"",
    "list": b"[1, 2]",
    "scalar": b"3",
    "syntax": b'{"hidden_size": }',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "deep_obj": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "big": b" " * (2 << 20) + b"{}",
    "nan": b'{"hidden_size": NaN}',
    "trailing": json.dumps(HF).encode() + b" garbage",
}
HOSTILE_FILES = {"bomb", "deep", "deep_blocks", "big", "deep_obj"}

# command lines: (id, argv, field); files come from ``_valid_files``
_OK_S, _OK_STEP, _OK_SW, _OK_HF = "{d}/s.yaml", "{d}/step.yaml", "{d}/sw.yaml", "{d}/config.json"
FLAG_CASES: list[tuple[str, tuple[str, ...], str]] = [
    ("root-unknown-command", ("nope",), "'nope'"),
    ("root-unknown-option", ("--bogus",), "--bogus"),
    ("run-missing-arg", ("run",), "'SCENARIO'"),
    ("run-unknown-name", ("run", "no-such-scenario"), "scenario"),
    ("run-seed-x", ("run", _OK_S, "--seed", "x"), "'--seed'"),
    ("run-seed-neg", ("run", _OK_S, "--seed", "-1"), "--seed"),
    ("run-bogus", ("run", _OK_S, "--bogus"), "--bogus"),
    ("run-out-dir", ("run", _OK_S, "--out", "{d}"), "--out"),
    ("run-out-nodir", ("run", _OK_S, "--out", "{d}/no/x.json"), "--out"),
    ("run-out-input", ("run", _OK_S, "--out", _OK_S), "--out"),
    ("run-trace-input", ("run", _OK_S, "--trace", _OK_S), "--trace"),
    ("run-saverun-input", ("run", _OK_S, "--save-run", _OK_S), "--save-run"),
    ("run-out-link-input", ("run", _OK_S, "--out", "{d}/link.json"), "--out"),
    ("run-trace-link-input", ("run", _OK_S, "--trace", "{d}/link.json"), "--trace"),
    (
        "run-out-trace-same",
        ("run", _OK_S, "--out", "{d}/a.json", "--trace", "{d}/a.json"),
        "--trace",
    ),
    ("run-out-devnull", ("run", _OK_S, "--out", "/dev/null"), "--out"),
    ("run-trace-nodir", ("run", _OK_S, "--trace", "{d}/no/t.json"), "--trace"),
    ("run-saverun-nodir", ("run", _OK_S, "--save-run", "{d}/no/r.json"), "--save-run"),
    ("step-missing-arg", ("step",), "'SCENARIO'"),
    ("step-unknown-name", ("step", "no-such-step"), "scenario"),
    ("step-mb-zero", ("step", _OK_STEP, "--microbatches", "0"), "--microbatches"),
    ("step-mb-neg", ("step", _OK_STEP, "--microbatches", "-1"), "--microbatches"),
    ("step-mb-huge", ("step", _OK_STEP, "--microbatches", "1000000000"), "--microbatches"),
    ("step-mb-x", ("step", _OK_STEP, "--microbatches", "x"), "'--microbatches'"),
    ("step-mode", ("step", _OK_STEP, "--mode", "zzz"), "'--mode'"),
    ("step-seed-neg", ("step", _OK_STEP, "--seed", "-5"), "--seed"),
    ("step-seed-x", ("step", _OK_STEP, "--seed", "x"), "'--seed'"),
    ("step-out-input", ("step", _OK_STEP, "--out", _OK_STEP), "--out"),
    ("step-out-dir", ("step", _OK_STEP, "--out", "{d}"), "--out"),
    ("step-out-nodir", ("step", _OK_STEP, "--out", "{d}/no/x.json"), "--out"),
    ("sweep-missing-arg", ("sweep",), "'SPEC'"),
    ("sweep-unknown-name", ("sweep", "no-such-sweep"), "sweep"),
    ("sweep-j0", ("sweep", _OK_SW, "-j", "0", "--out", "{d}/r.csv"), "-j"),
    ("sweep-jneg", ("sweep", _OK_SW, "-j", "-2", "--out", "{d}/r.csv"), "-j"),
    ("sweep-jx", ("sweep", _OK_SW, "-j", "x"), "'-j'"),
    ("sweep-jhuge", ("sweep", _OK_SW, "-j", "100000", "--out", "{d}/r.csv"), "-j"),
    (
        "sweep-dask-bad",
        ("sweep", _OK_SW, "--dask", "not an address", "--out", "{d}/r.csv"),
        "--dask",
    ),
    (
        "sweep-dask-port",
        ("sweep", _OK_SW, "--dask", "tcp://127.0.0.1:notaport", "--out", "{d}/r.csv"),
        "--dask",
    ),
    ("sweep-dask-scheme", ("sweep", _OK_SW, "--dask", "zzz://x:1", "--out", "{d}/r.csv"), "--dask"),
    ("sweep-out-spec", ("sweep", _OK_SW, "--out", _OK_SW), "--out"),
    ("sweep-out-parquet", ("sweep", _OK_SW, "--out", "{d}/r.parquet"), "--out"),
    ("sweep-out-dir", ("sweep", _OK_SW, "--out", "{d}"), "--out"),
    ("sweep-out-base", ("sweep", "{d}/swf.yaml", "--out", "{d}/base.yaml"), "--out"),
    ("sweep-out-summary-spec", ("sweep", "{d}/r.summary.csv", "--out", "{d}/r.csv"), "--out"),
    ("sweep-locked", ("sweep", _OK_SW, "--out", "{d}/r.csv"), "--out"),
    ("sweep-other-header", ("sweep", _OK_SW, "--out", "{d}/other.csv"), "~other.csv"),
    ("design-gpus-0", ("design", "--gpus", "0"), "gpus"),
    ("design-gpus-neg", ("design", "--gpus", "-8"), "gpus"),
    ("design-gpus-x", ("design", "--gpus", "x"), "'--gpus'"),
    ("design-gpus-7", ("design", "--gpus", "7"), "gpus"),  # not a whole number of hosts
    ("design-gpus-huge", ("design", "--gpus", "1000000000"), "gpus"),
    ("design-tokens-inf", ("design", "--tokens", "inf"), "tokens"),
    ("design-tokens-nan", ("design", "--tokens", "nan"), "tokens"),
    ("design-tokens-neg", ("design", "--tokens", "-1"), "tokens"),
    ("design-tokens-zero", ("design", "--tokens", "0"), "tokens"),
    ("design-tokens-x", ("design", "--tokens", "x"), "'--tokens'"),
    ("design-days-zero", ("design", "--days", "0"), "days"),
    ("design-days-inf", ("design", "--days", "inf"), "days"),
    ("design-days-nan", ("design", "--days", "nan"), "days"),
    ("design-seq-0", ("design", "--seq-len", "0"), "seq_len"),
    ("design-seq-huge", ("design", "--seq-len", str(10**12)), "seq_len"),
    ("design-gb-0", ("design", "--global-batch", "0"), "global_batch"),
    ("design-gb-huge", ("design", "--global-batch", str(10**12)), "global_batch"),
    ("design-top-0", ("design", "--simulate-min", "0"), "simulate_min"),
    ("design-gpu", ("design", "--gpu", "Z100"), "gpu"),
    ("design-fabric", ("design", "--fabric", "zzz"), "fabric"),
    ("design-model", ("design", "--model", "no-such-model"), "model"),
    ("design-model-devzero", ("design", "--model", "/dev/zero"), "model.path"),
    ("design-model-dir", ("design", "--model", "{d}/emptydir"), "model.path"),
    ("design-out-model", ("design", "--model", _OK_HF, "--out", _OK_HF), "--out"),
    ("design-out-nodir", ("design", "--out", "{d}/no/r.md"), "--out"),
    ("design-out-dir", ("design", "--out", "{d}"), "--out"),
    ("layouts-gpus-0", ("plan", "layouts", "--gpus", "0"), "gpus"),
    ("accounting-model", ("plan", "accounting", "--model", "zzz"), "model"),
    ("accounting-seq-0", ("plan", "accounting", "--seq-len", "0"), "seq_len"),
    ("accounting-seq-huge", ("plan", "accounting", "--seq-len", str(10**12)), "seq_len"),
    ("memory-tp-0", ("plan", "memory", "--tp", "0"), "layout.tp"),
    ("memory-ep-3", ("plan", "memory", "--ep", "3"), "layout.ep"),
    ("memory-dp-huge", ("plan", "memory", "--dp", str(10**9)), "layout.dp"),
    ("memory-gpu", ("plan", "memory", "--gpu", "Z100"), "gpu"),
    ("memory-seq-0", ("plan", "memory", "--seq-len", "0"), "seq_len"),
    ("memory-gb-0", ("plan", "memory", "--global-batch", "0"), "global_batch"),
    ("plan-unknown", ("plan", "zzz"), "'zzz'"),
    ("place-tp-0", ("place", "hgx-h100", "--tp", "0"), "layout.tp"),
    ("place-tp-neg", ("place", "hgx-h100", "--tp", "-1"), "layout.tp"),
    ("place-pp-0", ("place", "hgx-h100", "--pp", "0"), "layout.pp"),
    ("place-cp-0", ("place", "hgx-h100", "--cp", "0"), "layout.cp"),
    ("place-dp-0", ("place", "hgx-h100", "--dp", "0"), "layout.dp"),
    ("place-dp-huge", ("place", "hgx-h100", "--dp", str(10**9)), "layout.dp"),
    ("place-tp-big", ("place", "hgx-h100", "--tp", "16"), "layout"),
    ("place-tp-x", ("place", "hgx-h100", "--tp", "x"), "'--tp'"),
    ("place-fabric", ("place", "zzz"), "preset"),
    ("topo-unknown", ("topo", "zzz"), "preset"),
    ("topo-draw-nodir", ("topo", "hgx-h100", "--draw", "{d}/no/f.png"), "--draw"),
    ("topo-draw-ext", ("topo", "hgx-h100", "--draw", "{d}/f.txt"), "--draw"),
    ("topo-draw-dir", ("topo", "hgx-h100", "--draw", "{d}"), "--draw"),
    ("plot-kind", ("plot", "zzz", _OK_S, "-o", "{d}/f.png"), "~'zzz' is not one of"),
    ("plot-no-out", ("plot", "timeline", _OK_S), "'-o'"),
    ("plot-missing-file", ("plot", "timeline", "{d}/nope.json", "-o", "{d}/f.png"), "'RESULTS"),
    ("plot-ext", ("plot", "timeline", "{d}/run.json", "-o", "{d}/f.txt"), "-o"),
    ("plot-out-nodir", ("plot", "timeline", "{d}/run.json", "-o", "{d}/no/f.png"), "-o"),
    ("plot-out-input", ("plot", "breakdown", "{d}/run.json", "-o", "{d}/run.json"), "-o"),
    ("plot-x-kind", ("plot", "timeline", "{d}/run.json", "-o", "{d}/f.png", "--x", "a"), "x"),
    (
        "plot-two-timeline",
        ("plot", "timeline", "{d}/run.json", "{d}/run.json", "-o", "{d}/f.png"),
        "results",
    ),
    *(
        (f"plot-{kind}-{shape}", ("plot", kind, f"{{d}}/{shape}", "-o", "{d}/f.png"), "results")
        for kind in ("congestion", "timeline", "breakdown", "stragglers", "sweep")
        for shape in ("list.json", "keys.json", "empty.json", "text.json", "s.yaml")
    ),
    ("plot-sweep-x", ("plot", "sweep", "{d}/sweep.csv", "-o", "{d}/f.png", "--x", "zzz"), "x"),
    ("validate-kind", ("validate", "--kind", "zzz"), "'--kind'"),
    ("scenarios-extra", ("scenarios", "extra"), "~(extra)"),
]

_SWEEP_CSV = (
    b"point_id,router.alpha,seed,step_time_s,imbalance_excess_s,congestion_excess_s,"
    b"dropped_tokens,error\nabc,1,1,0.5,0.1,0.1,0,\n"
)


def _valid_files() -> dict[str, bytes]:
    """The valid inputs every case may refer to (a case's own files replace them)."""
    return {
        "s.yaml": _yaml(SCENARIO),
        "step.yaml": _yaml(STEP),
        "sw.yaml": _yaml(SWEEP),
        "config.json": json.dumps(HF).encode(),
        "base.yaml": _yaml(SCENARIO),
        "swf.yaml": _yaml({**SWEEP, "base": "base.yaml"}),
        "other.csv": b"a,b\n1,2\n",
        "run.json": b"{}",
        "sweep.csv": _SWEEP_CSV,
        "list.json": b"[1, 2]",
        "keys.json": b'{"a": 1}',
        "empty.json": b"",
        "text.json": b"not json at all",
    }


def _mutated(
    prefix: str,
    argv: tuple[str, ...],
    name: str,
    base: dict[str, Any],
    table: list[tuple[str, object, str]],
    dump: Any = _yaml,
) -> list[Case]:
    cases = []
    for i, (path, value, fld) in enumerate(table):
        data = dump(_set(base, path, value))
        cases.append(Case(f"{prefix}-{i:03d}-{path}", argv, fld, {name: data}))
    return cases


SHAPE_FIELDS = {
    "topo": "preset",
    "run": "scenario",
    "step": "step",
    "sweep": "sweep",
    "sweep-base": "sweep.base",
    "hf": "model.path",
    "design-hf": "model.path",
}
"""A file of the wrong shape (a list, a scalar, nothing) is reported as the top-level field."""
SPECIAL_FIELDS = {"step": "scenario"}
"""Where a path that is no file at all is reported by the command's argument instead."""


def _file_cases(
    prefix: str, argv: tuple[str, ...], name: str, files: dict[str, bytes], fld: str
) -> list[Case]:
    cases = [
        Case(
            f"{prefix}-file-{kind}",
            argv,
            SHAPE_FIELDS[prefix] if kind in ("list", "scalar", "empty") else fld,
            {name: data},
            hostile=kind in HOSTILE_FILES,
        )
        for kind, data in files.items()
    ]
    path = "{d}/" + name
    for special, target in (
        ("devzero", "/dev/zero"),
        ("fifo", "{d}/fifo"),
        ("dir", "{d}/emptydir"),
    ):
        if prefix == "sweep-base":  # the base is named inside the sweep file
            files_ = {"swf.yaml": _yaml({**SWEEP, "base": target.replace("{d}/", "")})}
            cases.append(Case(f"{prefix}-file-{special}", argv, fld, files_, hostile=True))
            continue
        swapped = tuple(target if a == path else a for a in argv)
        cases.append(
            Case(f"{prefix}-file-{special}", swapped, SPECIAL_FIELDS.get(prefix, fld), hostile=True)
        )
    return cases


def build_corpus() -> list[Case]:
    """Every malformed input, with the field its answer must name."""
    run, step = ("run", _OK_S), ("step", _OK_STEP)
    sweep = ("sweep", _OK_SW, "--out", "{d}/r.csv")
    acct = ("plan", "accounting", "--model", _OK_HF)
    inline = {**SCENARIO, "model": INLINE_MODEL}
    cases = [
        *_mutated("run", run, "s.yaml", SCENARIO, SCENARIO_MUTATIONS),
        *_mutated(
            "run-model",
            run,
            "s.yaml",
            inline,
            [(f"model.{p}", v, f) for p, v, f in MODEL_MUTATIONS],
        ),
        *_mutated("step", step, "step.yaml", STEP, STEP_MUTATIONS),
        *_mutated("sweep", sweep, "sw.yaml", SWEEP, SWEEP_MUTATIONS),
        *_mutated("hf", acct, "config.json", HF, HF_MUTATIONS, lambda d: json.dumps(d).encode()),
        *_mutated(
            "qwen",
            acct,
            "config.json",
            {**HF, "decoder_sparse_step": 1},
            QWEN_MUTATIONS,
            lambda d: json.dumps(d).encode(),
        ),
        *_file_cases("run", run, "s.yaml", YAML_FILES, "scenario"),
        *_file_cases("step", step, "step.yaml", YAML_FILES, "step scenario"),
        *_file_cases("sweep", sweep, "sw.yaml", YAML_FILES, "sweep"),
        *_file_cases(
            "sweep-base",
            ("sweep", "{d}/swf.yaml", "--out", "{d}/r.csv"),
            "base.yaml",
            YAML_FILES,
            "sweep.base",
        ),
        *_file_cases("hf", acct, "config.json", JSON_FILES, "model.path"),
        *_file_cases("topo", ("topo", "{d}/f.yaml"), "f.yaml", YAML_FILES, "preset"),
        *_file_cases(
            "design-hf",
            ("design", "--model", _OK_HF),
            "config.json",
            {k: v for k, v in JSON_FILES.items() if k in ("binary", "utf16", "deep")},
            "model.path",
        ),
    ]
    for name, argv, fld in FLAG_CASES:
        special = {"sweep-locked": "lock:r.csv"}.get(name, "")
        files = {"r.summary.csv": _yaml({**SWEEP, "name": "r"})} if "summary" in name else {}
        cases.append(Case(f"flag-{name}", argv, fld, files, special=special))
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids), "case ids must be unique"
    return [replace(c, field=one_language(c)) for c in cases]


ONE_LANGUAGE = {
    "scenario.gpu": "hardware.gpu",
    "workload.ep": "layout.ep",
    "workload.first_gpu": "placement.first_gpu",
    "workload.gpu_stride": "placement.gpu_stride",
    "step scenario": "scenario",
    "step": "scenario",
}
STEP_WORKLOAD = ("global_batch", "micro_batch_size", "seq_len", "dispatch_dtype", "combine_dtype",
                 "grad_reduce_dtype", "compute_dtype", "dispatcher", "dedup", "lm_head",
                 "dp_overlap", "fb_overlap", "recompute")


def one_language(case: Case) -> str:
    """The field an answer names once an old-language scenario (the corpus writes the old
    layer-stack and step shapes) is converted to the one language (moesim.scenario.legacy)."""
    fld = case.field
    if not case.id.startswith(("run", "step", "sweep")):
        return fld
    if case.id == "step-006-layout.pp":  # pp=3 under interleaved: the schedule names it
        return "~microbatches"
    if fld.startswith("step."):
        name = fld.removeprefix("step.")
        return f"workload.{name}" if name in STEP_WORKLOAD else f"scenario.{name}"
    return ONE_LANGUAGE.get(fld, fld)


def entry_point(case: Case) -> str:
    """The entry point a case exercises (for the per-entry counts)."""
    return case.id.split("-")[0]


if __name__ == "__main__":
    from collections import Counter

    corpus = build_corpus()
    print(len(corpus), dict(Counter(entry_point(c) for c in corpus)))
