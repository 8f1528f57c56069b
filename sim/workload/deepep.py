"""DeepEP's two-leg all-to-all as one matrix of tokens per (sender, receiver) rank.

DeepEP's internode kernels (deepseek-ai/DeepEP; DeepSeek-V3 technical report, arXiv:2412.19437,
section 3.2.2) send a token once per destination node over RDMA, to the GPU with the same
local index there (its rail peer), which forwards it over NVLink to every GPU of that node
that hosts one of the token's experts. The kernels are chunked and pipelined, so the legs
overlap; here both are in one matrix, started together (no pipeline fill is modelled):

* RDMA leg: rank ``s`` -> the rail peer of ``s`` on node ``m`` != node(s): the distinct
  tokens of ``s`` with an expert on ``m`` (``node_tokens[s, m]``);
* NVLink leg: forwarder ``(m, l)`` -> ``(m, j)``: the distinct tokens of every rail ``l``
  rank ``(n, l)`` that ``(m, j)`` needs, summed over the source nodes ``n`` (``n = m``: the
  forwarder's own node, sent straight); ``j = l`` (the diagonal) is a local copy.

Combine moves the same tokens back (the transpose), the forwarder reducing a token's expert
outputs before its RDMA leg. ``moesim.validate.deepep`` checks this traffic against DeepEP's
published bandwidths; ``moesim.step`` uses it for ``dispatcher: deepep``.
"""

from __future__ import annotations

import numpy as np


def hierarchical_tokens(dedup: np.ndarray, node_tokens: np.ndarray,
                        ranks_per_node: int) -> np.ndarray:
    """float [ep, ep]: tokens each rank sends each rank over both legs (module docstring).

    ``dedup`` [ep, ep]: distinct tokens src -> dst rank; ``node_tokens`` [ep, nodes]: distinct
    tokens src -> node; ranks ``m * ranks_per_node + l`` are node ``m``'s, ``l`` its rail.

    >>> d = np.array([[1, 1, 1, 1]] * 4)  # every token of every rank needs every rank
    >>> hierarchical_tokens(d, np.array([[1, 1]] * 4), 2).astype(int).tolist()
    [[2, 2, 1, 0], [2, 2, 0, 1], [1, 0, 2, 2], [0, 1, 2, 2]]
    """
    ep, g = dedup.shape[0], ranks_per_node
    nodes = ep // g
    out = np.zeros((ep, ep))
    src = np.repeat(np.arange(ep), nodes)
    node = np.tile(np.arange(nodes), ep)
    remote = node != src // g
    np.add.at(out, (src[remote], node[remote] * g + src[remote] % g),
              node_tokens.reshape(-1)[remote])
    fwd = dedup.reshape(nodes, g, nodes, g).sum(axis=0)  # [l, m, j]
    rail, m, j = np.indices(fwd.shape)
    np.add.at(out, ((m * g + rail).ravel(), (m * g + j).ravel()), fwd.ravel())
    return out
