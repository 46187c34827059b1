"""Learned reward models: preference pairs labelled by a verifier (`rlvr make-prefs`) and Bradley-Terry training (`rlvr train-rm`)."""
