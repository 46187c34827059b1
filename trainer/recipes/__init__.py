"""Complete jobs built on the trainer: the R1-Zero main job (`scripts/r1zero.sh`)."""
