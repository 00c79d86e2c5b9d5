"""Grading across hosts: the shards of `course grade --shard i/N` and the batch scripts and Slurm queries of `course slurm`."""
