"""Isolated execution of untrusted code. Not built yet: see the sandbox issue."""
