"""Parallel layouts (Megatron names and rank order), their placement on a fabric, and the
per-GPU memory each layout needs."""
