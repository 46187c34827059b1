"""The RLVR training loop (sample, verify, update, repeat). Not built yet: see the trainer issue."""
