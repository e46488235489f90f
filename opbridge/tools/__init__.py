"""Developer tools run as ``python -m opbridge.tools.<tool>`` (documentation generators)."""
