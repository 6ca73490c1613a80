"""The CLI vocabulary every command shares: options and the names they take, validation before
anything is measured, the console (one-line errors, progress), the lifeline that ends a run's
processes together, and the tested versions. Imports only `errors` and `step` (a --target's
name) below it; no torch.
"""
