"""Sampling: rollout engines (local, colocated vLLM, an inference server), the rollout batch, continuous batching for evaluation, multi-turn episodes, prompt rendering."""
