"""Activations and normalizations."""
