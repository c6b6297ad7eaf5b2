"""Dense layers and convolutions."""
