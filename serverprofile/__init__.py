"""This server's own numbers: the machine profile the demo worker measures when it starts (workers/machine_profile.py:
memory bandwidth, fp32 matmul rate, the real model's decode step), stored as `MachineProfile`, and the lesson
figures and calculator defaults that read it (`figures.py`)."""
