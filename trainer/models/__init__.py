"""Models: loading a policy, reference or critic (folders, hub ids, LoRA, precision), the packaged SmolLM2 and the tiny random model for tests."""
