"""Frameworks and their CUDA builds: versions, pins, CUDA packages, torch's preload."""
