"""`nanobench pool-budget`: does the capture list fit beside the weights and the KV pool?"""
