"""Evaluation: pass@k of a policy on held-out tasks (in training and `rlvr eval`), its sample records, the OpenAI-compatible endpoint client and the pass@k plot."""
