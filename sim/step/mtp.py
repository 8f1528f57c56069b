"""Multi-token prediction (MTP) modules in the step (DeepSeek-V3, arXiv:2412.19437 section 2.2).

MTP module k takes the main model's last hidden states and the embeddings of the tokens k
ahead, normalises both, projects their concatenation 2h -> h (``eh_proj``), runs one
transformer block of the main model's kind (a MoE block in DeepSeek-V3: ``model.layers.61`` of
its checkpoint) and then the output head it shares with the main model, with its own loss.
DeepSeek-V3 trains one (D = 1, section 4.2), beside the output head: "we deploy the shallowest
layers (including the embedding layer) and deepest layers (including the output head) of the
model on the same PP rank", so that the MTP module and the main model share the embedding and
the head physically (section 3.2.3). The step runs ``spec.mtp_layers`` of them (a run setting,
as Megatron's ``--mtp-num-layers``; 0 by default) on the last virtual stage after its layers:
each an extra layer priced and routed like the main model's (its own routing draw, layer
index ``num_layers + k``), an ``eh_proj`` GEMM in the layers' GEMM precision, and one more
LM-head GEMM (BF16, as the main head's). Left out, as for the main head: the two RMSNorms,
the shifted embedding lookup and the cross-entropy (elementwise over h or the vocabulary:
about 1 GB of logits read and written per pass at DeepSeek-V3's 4096 tokens, ~0.7 ms on an
H800 against the head GEMM's ~12 ms). Megatron-Core places MTP layers on the last pipeline
stage too when no layout says otherwise (``mtp_on_this_rank``). The memory plan already
holds the modules on the last stage (:mod:`moesim.parallel.memory`).
"""

from __future__ import annotations

from moesim.hardware import GemmShape, GpuSpec, gemm_backward_time_s, gemm_time_s
from moesim.hardware.roofline import gemm_wgrad_time_s
from moesim.model.accounting import mtp_module_params
from moesim.step.spec import StepSpec
from moesim.workload.costs import LayerShape


def mtp_layer_indices(spec: StepSpec) -> range:
    """Plan indices of the MTP modules' transformer blocks (after the model's layers)."""
    n = spec.model.num_layers
    return range(n, n + spec.mtp_layers)


def with_mtp(spec: StepSpec, chunks: tuple[tuple[int, ...], ...]
             ) -> tuple[tuple[int, ...], ...]:
    """``chunks`` (virtual stage -> layer indices) with the MTP blocks on the last one."""
    if not spec.mtp_layers:
        return chunks
    return (*chunks[:-1], chunks[-1] + tuple(mtp_layer_indices(spec)))


def mtp_head_s(spec: StepSpec, gpu: GpuSpec, shape: LayerShape, head: GemmShape
               ) -> tuple[float, float, float]:
    """(forward, whole backward, its wgrad part) seconds the MTP modules add to the last
    virtual stage's head per micro-batch: ``eh_proj`` and one more ``head`` GEMM each."""
    h = spec.model.hidden_size
    proj = shape.gemm(shape.gathered_tokens, -(-h // shape.tp), 2 * h)
    n = spec.mtp_layers
    return tuple(n * float(f(gpu, proj) + f(gpu, head))  # type: ignore[return-value]
                 for f in (gemm_time_s, gemm_backward_time_s, gemm_wgrad_time_s))


def mtp_params(spec: StepSpec) -> tuple[int, int]:
    """(dense, expert) parameters of one MTP module on one GPU: the TP shard of its dense
    part, the EP x ETP shard of its routed experts (shared embedding and head excluded)."""
    dense, experts = mtp_module_params(spec.model)
    lay = spec.layout
    return dense // lay.tp, experts // (lay.ep * lay.etp)
