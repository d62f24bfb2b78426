"""The wiring of the stages: config checks, result paths, code digests, one runner per rule, the CLI.

The top layer: it may import every other part; nothing imports it.
"""
