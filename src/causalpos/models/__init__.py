"""Trained and pretrained decoders: corpus sampling, tokenizer, training, GGUF loading, activation extraction.

Stage order of the DAG: sample, tokenizer, train, length_eval, pretrained, extract. Imports only the bottom
layer (io, tables, devices, matrices).
"""
