"""Suite-wide test settings."""

import torch

# One intra-op thread: the tiny models gain nothing from more, and on a shared 2-core machine
# spinning OpenMP workers slow every test down by an order of magnitude.
torch.set_num_threads(1)
