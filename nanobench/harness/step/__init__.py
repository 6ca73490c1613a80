"""The user's step: `--target` specs and how they load (built-in, third-party, transformers),
explaining and probing a target's step in-process, dynamo's view of one call (graphs, breaks, guards, hits) and
the remedies drawn from it. Imports nothing else of harness but `errors`.
"""
