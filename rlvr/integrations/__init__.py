"""Use rlvr environments and verifiers from other trainers (TRL, verl) without switching."""
