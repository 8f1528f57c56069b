"""The MoE workload: layer shapes and costs, elementwise kernels, DeepEP traffic, layer stacks."""
