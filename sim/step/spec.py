"""What one simulated training step is: model, GPU, fabric, parallel layout, schedule, batch.

Scope (checked here, so a spec that validates is one :func:`moesim.step.run_step` can simulate):
tensor parallelism always with sequence parallelism (Megatron requires it for MoE with TP),
context parallelism as ring attention, expert-tensor parallelism; every rank of the layout
runs on GPU ``rank`` of the fabric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from moesim.errors import ConfigError
from moesim.hardware import PRECISIONS, check_precision_gpu, get_gpu, get_precision
from moesim.model import ModelConfig
from moesim.parallel.layout import ParallelLayout
from moesim.parallel.memory import choose_recompute
from moesim.router import RouterConfig
from moesim.scenario.schema import FabricSpec
from moesim.schedule import build_schedule, get_schedule
from moesim.schedule.ops import ScheduleOps
from moesim.schedule.placement import Placement
from moesim.step.recompute import check_recompute
from moesim.workload.costs import WIRE_DTYPES
from moesim.workload.dispatchers import DISPATCHER_NAMES, get_dispatcher

COMPUTE_DTYPES = tuple(PRECISIONS)
"""Precision of the decoder layers' GEMMs (forward, dgrad and wgrad), as users name it:
``bf16``, ``fp8-cs`` (per-tensor current scaling), ``fp8-block`` (DeepSeek-V3's 1x128 /
128x128 blocks), ``mxfp8`` (Blackwell only), and ``fp8`` (FP8 GEMMs with their quantisation
kernels left out). FP8 precisions run the GEMMs at the FP8 matmul rate, as in DeepSeek-V3's FP8
mixed-precision training (technical report, arXiv:2412.19437, section 3.3.1), and charge their
casts (:mod:`moesim.hardware.precision`); the attention core, the router, the embedding and
the LM head stay BF16 there and here."""
DISPATCHERS = DISPATCHER_NAMES
"""How the MoE all-to-alls move tokens (:mod:`moesim.workload.dispatchers`). ``alltoall``: one
NCCL-style all-to-all between the EP ranks (Megatron's alltoall token dispatcher), a token once
per destination rank with ``dedup`` (else once per routed expert). ``deepep``: DeepEP's normal
kernels, a token once per destination node (at most 8 EP ranks) over RDMA to its rail peer,
which forwards it over NVLink. ``deepep-ll``: DeepEP's low-latency kernels, one copy per routed
expert straight to its rank (NVLink inside the domain, RDMA across), ``dedup`` ignored.
``hybridep``: NVIDIA's HybridEP, DeepEP's two legs with the whole NVLink domain as the node.
The forwarding ones need the GPU's NVLink domains on the fabric and etp = 1."""
GRAD_REDUCE_BYTES = {"fp32": 4, "bf16": 2}
"""Bytes per gradient element in the DP/EDP reduce-scatter. Megatron-LM reduces in fp32 by
default: with ``--bf16`` and without ``--grad-reduce-in-bf16`` (default off) it sets
``accumulate_allreduce_grads_in_fp32``, so the fp32 ``main_grad`` buffers are what the
distributed optimizer reduce-scatters (megatron/training/arguments.py)."""

DEFAULT_FABRIC = FabricSpec(preset="hgx-h100", multipath="dmodk", batch_window_rel=0.02)
"""D-mod-K routing (InfiniBand fat trees route by destination) and 2% finish batching, as the
shipped scenarios use."""


@dataclass(frozen=True)
class StepSpec:
    """One training step of ``model`` on ``fabric`` under ``layout`` and ``schedule``.

    ``microbatches`` per pipeline (per DP replica), each of ``micro_batch_size`` sequences of
    ``seq_len`` tokens. ``layout.vpp`` is the schedule's virtual-stage count (interleaved).
    """

    model: ModelConfig
    layout: ParallelLayout
    gpu: str = "H100"
    fabric: FabricSpec = DEFAULT_FABRIC
    schedule: str = "1f1b"
    microbatches: int = 1
    micro_batch_size: int = 1
    seq_len: int = 4096
    router: RouterConfig = field(default_factory=RouterConfig)
    dispatch_dtype: str = "fp8"
    combine_dtype: str = "bf16"
    grad_reduce_dtype: str = "fp32"  # DP/EDP gradient reduce-scatter (see GRAD_REDUCE_BYTES)
    compute_dtype: str = "bf16"  # the layers' GEMMs: "fp8" as DeepSeek-V3 trains (COMPUTE_DTYPES)
    dispatcher: str = "alltoall"  # how tokens reach the experts (DISPATCHERS)
    dedup: bool = True
    lm_head: bool = True  # simulate the LM-head GEMMs on the last virtual stage
    dp_overlap: bool = True  # reduce-scatter each layer's grads after its last backward
    fb_overlap: bool = True  # FB ops (dualpipe) overlap one pass's a2a with the other's compute
    slow_gpus: tuple[tuple[int, float], ...] = ()  # (rank = GPU, factor >= 1) on every kernel
    seed: int = 0
    recompute: str = "auto"  # activation recompute (moesim.step.recompute)
    mtp_layers: int = 0  # MTP modules trained on the last virtual stage (moesim.step.mtp)

    def resolved_recompute(self) -> str:
        """The recompute the step runs: ``recompute`` unless ``auto``, then the memory plan's
        choice for this layout, schedule and precision on this GPU's HBM."""
        if self.recompute != "auto":
            return self.recompute
        # DualPipe on one stage is 1F1B (the memory model wants DualPipe's pp even)
        odd_dualpipe = self.schedule == "dualpipe" and self.layout.pp % 2
        chosen, _, _ = choose_recompute(
            self.model, self.layout, seq_len=self.seq_len,
            micro_batch_size=self.micro_batch_size, num_microbatches=self.microbatches,
            hbm_bytes=get_gpu(self.gpu).hbm_bytes,
            precision=get_precision(self.compute_dtype).gemm_dtype,
            schedule="1f1b" if odd_dualpipe else self.schedule)
        return chosen

    def __post_init__(self) -> None:
        for name in ("microbatches", "micro_batch_size", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"step.{name}", f"must be a positive integer, got {value!r}")
        for name in ("dispatch_dtype", "combine_dtype"):
            if getattr(self, name) not in WIRE_DTYPES:
                raise ConfigError(f"step.{name}", f"unknown {getattr(self, name)!r}; allowed: "
                                  + ", ".join(WIRE_DTYPES))
        dispatcher = get_dispatcher(self.dispatcher)
        if dispatcher.name != "alltoall" and self.layout.etp > 1:
            raise ConfigError("step.dispatcher", f"{dispatcher.name} is modelled with etp = 1 "
                              "only")
        if dispatcher.forwards:
            self.forward_ranks()
        n_mtp = self.mtp_layers
        if isinstance(n_mtp, bool) or not isinstance(n_mtp, int) or not (
                0 <= n_mtp <= self.model.mtp_layers):
            raise ConfigError("step.mtp_layers", f"must be an integer in [0, "
                              f"{self.model.mtp_layers}] (model {self.model.name}'s MTP "
                              f"modules), got {n_mtp!r}")
        check_recompute(self.recompute, self.model)
        if self.compute_dtype not in COMPUTE_DTYPES:
            raise ConfigError("step.compute_dtype", f"unknown {self.compute_dtype!r}; allowed: "
                              + ", ".join(COMPUTE_DTYPES))
        check_precision_gpu(self.compute_dtype, get_gpu(self.gpu), "step.compute_dtype")
        if self.grad_reduce_dtype not in GRAD_REDUCE_BYTES:
            raise ConfigError("step.grad_reduce_dtype", f"unknown {self.grad_reduce_dtype!r}; "
                              "allowed: " + ", ".join(GRAD_REDUCE_BYTES))
        self.layout.validate(self.model)
        self._check_sequence_split()
        for gpu, factor in self.slow_gpus:
            if not 0 <= gpu < self.layout.world_size:
                raise ConfigError(f"slow_gpus.{gpu}", "must be a rank in [0, "
                                  f"{self.layout.world_size})")
            if not factor >= 1:
                raise ConfigError(f"slow_gpus.{gpu}", f"slowdown must be >= 1, got {factor}")
        self.ops()  # schedule constraints (ConfigError from moesim.schedule)

    def ep_ranks_per_node(self) -> int:
        """EP ranks of one EP group in one NVLink domain, at most ep; the forwarding
        dispatchers need it to divide ep. EP groups live on the expert grid ETP x EP x EDP x PP
        (Megatron's expert RankGenerator, folded onto the ranks separately from
        tp-cp-ep-dp-pp): EP ranks are ``etp`` global ranks apart whatever tp and cp are, so a
        domain of 8 GPUs holds 8 / etp of them (ranks map onto GPUs in order). Counted from
        rank 0's EP group."""
        lay = self.layout
        domain = get_gpu(self.gpu).nvlink_domain
        members = np.asarray(lay.group_of("ep", 0)) // domain
        per_node = int(np.count_nonzero(members == members[0]))
        if lay.ep % per_node or np.any(np.bincount(members)[np.unique(members)] != per_node):
            raise ConfigError("step.dispatcher", f"{self.dispatcher} needs whole NVLink "
                              f"domains per EP group: {per_node} EP ranks per domain do not "
                              f"divide ep={lay.ep}")
        return per_node

    def forward_ranks(self) -> int:
        """EP ranks per node of a forwarding dispatcher (its RDMA leg goes once per node of
        that many consecutive EP ranks); 0 for the others."""
        dispatcher = get_dispatcher(self.dispatcher)
        return dispatcher.node_ranks(self.ep_ranks_per_node()) if dispatcher.forwards else 0

    def _check_sequence_split(self) -> None:
        """Sequence parallelism gives each TP rank seq/(tp*cp) tokens; Megatron's load-balanced
        context parallelism cuts each sequence into 2*cp chunks."""
        lay = self.layout
        parts = lay.tp * lay.cp * (2 if lay.cp > 1 else 1)
        if self.seq_len % parts:
            raise ConfigError("step.seq_len", f"{self.seq_len} must be divisible by tp*cp"
                              f"{'*2' if lay.cp > 1 else ''} = {parts} (sequence/context "
                              "parallel shards)")

    @property
    def tokens_per_microbatch(self) -> int:
        """Tokens one rank holds between layers per micro-batch: its sequence-parallel (TP)
        and context-parallel shard, ``micro_batch_size * seq_len / (tp * cp)``."""
        return self.micro_batch_size * self.seq_len // (self.layout.tp * self.layout.cp)

    @property
    def global_tokens(self) -> int:
        """Tokens of the whole step: every DP replica's micro-batches of whole sequences."""
        return self.layout.dp * self.microbatches * self.micro_batch_size * self.seq_len

    def slowdown(self) -> np.ndarray:
        """Per-rank factor on every kernel's time (the roofline's ``slowdown`` is linear)."""
        factor = np.ones(self.layout.world_size)
        for gpu, f in self.slow_gpus:
            factor[gpu] = f
        return factor

    def ops(self) -> ScheduleOps:
        """Ordered ops of each pipeline stage."""
        return build_schedule(self.schedule, self.layout.pp, self.microbatches, self.layout.vpp)

    def placement(self) -> Placement:
        """Which stage runs each chunk of the schedule (:mod:`moesim.schedule.placement`)."""
        return get_schedule(self.schedule).placement(self.layout.pp, self.layout.vpp)

    def check_fabric(self, n_gpus: int, nvlink_domain: int | None = None) -> None:
        """ConfigError unless the fabric has a GPU for every rank and, for a forwarding
        dispatcher, NVLink domains of the GPU preset's size (its nodes are what the
        dispatcher groups by)."""
        if self.layout.world_size > n_gpus:
            raise ConfigError("layout", f"world size {self.layout.world_size} needs more GPUs "
                              f"than fabric {self.fabric.preset!r} has ({n_gpus})")
        domain = get_gpu(self.gpu).nvlink_domain
        if get_dispatcher(self.dispatcher).forwards and nvlink_domain not in (None, domain):
            raise ConfigError("step.dispatcher", f"{self.dispatcher} groups ranks by {self.gpu} "
                              f"NVLink domains of {domain}; fabric {self.fabric.preset!r} has "
                              f"{nvlink_domain}")
