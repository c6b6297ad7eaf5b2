"""Shape and data-movement operations."""
